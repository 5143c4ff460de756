# tests/web/: the web viewer's tests. Node scripts printing TAP: replay-t, format-t
# and frames-t run the viewer's modules in node against the C tools and the shared
# cases; the browser tests drive Debian's chromium with playwright-core
# (tests/web/node_modules, installed by scripts/install-deps) and skip with a reason
# when either is missing.
check_PROGRAMS += tests/web/gen-web
tests_web_gen_web_SOURCES = tests/web/gen-web.c
tests_web_gen_web_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)

WEB_TESTS = tests/web/format-t.mjs tests/web/replay-t.mjs tests/web/timeline-t.mjs \
	tests/web/hostile-t.mjs tests/web/pickle-t.mjs tests/web/views-t.mjs \
	tests/web/html-t.mjs tests/web/view-t.mjs \
	tests/web/replay-cases-t.mjs tests/web/reader-cross-t.mjs tests/web/compare-t.mjs \
	tests/web/streams-t.mjs tests/web/controls-t.mjs tests/web/frames-t.mjs \
	tests/web/frames-view-t.mjs
TESTS += $(WEB_TESTS)
TEST_EXTENSIONS = .mjs
MJS_LOG_DRIVER = $(LOG_DRIVER)
MJS_LOG_COMPILER = $(SHELL) $(top_srcdir)/tests/web/node.sh
EXTRA_DIST += $(WEB_TESTS) tests/web/node.sh tests/web/lib.mjs tests/web/replay-cli.mjs \
	tests/web/screenshots.mjs docs/images \
	tests/web/package.json tests/web/package-lock.json web
CLEANFILES += tests/web/artifacts/*.png
