# libtrace: the device runtime (host, cuda, level zero backends); see Makefile.am
libmemtrace_core_la_SOURCES += \
	libtrace/device.c libtrace/device_impl.h \
	libtrace/device_host.c libtrace/device_cuda.c libtrace/device_ze.c
include_HEADERS += libtrace/memtrace_device.h
if HAVE_LEVEL_ZERO
libmemtrace_core_la_LIBADD += $(ZE_LIBS)
endif

check_PROGRAMS += tests/libtrace/device-t
TESTS += tests/libtrace/device-t
tests_libtrace_device_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

# The CUDA backend against the fake driver; the test re-executes itself with
# LD_LIBRARY_PATH on FAKE_LIBDIR and skips when the fake is absent.
check_PROGRAMS += tests/libtrace/device_cuda-t
TESTS += tests/libtrace/device_cuda-t
tests_libtrace_device_cuda_t_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFAKE_LIBDIR='"$(abs_top_builddir)/tests/fakes"'
tests_libtrace_device_cuda_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_libtrace_device_cuda_t_DEPENDENCIES = $(FAKE_CUDA_LIB)

# The Level Zero backend against the fake driver (ZE_ENABLE_ALT_DRIVERS); skips when
# the fake is absent, checks ENOTSUP when built without Level Zero.
check_PROGRAMS += tests/libtrace/device_ze-t
TESTS += tests/libtrace/device_ze-t
tests_libtrace_device_ze_t_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFAKE_LIBDIR='"$(abs_top_builddir)/tests/fakes"'
tests_libtrace_device_ze_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS) $(ZE_LIBS)
