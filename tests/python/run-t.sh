#!/bin/sh
# The Python package's tests (tests/python/package_t.py prints TAP), against this
# build's libmemtrace; skipped with a reason where python3 is absent.
src="${top_srcdir:-$(dirname "$0")/../..}"
bld="${top_builddir:-.}"
py="${PYTHON3:-python3}"
command -v "$py" >/dev/null 2>&1 || { echo "1..0 # skip no $py on this machine"; exit 0; }
lib="$bld/.libs/libmemtrace.so"
# A sanitizer build's library needs its runtime loaded first, before python's own.
asan=$(ldd "$lib" 2>/dev/null | awk '/libasan/ { print $3 }')
if [ -n "$asan" ]; then
    LD_PRELOAD="$asan${LD_PRELOAD:+ $LD_PRELOAD}" ASAN_OPTIONS=detect_leaks=0
    export LD_PRELOAD ASAN_OPTIONS
fi
PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" MEMTRACE_LIBRARY="$lib" \
    MEMTRACE_CLI="$bld/memtrace" PYTHONDONTWRITEBYTECODE=1 exec "$py" "$src/tests/python/package_t.py"
