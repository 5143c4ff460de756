# Native stacks and symbolization: their tests and micro-benchmark.
check_PROGRAMS += tests/libtrace/stack-t tests/libtrace/symbolize-t
TESTS += tests/libtrace/stack-t tests/libtrace/symbolize-t
tests_libtrace_stack_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_libtrace_symbolize_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

noinst_PROGRAMS += bench/stack_bench
bench_stack_bench_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

# Trimming of memtrace's own frames applies to the shared library only.
check_PROGRAMS += tests/libtrace/stack_shared-t
TESTS += tests/libtrace/stack_shared-t
tests_libtrace_stack_shared_t_LDADD = libmemtrace.la

# CPython frames in a C program that dlopens libpython itself.
check_PROGRAMS += tests/libtrace/stack_py-t
TESTS += tests/libtrace/stack_py-t
tests_libtrace_stack_py_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS) -ldl
