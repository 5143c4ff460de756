# interpose: libmemtrace_preload.so, the LD_PRELOAD library `memtrace run` uses.
# It links the shared libmemtrace so that a program using memtrace's allocator and
# the preload share one recorder; util.c is compiled in as a hidden copy.
pkglib_LTLIBRARIES = libmemtrace_preload.la
libmemtrace_preload_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libmemtrace_preload_la_SOURCES = \
	interpose/interpose.h interpose/internal.h \
	interpose/preload.c interpose/config.c interpose/cuda.c interpose/cudart.c \
	interpose/sampler.c libtrace/util.c
libmemtrace_preload_la_LDFLAGS = $(AM_LDFLAGS) -module -avoid-version -shared \
	-export-symbols $(srcdir)/interpose/exports.txt
libmemtrace_preload_la_LIBADD = libmemtrace.la $(LIBS)
EXTRA_libmemtrace_preload_la_DEPENDENCIES = $(srcdir)/interpose/exports.txt
EXTRA_DIST += interpose/exports.txt
