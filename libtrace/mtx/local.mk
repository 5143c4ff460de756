# libtrace/mtx: libmtx, the internal convenience library of what libmemtrace, the
# preload library and the memtrace CLI all use, compiled once and linked into each:
# util.c (clock, formatting, mmap arenas), the %-pattern expansion of file names,
# the rank, and the names of the MEMTRACE_* variables. It depends on libc alone.
# Functions keep util.c's mt_ names; the ones added here are mtx_.
noinst_LTLIBRARIES += libmtx.la
libmtx_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
libmtx_la_SOURCES = libtrace/mtx/util.c libtrace/mtx/util.h \
	libtrace/mtx/env.h libtrace/mtx/pattern.c libtrace/mtx/pattern.h \
	libtrace/mtx/rank.c libtrace/mtx/rank.h \
	libtrace/mtx/escape.c libtrace/mtx/escape.h
# The CUDA driver API subset, shared by libtrace/device_cuda.c, interpose/cuda.c
# and tests/fakes/fake_cuda.c.
noinst_HEADERS += libtrace/mtx/cuda_driver.h
