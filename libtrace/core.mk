# libmemtrace: the recorder core. libmemtrace_core is the same code as a
# convenience library, so tests can reach the hidden internals.
noinst_LTLIBRARIES += libmemtrace_core.la
libmemtrace_core_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden -DMEMTRACE_BUILDING
libmemtrace_core_la_SOURCES = \
	libtrace/recorder.c libtrace/recorder.h libtrace/recorder_impl.h \
	libtrace/recorder_ring.c libtrace/recorder_meta.c libtrace/recorder_frames.c \
	libtrace/recorder_state.c libtrace/recorder_stream.c libtrace/recorder_dump.c \
	libtrace/strtab.c libtrace/strtab.h \
	libtrace/stack.c libtrace/stack.h libtrace/stack_py.c libtrace/stack_py.h \
	libtrace/symbolize.c libtrace/symbolize.h
libmemtrace_core_la_LIBADD = libmtx.la $(MEMTRACE_DEPLIBS)

lib_LTLIBRARIES += libmemtrace.la
libmemtrace_la_SOURCES =
libmemtrace_la_LIBADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
# The exported API is not meant to be interposed: the allocator's calls into the
# recorder bind inside the library instead of going through the PLT.
libmemtrace_la_LDFLAGS = $(AM_LDFLAGS) -version-info 0:0:0 -Wl,-Bsymbolic-functions
include_HEADERS += libtrace/memtrace.h
include libtrace/stack-tests.mk
