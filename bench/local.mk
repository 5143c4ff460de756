# bench/: benchmark programs, built with everything and never installed; run them as
# described in BENCHMARKS.md. Other areas add theirs in their own fragments.
noinst_PROGRAMS += bench/recorder_bench
bench_recorder_bench_LDADD = libmemtrace.la

# A training-loop .memtrace of N events for the web viewer's scale runs
# (bench/web_bench.mjs, BENCHMARKS.md "Web viewer").
noinst_PROGRAMS += bench/gen_trace
bench_gen_trace_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_DIST += bench/web_bench.mjs
