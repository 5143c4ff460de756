# python/: the pure-Python package memtrace (ctypes over libmemtrace), its tests, and
# the preload's test with a real interpreter (tests/interpose/python-t).
#
# `make install` puts the package where $(PYTHON3)'s site-packages are for this
# prefix, with the installed library's directory written beside it; without a
# python3 it says so and installs the rest.
PYTHON3 = python3
EXTRA_DIST += docs/python.md python/memtrace/__init__.py tests/python/run-t.sh tests/python/package_t.py \
	tests/interpose/python_prog.py tests/interpose/pyhelper.c

install-data-local: install-python
uninstall-local: uninstall-python

python_sitedir = $(PYTHON3) -c 'import sysconfig; \
	print(sysconfig.get_path("purelib", vars={"base": "$(prefix)", "platbase": "$(prefix)"}))'

install-python:
	@if ! $(PYTHON3) -c '' 2>/dev/null; then \
		echo "memtrace: $(PYTHON3) not found: the Python package is not installed"; \
	else \
		dir="$(DESTDIR)`$(python_sitedir)`/memtrace"; \
		$(MKDIR_P) "$$dir" && \
		$(INSTALL_DATA) $(srcdir)/python/memtrace/__init__.py "$$dir/__init__.py" && \
		echo 'LIBDIR = "$(libdir)"' > "$$dir/_libdir.py" && \
		chmod 644 "$$dir/_libdir.py" && echo "  INSTALL  $$dir"; \
	fi

uninstall-python:
	@if $(PYTHON3) -c '' 2>/dev/null; then \
		dir="$(DESTDIR)`$(python_sitedir)`/memtrace"; \
		rm -f "$$dir/__init__.py" "$$dir/_libdir.py"; rm -rf "$$dir/__pycache__"; \
		rmdir "$$dir" 2>/dev/null || true; \
	fi

.PHONY: install-python uninstall-python

# The package's tests, against this build's library.
TESTS += tests/python/run-t.sh

# A pure C thread for the preload's Python test: a plain shared object (no libtool
# naming) that the script loads with ctypes.
PYHELPER_LIB = tests/interpose/libpyhelper.so
CLEANFILES += $(PYHELPER_LIB)
$(PYHELPER_LIB): $(srcdir)/tests/interpose/pyhelper.c
	@$(MKDIR_P) tests/interpose
	$(AM_V_CCLD)$(CC) $(CPPFLAGS) $(FAKE_CFLAGS) $(CFLAGS) -shared $(SAN_LDFLAGS) -pthread \
		$(LDFLAGS) -o $@ $(srcdir)/tests/interpose/pyhelper.c $(LIBS)

check_PROGRAMS += tests/interpose/python-t
TESTS += tests/interpose/python-t
tests_interpose_python_t_CPPFLAGS = $(AM_CPPFLAGS) -DBUILDDIR='"$(abs_top_builddir)"' \
	-DSRCDIR='"$(abs_top_srcdir)"'
tests_interpose_python_t_LDADD = libmemtrace_core.la $(MEMTRACE_DEPLIBS)
EXTRA_tests_interpose_python_t_DEPENDENCIES = libmemtrace_preload.la memtrace $(FAKE_CUDA_LIB) \
	$(PYHELPER_LIB)
