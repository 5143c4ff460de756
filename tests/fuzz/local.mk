# tests/fuzz: libFuzzer targets for memtrace's untrusted inputs (tests/fuzz/README.md).
# They are built only with ./configure --enable-fuzzers (clang), which instruments
# the whole build for coverage and runs it under ASan and UBSan. `make fuzz-smoke`
# runs each target for FUZZ_SECONDS from its seed corpus tests/fuzz/corpus/<name>/.
FUZZ_NAMES = reader chunks inflate pickle json alloc_conf env
EXTRA_DIST += tests/fuzz/README.md tests/fuzz/corpus tests/fuzz/chunks-seed.py \
	tests/fuzz/json.dict tests/fuzz/pickle.dict tests/fuzz/alloc_conf.dict \
	tests/fuzz/env.dict tests/fuzz/reader.dict
noinst_HEADERS += tests/fuzz/fuzz.h

# Every build replays each corpus through its target's entry point (corpus-t.c), so
# the inputs that found bugs stay fixed without clang.
FUZZ_CORPUS_CPPFLAGS = $(AM_CPPFLAGS) -DMT_SRCDIR='"$(abs_top_srcdir)"'
FUZZ_CORPUS_TESTS = tests/fuzz/reader-corpus-t tests/fuzz/chunks-corpus-t tests/fuzz/inflate-corpus-t \
	tests/fuzz/pickle-corpus-t tests/fuzz/json-corpus-t tests/fuzz/alloc_conf-corpus-t \
	tests/fuzz/env-corpus-t
check_PROGRAMS += $(FUZZ_CORPUS_TESTS)
TESTS += $(FUZZ_CORPUS_TESTS)
tests_fuzz_reader_corpus_t_SOURCES = tests/fuzz/corpus-t.c tests/fuzz/reader_fuzz.c \
	tests/fuzz/fuzz_util.c
tests_fuzz_reader_corpus_t_CPPFLAGS = $(FUZZ_CORPUS_CPPFLAGS) -DFUZZ_NAME='"reader"'
tests_fuzz_reader_corpus_t_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_chunks_corpus_t_SOURCES = tests/fuzz/corpus-t.c tests/fuzz/chunks_fuzz.c \
	tests/fuzz/fuzz_util.c
tests_fuzz_chunks_corpus_t_CPPFLAGS = $(FUZZ_CORPUS_CPPFLAGS) -DFUZZ_NAME='"chunks"'
tests_fuzz_chunks_corpus_t_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_inflate_corpus_t_SOURCES = tests/fuzz/corpus-t.c tests/fuzz/inflate_fuzz.c \
	tests/fuzz/fuzz_util.c
tests_fuzz_inflate_corpus_t_CPPFLAGS = $(FUZZ_CORPUS_CPPFLAGS) -DFUZZ_NAME='"inflate"'
tests_fuzz_inflate_corpus_t_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_pickle_corpus_t_SOURCES = tests/fuzz/corpus-t.c tests/fuzz/pickle_fuzz.c \
	tests/fuzz/fuzz_util.c
tests_fuzz_pickle_corpus_t_CPPFLAGS = $(FUZZ_CORPUS_CPPFLAGS) -DFUZZ_NAME='"pickle"'
tests_fuzz_pickle_corpus_t_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_json_corpus_t_SOURCES = tests/fuzz/corpus-t.c tests/fuzz/json_fuzz.c \
	tests/fuzz/fuzz_util.c
tests_fuzz_json_corpus_t_CPPFLAGS = $(FUZZ_CORPUS_CPPFLAGS) -DFUZZ_NAME='"json"'
tests_fuzz_json_corpus_t_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_alloc_conf_corpus_t_SOURCES = tests/fuzz/corpus-t.c tests/fuzz/alloc_conf_fuzz.c \
	tests/fuzz/fuzz_util.c
tests_fuzz_alloc_conf_corpus_t_CPPFLAGS = $(FUZZ_CORPUS_CPPFLAGS) -DFUZZ_NAME='"alloc_conf"'
tests_fuzz_alloc_conf_corpus_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
tests_fuzz_env_corpus_t_SOURCES = tests/fuzz/corpus-t.c tests/fuzz/env_fuzz.c \
	tests/fuzz/fuzz_util.c interpose/config.c
tests_fuzz_env_corpus_t_CPPFLAGS = $(FUZZ_CORPUS_CPPFLAGS) -DFUZZ_NAME='"env"'
tests_fuzz_env_corpus_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

if ENABLE_FUZZERS
FUZZ_PROGS = tests/fuzz/reader-fuzz tests/fuzz/chunks-fuzz tests/fuzz/inflate-fuzz tests/fuzz/pickle-fuzz \
	tests/fuzz/json-fuzz tests/fuzz/alloc_conf-fuzz tests/fuzz/env-fuzz
noinst_PROGRAMS += $(FUZZ_PROGS)
FUZZ_LINK_FLAGS = $(AM_LDFLAGS) $(FUZZ_LDFLAGS)

tests_fuzz_reader_fuzz_SOURCES = tests/fuzz/reader_fuzz.c tests/fuzz/fuzz_util.c
tests_fuzz_reader_fuzz_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_reader_fuzz_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_chunks_fuzz_SOURCES = tests/fuzz/chunks_fuzz.c tests/fuzz/fuzz_util.c
tests_fuzz_chunks_fuzz_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_chunks_fuzz_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_inflate_fuzz_SOURCES = tests/fuzz/inflate_fuzz.c tests/fuzz/fuzz_util.c
tests_fuzz_inflate_fuzz_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_inflate_fuzz_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_pickle_fuzz_SOURCES = tests/fuzz/pickle_fuzz.c tests/fuzz/fuzz_util.c
tests_fuzz_pickle_fuzz_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_pickle_fuzz_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_json_fuzz_SOURCES = tests/fuzz/json_fuzz.c tests/fuzz/fuzz_util.c
tests_fuzz_json_fuzz_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_json_fuzz_LDADD = $(SNAPSHOT_LIBS)
tests_fuzz_alloc_conf_fuzz_SOURCES = tests/fuzz/alloc_conf_fuzz.c tests/fuzz/fuzz_util.c
tests_fuzz_alloc_conf_fuzz_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_alloc_conf_fuzz_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
# The parser is compiled in, as tests/interpose/config-t does: the preload library
# exports nothing but the interposed symbols.
tests_fuzz_env_fuzz_SOURCES = tests/fuzz/env_fuzz.c tests/fuzz/fuzz_util.c interpose/config.c
tests_fuzz_env_fuzz_CPPFLAGS = $(AM_CPPFLAGS)
tests_fuzz_env_fuzz_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_env_fuzz_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

FUZZ_SECONDS = 20
# Each target in turn, new inputs in tests/fuzz/work/<name>/ (the seeds are never
# written); a crash leaves its input there and fails the run. The env target's
# rejections print a line each, so its stderr is closed (reports still show).
fuzz-smoke: $(FUZZ_PROGS)
	@failed=0; \
	for t in $(FUZZ_NAMES); do \
	  work=tests/fuzz/work/$$t; rm -rf $$work; mkdir -p $$work/new; \
	  opts="-max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 -artifact_prefix=$$work/"; \
	  if test -f $(srcdir)/tests/fuzz/$$t.dict; then opts="$$opts -dict=$(srcdir)/tests/fuzz/$$t.dict"; fi; \
	  if test $$t = env; then opts="$$opts -close_fd_mask=2"; fi; \
	  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    tests/fuzz/$$t-fuzz $$opts $$work/new $(srcdir)/tests/fuzz/corpus/$$t >$$work/log 2>&1; \
	  rc=$$?; \
	  runs=`sed -n 's/^stat::number_of_executed_units: *//p' $$work/log`; \
	  cov=`grep -o 'cov: [0-9]*' $$work/log | tail -n 1`; \
	  if test $$rc = 0; then \
	    echo "PASS: fuzz/$$t ($${runs:-?} runs, $${cov:-cov: ?}, $(FUZZ_SECONDS) s)"; \
	  else \
	    echo "FAIL: fuzz/$$t (exit $$rc; the log and input are in $$work/)"; \
	    grep -A 30 -E 'ERROR|SUMMARY|memtrace fuzz' $$work/log | head -n 60; \
	    failed=1; \
	  fi; \
	done; \
	test $$failed = 0
else
fuzz-smoke:
	@echo "memtrace: the fuzzers are not built: run configure with --enable-fuzzers (needs clang)" >&2; \
	exit 1
endif
.PHONY: fuzz-smoke

clean-local: clean-fuzz
clean-fuzz:
	rm -rf tests/fuzz/work
.PHONY: clean-fuzz
