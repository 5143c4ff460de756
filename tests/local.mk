# tests/: the recorder core's tests and the whole-tree checks. Other areas keep their
# test rules in their own fragments.
TEST_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
noinst_HEADERS += tests/tap.h tests/rng.h

check_PROGRAMS += tests/libtrace/recorder-t tests/libtrace/mtx/util-t
TESTS += tests/libtrace/recorder-t tests/libtrace/mtx/util-t
tests_libtrace_recorder_t_LDADD = $(TEST_LDADD)
tests_libtrace_mtx_util_t_LDADD = $(TEST_LDADD)
check_PROGRAMS += tests/libtrace/recorder_stream-t
TESTS += tests/libtrace/recorder_stream-t
tests_libtrace_recorder_stream_t_LDADD = $(TEST_LDADD)

TESTS += tests/format-check.sh tests/exports-check.sh tests/examples-t.sh \
	tests/headers-check.sh
EXTRA_DIST += tests/lsan.supp
EXTRA_DIST += tests/format-check.sh tests/exports-check.sh tests/examples-t.sh \
	tests/headers-check.sh
