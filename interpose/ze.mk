# interpose/ze.mk: the Level Zero wrappers of the preload library and their test.
# Without Level Zero (--without-level-zero, or no loader found) the family is not
# built, and interpose/backends.c leaves its table out of the list.
if HAVE_LEVEL_ZERO
libmemtrace_preload_la_SOURCES += interpose/ze.c interpose/ze.h interpose/ze_trace.c \
	interpose/ze_sysman.c
endif
EXTRA_DIST += interpose/ze.mk interpose/ze.c interpose/ze.h interpose/ze_trace.c \
	interpose/ze_sysman.c

check_PROGRAMS += tests/interpose/ze-t
TESTS += tests/interpose/ze-t
tests_interpose_ze_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_ze_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_ze_t_DEPENDENCIES = $(IP_TEST_DEPS)
if HAVE_LEVEL_ZERO
check_PROGRAMS += tests/interpose/ze_prog
tests_interpose_ze_prog_LDADD = $(ZE_LIBS) $(LIBS)
EXTRA_tests_interpose_ze_t_DEPENDENCIES += tests/interpose/ze_prog $(FAKE_ZE_LIB)
endif
EXTRA_DIST += tests/interpose/ze_prog.c

# The tracing-layer route (interpose/ze_trace.c) and sysman counters (ze_sysman.c).
check_PROGRAMS += tests/interpose/ze_trace-t tests/interpose/ze_sysman-t
TESTS += tests/interpose/ze_trace-t tests/interpose/ze_sysman-t
# Allocations the driver refuses: oom events through both routes.
check_PROGRAMS += tests/interpose/ze_oom-t
TESTS += tests/interpose/ze_oom-t
tests_interpose_ze_oom_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_ze_oom_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_ze_oom_t_DEPENDENCIES = $(IP_TEST_DEPS)
tests_interpose_ze_trace_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_ze_trace_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_ze_trace_t_DEPENDENCIES = $(IP_TEST_DEPS)
tests_interpose_ze_sysman_t_CPPFLAGS = $(IP_TEST_CPPFLAGS)
tests_interpose_ze_sysman_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_ze_sysman_t_DEPENDENCIES = $(IP_TEST_DEPS)
if HAVE_LEVEL_ZERO
check_PROGRAMS += tests/interpose/ze_dl_prog tests/interpose/ze_hold_prog
tests_interpose_ze_dl_prog_LDADD = $(LIBS)
tests_interpose_ze_hold_prog_LDADD = $(ZE_LIBS) $(LIBS)
EXTRA_tests_interpose_ze_trace_t_DEPENDENCIES += tests/interpose/ze_prog \
	tests/interpose/ze_dl_prog $(FAKE_ZE_LIB)
EXTRA_tests_interpose_ze_sysman_t_DEPENDENCIES += tests/interpose/ze_hold_prog $(FAKE_ZE_LIB)
EXTRA_tests_interpose_ze_oom_t_DEPENDENCIES += tests/interpose/ze_prog $(FAKE_ZE_LIB)
endif
EXTRA_DIST += tests/interpose/ze_dl_prog.c tests/interpose/ze_hold_prog.c
noinst_HEADERS += tests/interpose/ze_prog.h
