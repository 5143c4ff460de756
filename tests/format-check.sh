#!/bin/sh
# Every C file of the tree is in the committed clang-format style.
cd "${top_srcdir:-$(dirname "$0")/..}" || exit 1
command -v clang-format >/dev/null 2>&1 || { echo "1..0 # skip clang-format not installed"; exit 0; }
files=$(find libtrace snapshot viewer interpose tests examples bench -name '*.[ch]' 2>/dev/null | sort)
n=0
for f in $files; do n=$((n + 1)); done
echo "1..$n"
i=0
for f in $files; do
    i=$((i + 1))
    if clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "ok $i - $f"
    else
        echo "not ok $i - $f is not formatted (run: clang-format -i $f)"
    fi
done
