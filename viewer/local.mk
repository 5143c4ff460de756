# viewer: the memtrace command-line tool. One file per subcommand; main.c holds the
# command table. It links the format library (libmemtrace_snapshot) and, for `run`,
# nothing more: no recording runtime, no libunwind or libdw.
bin_PROGRAMS += memtrace
memtrace_SOURCES = viewer/main.c viewer/cli.h viewer/cli_args.c viewer/cli_fmt.c viewer/cli_read.c \
	viewer/cli_stack.c viewer/cli_json.c viewer/info.c viewer/summary.c \
	viewer/diff.c
memtrace_LDADD = $(SNAPSHOT_LIBS)
dist_man_MANS += docs/memtrace.1

# Tests write files with the internal writer and run the built memtrace binary.
VIEWER_TESTS = tests/viewer/cli-t tests/viewer/info-t tests/viewer/summary-t \
	tests/viewer/diff-t
check_PROGRAMS += $(VIEWER_TESTS)
TESTS += $(VIEWER_TESTS)
tests_viewer_cli_t_SOURCES = tests/viewer/cli-t.c tests/viewer/cli-util.h
tests_viewer_cli_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_info_t_SOURCES = tests/viewer/info-t.c tests/viewer/cli-util.h
tests_viewer_info_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_summary_t_SOURCES = tests/viewer/summary-t.c tests/viewer/cli-util.h
tests_viewer_summary_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_viewer_diff_t_SOURCES = tests/viewer/diff-t.c tests/viewer/cli-util.h
tests_viewer_diff_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
