# bench/: benchmark programs, built with everything and never installed; run them as
# described in BENCHMARKS.md. Other areas add theirs in their own fragments.
noinst_PROGRAMS += bench/recorder_bench
bench_recorder_bench_LDADD = libmemtrace.la

# Mixed Python and native stacks against native ones, inside a real interpreter.
noinst_PROGRAMS += bench/python_bench
bench_python_bench_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
bench_python_bench_LDFLAGS = $(AM_LDFLAGS) -export-dynamic
# bench/workload and bench/analysis_bench.sh: the analysis commands against
# heaptrack_print on one workload (BENCHMARKS.md, "Analysis commands").
noinst_PROGRAMS += bench/workload
bench_workload_LDADD = libmemtrace.la
bench_workload_LDFLAGS = -no-install
EXTRA_DIST += bench/analysis_bench.sh
# A training-loop .memtrace of N events for the web viewer's scale runs
# (bench/web_bench.mjs, BENCHMARKS.md "Web viewer").
noinst_PROGRAMS += bench/gen_trace
bench_gen_trace_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_DIST += bench/web_bench.mjs
# bench/import_bench.sh: memtrace import of a PyTorch pickle (grown by
# bench/gen_pickle.py) against Python's pickle.load of the same file.
EXTRA_DIST += bench/import_bench.sh bench/gen_pickle.py
# The reader's inflater against zlib's on a file's EVENTS chunks (BENCHMARKS.md,
# "Analysis commands").
noinst_PROGRAMS += bench/inflate_bench
bench_inflate_bench_LDADD = $(SNAPSHOT_LIBS)
# The least the import's reading thread could spend: a PyTorch pickle's bytes walked
# with nothing built (BENCHMARKS.md, "PyTorch pickle import").
noinst_PROGRAMS += bench/pickle_walk
