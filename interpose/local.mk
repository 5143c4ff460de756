# interpose: libmemtrace_preload.so, the LD_PRELOAD library `memtrace run` uses.
# It links the shared libmemtrace so that a program using memtrace's allocator and
# the preload share one recorder, and libmtx (libtrace/mtx/local.mk) as a hidden
# copy of its own.
pkglib_LTLIBRARIES = libmemtrace_preload.la
libmemtrace_preload_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libmemtrace_preload_la_SOURCES = \
	interpose/interpose.h interpose/internal.h interpose/caching.h interpose/segtab.h \
	interpose/preload.c interpose/segtab.c interpose/config.c interpose/sampler.c \
	interpose/backends.c interpose/cu.h interpose/cuda.c interpose/cudart.c \
	interpose/caching.c
libmemtrace_preload_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-export-symbols $(srcdir)/interpose/exports.txt
libmemtrace_preload_la_LIBADD = libmemtrace.la libmtx.la $(LIBS)
EXTRA_libmemtrace_preload_la_DEPENDENCIES = $(srcdir)/interpose/exports.txt
EXTRA_DIST += interpose/exports.txt

# Tests: programs under test are plain C linked with the fake driver, never with
# memtrace; the TAP drivers run them under LD_PRELOAD and read what they wrote.
IP_TEST_CPPFLAGS = $(AM_CPPFLAGS) -DBUILDDIR='"$(abs_top_builddir)"'
IP_TEST_DEPS = libmemtrace_preload.la tests/interpose/cuda_prog $(FAKE_CUDA_LIB)
check_PROGRAMS += tests/interpose/cuda_prog
tests_interpose_cuda_prog_LDADD = -Ltests/fakes -l:libcuda.so.1 -lpthread
EXTRA_tests_interpose_cuda_prog_DEPENDENCIES = $(FAKE_CUDA_LIB)
EXTRA_DIST += tests/interpose/harness.h

check_PROGRAMS += tests/interpose/driver-t
TESTS += tests/interpose/driver-t
tests_interpose_driver_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_driver_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_driver_t_DEPENDENCIES = $(IP_TEST_DEPS)

check_PROGRAMS += tests/interpose/getproc_prog tests/interpose/getproc-t
TESTS += tests/interpose/getproc-t
tests_interpose_getproc_prog_LDADD = $(LIBS)
tests_interpose_getproc_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_getproc_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_getproc_t_DEPENDENCIES = $(IP_TEST_DEPS) tests/interpose/getproc_prog

check_PROGRAMS += tests/interpose/threads-t tests/interpose/fork-t tests/interpose/kill-t \
	tests/interpose/sampler-t
TESTS += tests/interpose/threads-t tests/interpose/fork-t tests/interpose/kill-t \
	tests/interpose/sampler-t
tests_interpose_sampler_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_sampler_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_sampler_t_DEPENDENCIES = $(IP_TEST_DEPS)
tests_interpose_threads_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_threads_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_threads_t_DEPENDENCIES = $(IP_TEST_DEPS)
tests_interpose_fork_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_fork_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_fork_t_DEPENDENCIES = $(IP_TEST_DEPS)
tests_interpose_kill_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_kill_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_kill_t_DEPENDENCIES = $(IP_TEST_DEPS) memtrace$(EXEEXT)

check_PROGRAMS += tests/interpose/config-t
TESTS += tests/interpose/config-t tests/interpose/exports-t.sh
tests_interpose_config_t_SOURCES = tests/interpose/config-t.c interpose/config.c
tests_interpose_config_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_config_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_config_t_DEPENDENCIES = $(IP_TEST_DEPS)
EXTRA_DIST += tests/interpose/exports-t.sh

check_PROGRAMS += tests/interpose/segtab-t
TESTS += tests/interpose/segtab-t
tests_interpose_segtab_t_SOURCES = tests/interpose/segtab-t.c interpose/segtab.c
tests_interpose_segtab_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

# memtrace run under a real mpirun (Open MPI); skips where mpirun is absent.
check_PROGRAMS += tests/interpose/mpi-t
TESTS += tests/interpose/mpi-t
tests_interpose_mpi_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_mpi_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_mpi_t_DEPENDENCIES = $(IP_TEST_DEPS) memtrace$(EXEEXT)

check_PROGRAMS += tests/interpose/cudart-t
TESTS += tests/interpose/cudart-t
tests_interpose_cudart_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_cudart_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_cudart_t_DEPENDENCIES = $(IP_TEST_DEPS)
if HAVE_CUDART
EXTRA_tests_interpose_cudart_t_DEPENDENCIES += tests/fakes/cudart_static_prog \
	tests/fakes/cudart_shared_prog
endif

# `memtrace run`, in a convenience library so that it alone gets the installed
# location of the preload library.
noinst_LTLIBRARIES += libmemtrace_run.la
libmemtrace_run_la_SOURCES = viewer/run.c
libmemtrace_run_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/viewer \
	-DMT_PKGLIBDIR='"$(pkglibdir)"'
memtrace_LDADD += libmemtrace_run.la libmtx.la

check_PROGRAMS += tests/interpose/run-t
TESTS += tests/interpose/run-t
tests_interpose_run_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_run_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_run_t_DEPENDENCIES = $(IP_TEST_DEPS) memtrace$(EXEEXT)

# bench/interpose_bench: LD_LIBRARY_PATH=tests/fakes ./bench/interpose_bench
noinst_PROGRAMS += bench/interpose_bench
bench_interpose_bench_CPPFLAGS = $(AM_CPPFLAGS) -DBUILDDIR='"$(abs_top_builddir)"'
bench_interpose_bench_LDADD = -Ltests/fakes -l:libcuda.so.1
EXTRA_bench_interpose_bench_DEPENDENCIES = $(FAKE_CUDA_LIB) libmemtrace_preload.la
include interpose/ze.mk

# MEMTRACE_CACHING=1 (caching-t), and one recorder with a program that uses the
# allocator through the shared libmemtrace (library-t; -no-install: no libtool
# wrapper script between the test and the program).
check_PROGRAMS += tests/interpose/caching_prog tests/interpose/caching-t
TESTS += tests/interpose/caching-t
tests_interpose_caching_prog_LDADD = -Ltests/fakes -l:libcuda.so.1
EXTRA_tests_interpose_caching_prog_DEPENDENCIES = $(FAKE_CUDA_LIB)
tests_interpose_caching_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_caching_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_caching_t_DEPENDENCIES = $(IP_TEST_DEPS) tests/interpose/caching_prog \
	memtrace$(EXEEXT)

check_PROGRAMS += tests/interpose/library_prog tests/interpose/library-t
TESTS += tests/interpose/library-t
tests_interpose_library_prog_LDADD = libmemtrace.la $(LIBS)
tests_interpose_library_prog_LDFLAGS = $(AM_LDFLAGS) -no-install
tests_interpose_library_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_library_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_library_t_DEPENDENCIES = $(IP_TEST_DEPS) tests/interpose/library_prog \
	$(FAKE_CUDA_LIB)

# A driver that refuses allocations (FAKE_CUDA_FAIL_AT, and for want of room).
check_PROGRAMS += tests/interpose/oom-t
TESTS += tests/interpose/oom-t
tests_interpose_oom_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_oom_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_oom_t_DEPENDENCIES = $(IP_TEST_DEPS)
