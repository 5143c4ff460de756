# snapshot: libmemtrace_snapshot, the .memtrace format (docs/FORMAT.md) and everything
# that reads it: writer, streaming reader, names and error texts. It depends on zlib
# and jansson only: the recording runtime (libmemtrace_core) links it and uses its
# writer, and the memtrace CLI links it without the runtime.
noinst_LTLIBRARIES += libmemtrace_snapshot.la
libmemtrace_snapshot_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden -DMEMTRACE_BUILDING
libmemtrace_snapshot_la_SOURCES = snapshot/writer.c snapshot/writer.h \
	snapshot/reader.c snapshot/inflate.c snapshot/inflate.h \
	snapshot/format.h snapshot/names.c snapshot/addrtab.c snapshot/addrtab.h \
	snapshot/replay.c snapshot/replay.h \
	snapshot/pickle.c snapshot/pickle.h \
	snapshot/import.h snapshot/import_intern.c snapshot/import_pytorch.c snapshot/import_merge.c \
	snapshot/before.c snapshot/before.h \
	snapshot/export.h snapshot/export.c snapshot/export_pytorch.c snapshot/export_trace.c \
	snapshot/export_out.h snapshot/export_out.c \
	snapshot/frames.c snapshot/frames.h
libmemtrace_snapshot_la_LIBADD = $(JANSSON_LIBS) $(ZLIB_LIBS) $(PTHREAD_LIBS)
SNAPSHOT_LIBS = libmemtrace_snapshot.la $(JANSSON_LIBS) $(ZLIB_LIBS) $(PTHREAD_LIBS)
include_HEADERS += snapshot/memtrace_snapshot.h
libmemtrace_core_la_LIBADD += libmemtrace_snapshot.la

# snapshot/ includes nothing of libtrace/ but its public header memtrace.h.
TESTS += tests/snapshot/layering-check.sh
EXTRA_DIST += tests/snapshot/layering-check.sh

check_PROGRAMS += tests/snapshot/writer-t
TESTS += tests/snapshot/writer-t
tests_snapshot_writer_t_SOURCES = tests/snapshot/writer-t.c tests/snapshot/training.h \
	tests/snapshot/util.h
tests_snapshot_writer_t_LDADD = $(SNAPSHOT_LIBS)

check_PROGRAMS += tests/snapshot/pickle-t
TESTS += tests/snapshot/pickle-t
tests_snapshot_pickle_t_SOURCES = tests/snapshot/pickle-t.c tests/snapshot/util.h
tests_snapshot_pickle_t_LDADD = $(SNAPSHOT_LIBS)

check_PROGRAMS += tests/snapshot/reader-t
TESTS += tests/snapshot/reader-t
tests_snapshot_reader_t_SOURCES = tests/snapshot/reader-t.c tests/snapshot/util.h
tests_snapshot_reader_t_LDADD = $(SNAPSHOT_LIBS)

check_PROGRAMS += tests/snapshot/reader_ahead-t
TESTS += tests/snapshot/reader_ahead-t
tests_snapshot_reader_ahead_t_SOURCES = tests/snapshot/reader_ahead-t.c tests/snapshot/util.h
tests_snapshot_reader_ahead_t_LDADD = $(SNAPSHOT_LIBS)

check_PROGRAMS += tests/snapshot/inflate-t
TESTS += tests/snapshot/inflate-t
tests_snapshot_inflate_t_SOURCES = tests/snapshot/inflate-t.c
tests_snapshot_inflate_t_LDADD = $(SNAPSHOT_LIBS)

check_PROGRAMS += tests/snapshot/addrtab-t
TESTS += tests/snapshot/addrtab-t
tests_snapshot_addrtab_t_SOURCES = tests/snapshot/addrtab-t.c
tests_snapshot_addrtab_t_LDADD = $(SNAPSHOT_LIBS)

check_PROGRAMS += tests/snapshot/suites-t
TESTS += tests/snapshot/suites-t
tests_snapshot_suites_t_CPPFLAGS = $(AM_CPPFLAGS) -DMT_SRCDIR='"$(abs_top_srcdir)"'
tests_snapshot_suites_t_LDADD = $(SNAPSHOT_LIBS)
EXTRA_DIST += tests/snapshot/valid tests/snapshot/invalid

# Rewrites the committed cases: tests/snapshot/gen-cases $(top_srcdir)/tests/snapshot
check_PROGRAMS += tests/snapshot/gen-cases
tests_snapshot_gen_cases_SOURCES = tests/snapshot/gen-cases.c tests/snapshot/util.h
tests_snapshot_gen_cases_LDADD = $(SNAPSHOT_LIBS)

# Encode/decode throughput and bytes per event of the EVENTS encoding.
noinst_PROGRAMS += bench/format_bench
bench_format_bench_SOURCES = bench/format_bench.c tests/snapshot/training.h
bench_format_bench_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

# The replay model on the committed cases tests/replay/<case>/ (docs/REPLAY.md).
# Rewrite the cases' input.memtrace from their events.json with:
#   tests/replay/gen-replay-cases $(top_srcdir)/tests/replay
check_PROGRAMS += tests/replay/replay-t tests/replay/gen-replay-cases
TESTS += tests/replay/replay-t
tests_replay_replay_t_CPPFLAGS = $(AM_CPPFLAGS) -DMT_SRCDIR='"$(abs_top_srcdir)"'
tests_replay_replay_t_LDADD = $(SNAPSHOT_LIBS)
tests_replay_gen_replay_cases_LDADD = $(SNAPSHOT_LIBS)
# The case folders by name: the build's tests/replay/ holds objects and logs.
EXTRA_DIST += tests/replay/alloc-free \
	tests/replay/partial-unmap \
	tests/replay/peak-stacks \
	tests/replay/pending-free \
	tests/replay/replaced-alloc \
	tests/replay/segments \
	tests/replay/temporaries \
	tests/replay/truncated \
	tests/replay/unknown-free
EXTRA_DIST += docs/PYTORCH.md

check_PROGRAMS += tests/snapshot/frames-t
TESTS += tests/snapshot/frames-t
tests_snapshot_frames_t_SOURCES = tests/snapshot/frames-t.c
tests_snapshot_frames_t_CPPFLAGS = $(AM_CPPFLAGS) -DMT_SRCDIR='"$(abs_top_srcdir)"'
tests_snapshot_frames_t_LDADD = $(SNAPSHOT_LIBS)
EXTRA_DIST += tests/snapshot/frames-cases.json
