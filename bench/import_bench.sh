#!/bin/bash
# import_bench.sh: memtrace import of a PyTorch pickle against Python's pickle.load of
# the same file, timed in one run.
#
#   bench/import_bench.sh [-n ENTRIES] [-r ROUNDS] [-d DIR] [-s SEED.pickle]
#
# Run it from the build directory. It makes (or reuses) DIR/import-ENTRIES.pickle
# with bench/gen_pickle.py from SEED (default: the real snapshot in
# ../shared/data/pytorch-snapshots/), then, ROUNDS times (each round runs both, so
# that a machine whose speed drifts slows them alike), times python3's pickle.load
# and memtrace import -o DIR/import.memtrace --force, and prints a table: median
# wall time, median CPU time (user + sys), largest peak RSS, and each ratio of
# pickle.load's figure to memtrace's. Targets: at least 20 times faster (wall), at
# most a tenth of the peak RSS. Last, where bench/pickle_walk is built, it prints how
# long merely walking the pickle's bytes takes, against the time 20x allows.
#
# Environment: MEMTRACE (default ./memtrace), PYTHON (default python3), GEN (default
# the gen_pickle.py beside this script), WALKER (default ./bench/pickle_walk).
set -u

entries=1000000
rounds=3
dir=import-bench
here=$(cd "$(dirname "$0")" && pwd)
seed=$here/../../shared/data/pytorch-snapshots/eor-training.pickle
while getopts "n:r:d:s:h" opt; do
    case $opt in
    n) entries=$OPTARG ;;
    r) rounds=$OPTARG ;;
    d) dir=$OPTARG ;;
    s) seed=$OPTARG ;;
    h)
        sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) exit 2 ;;
    esac
done
case $entries$rounds in *[!0-9]* | "")
    echo "import_bench: -n and -r take whole numbers" >&2
    exit 2
    ;;
esac

memtrace=${MEMTRACE:-./memtrace}
python=${PYTHON:-python3}
gen=${GEN:-$here/gen_pickle.py}
if [ ! -x "$memtrace" ]; then
    echo "import_bench: $memtrace is missing (run from the build directory after make)" >&2
    exit 1
fi
for tool in /usr/bin/time "$gen" "$seed"; do
    if [ ! -e "$tool" ]; then
        echo "import_bench: $tool is missing" >&2
        exit 1
    fi
done
if ! command -v "$python" >/dev/null; then
    echo "import_bench: $python is not installed" >&2
    exit 1
fi
mkdir -p "$dir" || exit 1

file=$dir/import-$entries.pickle
echo "# import_bench: $entries entries, $rounds rounds, $(nproc) CPUs"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ ! -s "$file" ]; then
    "$python" "$gen" "$seed" "$entries" "$file.part" && mv "$file.part" "$file" || exit 1
fi
echo "# $file: $(stat -c %s "$file") bytes"

names=(pickle.load "memtrace import")
declare -A walls cpus rss
for name in "${names[@]}"; do
    walls[$name]=""
    cpus[$name]=""
    rss[$name]=0
done

run_one() { # name, command...: appends wall, CPU and RSS, or stops the bench
    local name=$1 t0 t1 rc
    shift
    t0=$(date +%s%N)
    /usr/bin/time -f "%U %S %M" -o "$dir/time.out" "$@" >/dev/null 2>"$dir/cmd.err"
    rc=$?
    t1=$(date +%s%N)
    if [ $rc -ne 0 ]; then
        echo "import_bench: $name failed (exit $rc): $(grep -v '^Command exited' "$dir/cmd.err" | head -n 1)" >&2
        exit 1
    fi
    read -r u s m <"$dir/time.out"
    walls[$name]="${walls[$name]} $(((t1 - t0) / 1000000))"
    cpus[$name]="${cpus[$name]} $(awk -v u="$u" -v s="$s" 'BEGIN { printf "%d", (u + s) * 1000 }')"
    [ "$m" -gt "${rss[$name]}" ] && rss[$name]=$m
}

for ((k = 0; k < rounds; k++)); do
    run_one pickle.load "$python" -c "import pickle, sys; pickle.load(open(sys.argv[1], 'rb'))" "$file"
    run_one "memtrace import" "$memtrace" import "$file" -o "$dir/import.memtrace" --force
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.2f", ms / 1000 }'; }
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

pw=$(echo "${walls[pickle.load]}" | median)
pc=$(echo "${cpus[pickle.load]}" | median)
mw=$(echo "${walls[memtrace import]}" | median)
mc=$(echo "${cpus[memtrace import]}" | median)
pr=${rss[pickle.load]}
mr=${rss[memtrace import]}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "n/a" }'; }
echo
echo "| | wall s (median of $rounds) | CPU s | peak RSS MB |"
echo "|---|---|---|---|"
echo "| python3 pickle.load | $(secs "$pw") | $(secs "$pc") | $(mb "$pr") |"
echo "| memtrace import | $(secs "$mw") | $(secs "$mc") | $(mb "$mr") |"
echo "| pickle.load / memtrace | $(ratio "$pw" "$mw") | $(ratio "$pc" "$mc") | $(ratio "$pr" "$mr") |"
awk -v w="$(ratio "$pw" "$mw")" -v r="$(ratio "$pr" "$mr")" 'BEGIN {
    printf "# targets: wall ratio >= 20 (%s), RSS ratio >= 10 (%s)\n",
        (w + 0 >= 20) ? "met" : "missed", (r + 0 >= 10) ? "met" : "missed" }'
# The least the reading thread could spend, against the time the target allows.
walker=${WALKER:-./bench/pickle_walk}
if [ -x "$walker" ] && floor=$("$walker" "$file" "$rounds" 2>&1); then
    echo "# the bytes alone, nothing built (bench/pickle_walk, best of $rounds), against the"
    echo "# $(awk -v ms="$pw" 'BEGIN { printf "%.3f", ms / 20000 }') s that 20x allows:"
    echo "$floor" | sed 's/^/#   /'
fi
