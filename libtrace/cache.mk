# libtrace: the caching allocator (PyTorch's policy) and PyTorch's pluggable-allocator
# entry points.
libmemtrace_core_la_SOURCES += \
	libtrace/cache.c libtrace/cache_config.c libtrace/cache_stats.c \
	libtrace/cache_impl.h libtrace/torch.c
include_HEADERS += libtrace/memtrace_alloc.h

check_PROGRAMS += tests/libtrace/cache-t tests/libtrace/cache_config-t \
	tests/libtrace/cache_random-t tests/libtrace/cache_threads-t
TESTS += tests/libtrace/cache-t tests/libtrace/cache_config-t \
	tests/libtrace/cache_random-t tests/libtrace/cache_threads-t
tests_libtrace_cache_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_libtrace_cache_config_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_libtrace_cache_random_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_libtrace_cache_threads_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
# A stream opened while the allocator holds memory, replayed by the model.
check_PROGRAMS += tests/libtrace/stream_before-t
TESTS += tests/libtrace/stream_before-t
tests_libtrace_stream_before_t_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/snapshot
tests_libtrace_stream_before_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

noinst_PROGRAMS += bench/cache_bench
bench_cache_bench_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

check_PROGRAMS += tests/libtrace/torch-t
TESTS += tests/libtrace/torch-t
tests_libtrace_torch_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_libtrace_torch_t_DEPENDENCIES = $(FAKE_CUDA_LIB)

# Sixteen threads through the allocator and the recorder at once (streams, dumps).
check_PROGRAMS += tests/libtrace/stress-t
TESTS += tests/libtrace/stress-t
tests_libtrace_stress_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

# The host device failing chosen allocations (MEMTRACE_HOST_FAIL_AT), under the allocator.
check_PROGRAMS += tests/libtrace/cache_oom-t
TESTS += tests/libtrace/cache_oom-t
tests_libtrace_cache_oom_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
