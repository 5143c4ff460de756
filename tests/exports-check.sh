#!/bin/sh
# libmemtrace.so exports exactly the functions its installed headers declare with
# MEMTRACE_API: nothing internal leaks, nothing public is missing.
lib="${top_builddir:-.}/.libs/libmemtrace.so"
src="${top_srcdir:-.}"
[ -f "$lib" ] || { echo "1..0 # skip $lib not built"; exit 0; }
echo "1..1"
got=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
want=$(cat "$src"/libtrace/memtrace*.h "$src"/snapshot/memtrace*.h |
    tr '\n' ' ' | sed 's/;/;\n/g' | grep 'MEMTRACE_API' |
    sed -n 's/.*[ *]\([a-z_][a-z0-9_]*\)[ ]*(.*/\1/p' | sort -u)
if [ "$got" = "$want" ]; then
    echo "ok 1 - libmemtrace.so exports exactly the MEMTRACE_API functions ($(echo "$want" | wc -l))"
else
    echo "not ok 1 - libmemtrace.so exports differ from the MEMTRACE_API declarations"
    printf '%s\n' "$want" >"${TMPDIR:-/tmp}/exports-want.$$"
    printf '%s\n' "$got" | diff -u "${TMPDIR:-/tmp}/exports-want.$$" - | sed 's/^/# /'
    rm -f "${TMPDIR:-/tmp}/exports-want.$$"
fi
