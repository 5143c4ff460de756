#!/bin/sh
# The examples really run and show what they are for: the MLP's loss falls and its
# recording is complete; fragmentation fails a request with memory free in the
# cache; the out-of-memory example's snapshot holds the oom event.
b=$(cd "${top_builddir:-.}" && pwd) || exit 1
[ -x "$b/examples/train_mlp" ] || { echo "1..0 # skip examples not built"; exit 0; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
echo "1..19"
n=0
check() { # description, then a command that must succeed
    n=$((n + 1))
    d=$1
    shift
    if "$@" >/dev/null 2>&1; then echo "ok $n - $d"; else echo "not ok $n - $d"; fi
}
out="$dir/train.out"
"$b/examples/train_mlp" "$dir/train.memtrace" 8 >"$out" 2>&1
check "train_mlp exits 0" test $? -eq 0
check "train_mlp's loss decreases" grep -q '(decreasing)$' "$out"
"$b/memtrace" info --json "$dir/train.memtrace" >"$dir/info.json" 2>"$dir/info.err"
check "its recording reads back complete" grep -q '"truncated": *false' "$dir/info.json"
check "and has alloc events" grep -q '"alloc": *[1-9]' "$dir/info.json"
(cd "$dir" && "$b/examples/fragmentation" frag.memtrace) >"$dir/frag.out" 2>&1
check "fragmentation: 12 MiB fails with 36 MiB cached" \
    grep -q 'a 12 MiB request: device out of memory, although 36 MiB sit free in the cache' "$dir/frag.out"
check "fragmentation: the request succeeds after emptying the cache" \
    grep -q 'the same 12 MiB request now: succeeded' "$dir/frag.out"
(cd "$dir" && "$b/examples/oom" oom.memtrace) >"$dir/oom.out" 2>&1
check "oom: the tenth 6 MiB allocation fails on a 64 MiB device" \
    grep -q 'allocation 10 failed with "device out of memory" after 54 MiB were handed out' "$dir/oom.out"
check "oom: the snapshot holds the oom event and the free bytes" \
    grep -q 'oom event: 6.0 MiB requested, device free 4.0 MiB' "$dir/oom.out"
"$b/memtrace" info --json "$dir/oom.memtrace" >"$dir/oom.json" 2>&1
check "oom: memtrace info counts one oom event" grep -q '"oom": *1' "$dir/oom.json"
# Their command lines (and the benches', which share the parser): --help tells, a wrong argument is one line and exit 2, and no
# file is written under the name of a mistyped option.
"$b/examples/train_mlp" --help >"$dir/help.out" 2>&1
check "train_mlp --help exits 0" test $? -eq 0
check "and prints its usage" grep -q '^usage: train_mlp \[OUT.memtrace \[STEPS\]\]' "$dir/help.out"
(cd "$dir" && "$b/examples/train_mlp" --steps 3) >"$dir/bad.out" 2>&1
check "train_mlp --steps: exit 2" test $? -eq 2
check "one line naming the option" grep -qx 'train_mlp: unknown option --steps (try --help)' \
    "$dir/bad.out"
check "no file named after the option" test ! -e "$dir/--steps"
(cd "$dir" && "$b/examples/oom" a.memtrace b.memtrace) >"$dir/bad2.out" 2>&1
check "oom with two operands: exit 2" test $? -eq 2
"$b/examples/train_mlp" "$dir/t2.memtrace" 3x >"$dir/bad3.out" 2>&1
check "train_mlp with 3x steps: exit 2" test $? -eq 2
check "the step count named, nothing written" \
    sh -c 'grep -qx "train_mlp: steps must be a whole number from 1 to 100000, not '"'3x'"'" "$1" &&
        test ! -e "$2"' - "$dir/bad3.out" "$dir/t2.memtrace"
"$b/bench/cache_bench" 1000 bogus >"$dir/bench.out" 2>&1
check "cache_bench with an unknown case: exit 2" test $? -eq 2
"$b/bench/cache_bench" 0 >"$dir/bench0.out" 2>&1
check "cache_bench with 0 pairs: exit 2, and no table" \
    sh -c 'grep -q "PAIRS must be a whole number" "$1" && ! grep -q "^|" "$1"' - "$dir/bench0.out"
