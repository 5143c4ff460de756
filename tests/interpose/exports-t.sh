#!/bin/sh
# exports-t: libmemtrace_preload.so exports exactly the interposed symbols listed in
# interpose/exports.txt (Level Zero names only when built with Level Zero).
srcdir=${top_srcdir:-$(dirname "$0")/../..}
builddir=${top_builddir:-.}
so=$builddir/.libs/libmemtrace_preload.so
if ! command -v nm >/dev/null 2>&1; then
    echo "1..0 # skip nm not found"
    exit 77
fi
echo "1..3"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | sort -u >"$tmp/got"
sort -u "$srcdir/interpose/exports.txt" >"$tmp/allowed"
grep -v '^ze' "$tmp/allowed" >"$tmp/required"
extra=$(comm -13 "$tmp/allowed" "$tmp/got")
missing=$(comm -23 "$tmp/required" "$tmp/got")
if [ -z "$extra" ]; then echo "ok 1 - nothing exported beyond the allow-list"; else
    echo "not ok 1 - exported but not allowed:"; echo "$extra" | sed 's/^/#   /'; fi
if [ -z "$missing" ]; then echo "ok 2 - every CUDA symbol of the allow-list is exported"; else
    echo "not ok 2 - missing:"; echo "$missing" | sed 's/^/#   /'; fi
if nm -D --defined-only "$so" | grep -q ' T dlsym$'; then
    echo "ok 3 - dlsym is exported unversioned"
else
    echo "not ok 3 - dlsym is not exported unversioned"
fi
