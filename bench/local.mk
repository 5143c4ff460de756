# bench/: benchmark programs, built with everything and never installed; run them as
# described in BENCHMARKS.md. Other areas add theirs in their own fragments.
noinst_PROGRAMS += bench/recorder_bench
bench_recorder_bench_LDADD = libmemtrace.la
