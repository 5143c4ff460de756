#!/bin/sh
# No internal header shadows a system header. Every folder on the project's include
# path (Makefile.am's AM_CPPFLAGS) is searched before the compiler's own folders, for
# <...> includes too: a header there named like a system one (libtrace/strings.h once)
# replaces it for every file, the C library's own headers included. One test per
# header, under the name an #include would give it.
src="${top_srcdir:-$(dirname "$0")/..}"
bld="${top_builddir:-.}"
cc="${CC:-cc}"
sysdirs=$(echo | $cc -E -Wp,-v -xc - 2>&1 |
    sed -n '/^#include <\.\.\.> search starts here:$/,/^End of search list\.$/p' |
    sed -n 's/^ \([^ ]*\).*/\1/p')
[ -n "$sysdirs" ] || { echo "1..0 # skip no system include folders from '$cc -E -Wp,-v'"; exit 0; }

list="${TMPDIR:-/tmp}/headers-check.$$"
trap 'rm -f "$list"' EXIT
: >"$list"
# dir (as AM_CPPFLAGS names it), then the headers under it as an #include names them.
for entry in "libtrace:$src/libtrace" "snapshot:$src/snapshot" ".:$src" "tests:$src/tests"; do
    name=${entry%%:*} dir=${entry#*:}
    (cd "$dir" && find . \( -name .git -o -name node_modules \) -prune -o -name '*.h' -print) |
        sed 's|^\./||' | sort | sed "s|^|$name |" >>"$list"
done
(cd "$bld" && find . -maxdepth 1 -name '*.h') | sed 's|^\./||' | sort | sed 's|^|builddir |' >>"$list"

echo "1..$(wc -l <"$list" | tr -d ' ')"
i=0
while read -r dir h; do
    i=$((i + 1))
    hit=
    for s in $sysdirs; do
        if [ -e "$s/$h" ]; then
            hit="$s/$h"
            break
        fi
    done
    if [ -z "$hit" ]; then
        echo "ok $i - <$h> from $dir/"
    else
        echo "not ok $i - <$h> from $dir/ shadows $hit (rename it)"
    fi
done <"$list"
