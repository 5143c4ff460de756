# interpose/ze.mk: the Level Zero wrappers of the preload library and their test.
libmemtrace_preload_la_SOURCES += interpose/ze.c
EXTRA_DIST += interpose/ze.mk

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
