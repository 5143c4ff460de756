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
