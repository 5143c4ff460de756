#!/bin/sh
# The format library stands below the recording runtime: no file of snapshot/ may
# include a header of libtrace/ other than the public memtrace.h, and no file of
# libtrace/ may include one of snapshot/ other than the writer's, before.h (what a
# dump finds was live before its first event) and the public ones.
cd "${top_srcdir:-$(dirname "$0")/../..}" || exit 1
echo "1..2"
internal() { # $1: folder whose private headers are listed
    for h in "$1"/*.h; do
        b=$(basename "$h")
        case "$b" in memtrace.h | memtrace_*.h | writer.h | before.h) ;; *) echo "$b" ;; esac
    done
}
check() { # $1: including folder, $2: included folder, $3: test number
    bad=
    for h in $(internal "$2"); do
        hits=$(grep -l "#include \"$h\"" "$1"/*.c "$1"/*.h 2>/dev/null)
        [ -n "$hits" ] && bad="$bad $h (in $(echo $hits))"
    done
    if [ -z "$bad" ]; then
        echo "ok $3 - $1/ includes no private header of $2/"
    else
        echo "not ok $3 - $1/ includes private headers of $2/:$bad"
    fi
}
check snapshot libtrace 1
check libtrace snapshot 2
