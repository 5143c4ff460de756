# viewer: the memtrace command-line tool. One file per subcommand; main.c holds the
# command table. It links the format library (libmemtrace_snapshot) and, for `run`,
# nothing more: no recording runtime, no libunwind or libdw.
bin_PROGRAMS += memtrace
memtrace_SOURCES = viewer/main.c viewer/cli.h viewer/cli_args.c viewer/cli_fmt.c viewer/cli_read.c \
	viewer/cli_stack.c viewer/cli_json.c viewer/cli_files.c viewer/info.c viewer/summary.c \
	viewer/segments.c \
	viewer/timeline.c \
	viewer/stats.c \
	viewer/cli_rank.h viewer/cli_rank.c \
	viewer/peak.c \
	viewer/leaks.c \
	viewer/top.c \
	viewer/flamegraph.c \
	viewer/export.c \
	viewer/import.c \
	viewer/merge.c \
	viewer/diff.c \
	viewer/web.h viewer/html.c viewer/view.c
memtrace_LDADD = $(SNAPSHOT_LIBS) libmemtrace_webdir.la
dist_man_MANS += docs/memtrace.1

# Where the web viewer's files are: only webdir.c gets the locations from make.
noinst_LTLIBRARIES += libmemtrace_webdir.la
libmemtrace_webdir_la_SOURCES = viewer/webdir.c
libmemtrace_webdir_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/viewer \
	-DMT_WEBDIR='"$(pkgdatadir)/web"' -DMT_SRC_WEBDIR='"$(abs_top_srcdir)/web"' \
	-DMT_BUILDDIR='"$(abs_top_builddir)"'
webdir = $(pkgdatadir)/web
dist_web_DATA = web/index.html web/viewer.css web/format.js web/pickle.js web/replay.js \
	web/worker.js web/timeline.js web/compare.js web/app.js

# Tests write files with the internal writer and run the built memtrace binary.
VIEWER_TESTS = tests/viewer/cli-t tests/viewer/info-t tests/viewer/summary-t \
	tests/viewer/segments-t \
	tests/viewer/timeline-t \
	tests/viewer/stats-t \
	tests/viewer/peak-t \
	tests/viewer/leaks-t \
	tests/viewer/top-t \
	tests/viewer/flamegraph-t \
	tests/viewer/files-t \
	tests/viewer/export-t \
	tests/viewer/import-t \
	tests/viewer/merge-t \
	tests/viewer/diff-t \
	tests/viewer/stacks-t
check_PROGRAMS += $(VIEWER_TESTS)
TESTS += $(VIEWER_TESTS)
tests_viewer_cli_t_SOURCES = tests/viewer/cli-t.c tests/viewer/cli-util.h
tests_viewer_cli_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_info_t_SOURCES = tests/viewer/info-t.c tests/viewer/cli-util.h
tests_viewer_info_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_summary_t_SOURCES = tests/viewer/summary-t.c tests/viewer/cli-util.h
tests_viewer_summary_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_segments_t_SOURCES = tests/viewer/segments-t.c tests/viewer/cli-util.h
tests_viewer_segments_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_timeline_t_SOURCES = tests/viewer/timeline-t.c tests/viewer/cli-util.h
tests_viewer_timeline_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_stats_t_SOURCES = tests/viewer/stats-t.c tests/viewer/cli-util.h
tests_viewer_stats_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_peak_t_SOURCES = tests/viewer/peak-t.c tests/viewer/cli-util.h tests/viewer/rank-util.h
tests_viewer_peak_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_leaks_t_SOURCES = tests/viewer/leaks-t.c tests/viewer/cli-util.h tests/viewer/rank-util.h
tests_viewer_leaks_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_top_t_SOURCES = tests/viewer/top-t.c tests/viewer/cli-util.h tests/viewer/rank-util.h
tests_viewer_top_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_flamegraph_t_SOURCES = tests/viewer/flamegraph-t.c tests/viewer/cli-util.h \
	tests/viewer/rank-util.h
tests_viewer_flamegraph_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_files_t_SOURCES = tests/viewer/files-t.c tests/viewer/cli-util.h
tests_viewer_files_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_export_t_SOURCES = tests/viewer/export-t.c tests/viewer/cli-util.h
tests_viewer_export_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_import_t_SOURCES = tests/viewer/import-t.c tests/viewer/cli-util.h
tests_viewer_import_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_merge_t_SOURCES = tests/viewer/merge-t.c tests/viewer/cli-util.h
tests_viewer_merge_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_DIST += tests/viewer/pytorch-check.py
tests_viewer_diff_t_SOURCES = tests/viewer/diff-t.c tests/viewer/cli-util.h
tests_viewer_diff_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_stacks_t_SOURCES = tests/viewer/stacks-t.c tests/viewer/cli-util.h
tests_viewer_stacks_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
