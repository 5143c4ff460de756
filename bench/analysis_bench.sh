#!/bin/bash
# analysis_bench.sh: memtrace's analysis commands against heaptrack_print, on files of
# the same workload (bench/workload), timed in one run.
#
#   bench/analysis_bench.sh [-n OPS] [-p training|churn] [-r ROUNDS] [-d DIR]
#
# Run it from the build directory. It makes (or reuses) DIR/PATTERN-OPS.memtrace,
# recorded through memtrace's caching allocator, and DIR/PATTERN-OPS.heaptrack.*,
# recorded by heaptrack around the same pattern through malloc. Then, ROUNDS times
# (each round runs every command once, so that a machine whose speed drifts slows
# them all alike), it times memtrace's summary, info, peak, leaks, top, timeline and
# export --format perfetto (those that are built; the others show "not built") and
# heaptrack_print, and prints a table: median wall time, median CPU time (user +
# sys), largest peak RSS, and the ratio of the wall time to heaptrack_print's.
# Targets: every command at most half heaptrack_print's wall time, under 64 MB RSS.
# Under the table, the export's kernel time (sys, median): what writing its output
# into the page cache costs, however fast the bytes were made.
#
# Environment: MEMTRACE (default ./memtrace), WORKLOAD (default ./bench/workload).
set -u

ops=1000000
pattern=training
rounds=3
dir=analysis-bench
while getopts "n:p:r:d:h" opt; do
    case $opt in
    n) ops=$OPTARG ;;
    p) pattern=$OPTARG ;;
    r) rounds=$OPTARG ;;
    d) dir=$OPTARG ;;
    h)
        sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *) exit 2 ;;
    esac
done
case $pattern in training | churn) ;; *)
    echo "analysis_bench: the pattern is training or churn, not '$pattern'" >&2
    exit 2
    ;;
esac
case $ops$rounds in *[!0-9]*)
    echo "analysis_bench: -n and -r take whole numbers" >&2
    exit 2
    ;;
esac

memtrace=${MEMTRACE:-./memtrace}
workload=${WORKLOAD:-./bench/workload}
for tool in "$memtrace" "$workload" /usr/bin/time; do
    if [ ! -x "$tool" ]; then
        echo "analysis_bench: $tool is missing (run from the build directory after make)" >&2
        exit 1
    fi
done
for tool in heaptrack heaptrack_print; do
    if ! command -v $tool >/dev/null; then
        echo "analysis_bench: $tool is not installed" >&2
        exit 1
    fi
done
mkdir -p "$dir" || exit 1

mt_file=$dir/$pattern-$ops.memtrace
ht_base=$dir/$pattern-$ops.heaptrack
ht_file() { ls "$ht_base".zst "$ht_base".gz 2>/dev/null | head -n 1; }

echo "# analysis_bench: $pattern, $ops operations, $rounds rounds, $(nproc) CPUs"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# The files, made once per pattern and size.
if [ ! -s "$mt_file" ]; then
    /usr/bin/time -f "%e s, %M KB" -o "$dir/time.out" \
        "$workload" "$pattern" "$ops" --memtrace "$mt_file.part" 2>"$dir/workload.err" &&
        mv "$mt_file.part" "$mt_file" || {
        cat "$dir/workload.err" >&2
        exit 1
    }
    echo "# recorded $mt_file: $(cat "$dir/workload.err") ($(cat "$dir/time.out"))"
fi
ht_failed=""
if [ -z "$(ht_file)" ] && [ ! -e "$ht_base.failed" ]; then
    # Capped at 4 GiB of address space per process: on churn, heaptrack_interpret
    # grows to about 19 GB before it dies, which a shared machine must not pay.
    if (ulimit -v 4194304 && /usr/bin/time -f "%e s, %M KB" -o "$dir/time.out" \
        heaptrack -o "$ht_base" "$workload" "$pattern" "$ops" --malloc) >"$dir/heaptrack.out" 2>&1 &&
        ! grep -q "terminate called" "$dir/heaptrack.out"; then
        echo "# recorded $(ht_file) under heaptrack ($(cat "$dir/time.out"))"
    else
        # heaptrack_interpret can die on a pattern (it does on churn past about 100k
        # operations); keep the memtrace figures and say so.
        rm -f "$ht_base".*
        touch "$ht_base.failed"
    fi
fi
if [ -e "$ht_base.failed" ]; then
    ht_failed="no file: heaptrack failed (see $dir/heaptrack.out)"
    echo "# heaptrack failed on this workload: $(grep -m 1 -e terminate -e what -e rror "$dir/heaptrack.out")"
fi
ht=$(ht_file)
mt_events=$("$memtrace" summary --json "$mt_file" | sed -n 's/^ *"events": \([0-9]*\),*$/\1/p' | head -n 1)
echo "# $mt_file: $(stat -c %s "$mt_file") bytes, $mt_events events"
[ -n "$ht" ] && echo "# $ht: $(stat -c %s "$ht") bytes"

# name|command line (FILE and OUT are replaced); the memtrace ones run only when built.
cmds=(
    "summary|$memtrace summary FILE"
    "info|$memtrace info FILE"
    "peak|$memtrace peak FILE"
    "leaks|$memtrace leaks FILE"
    "top|$memtrace top FILE"
    "timeline|$memtrace timeline FILE"
    "export|$memtrace export --format perfetto --force -o OUT FILE"
    "heaptrack_print|heaptrack_print FILE"
)
declare -A state walls cpus rss
export_sys=""
export_mib=0
for entry in "${cmds[@]}"; do
    name=${entry%%|*}
    state[$name]=ok
    walls[$name]=""
    cpus[$name]=""
    rss[$name]=0
    if [ "$name" != heaptrack_print ] && ! "$memtrace" help "$name" >/dev/null 2>&1; then
        state[$name]="not built"
    fi
    [ "$name" = heaptrack_print ] && [ -n "$ht_failed" ] && state[$name]=$ht_failed
done

run_one() { # name, command line: appends wall, CPU and RSS, or marks a failure
    local name=$1 line=$2 file=$mt_file
    [ "$name" = heaptrack_print ] && file=$ht
    line=${line//FILE/$file}
    line=${line//OUT/$dir/export.out}
    local t0 t1 rc
    # The export writes a new file each time: unlinking the last 2.4 GB one is the file
    # system's work (about a second here), not the exporter's.
    rm -f "$dir/export.out"
    t0=$(date +%s%N)
    /usr/bin/time -f "%U %S %M" -o "$dir/time.out" $line >/dev/null 2>"$dir/cmd.err"
    rc=$?
    t1=$(date +%s%N)
    if [ "$name" = export ] && [ $rc -eq 0 ]; then
        export_mib=$((($(stat -c %s "$dir/export.out") + 1048575) / 1048576))
        export_sys="$export_sys $(awk -v s="$(cut -d' ' -f2 "$dir/time.out")" 'BEGIN { printf "%d", s * 1000 }')"
    fi
    if [ "$name" = export ]; then
        # Freeing a 2.4 GB file keeps the kernel busy for seconds after rm returns:
        # commands timed in those seconds took up to 0.1 s longer (top 0.32 s alone,
        # 0.39-0.45 s two seconds after the export's file was removed). Let it settle.
        rm -f "$dir/export.out"
        sync
        sleep 5
    fi
    if [ $rc -ne 0 ]; then
        state[$name]="failed (exit $rc: $(grep -v '^Command exited' "$dir/cmd.err" | head -n 1))"
        return
    fi
    read -r u s m <"$dir/time.out"
    walls[$name]="${walls[$name]} $(((t1 - t0) / 1000000))"
    cpus[$name]="${cpus[$name]} $(awk -v u="$u" -v s="$s" 'BEGIN { printf "%d", (u + s) * 1000 }')"
    [ "$m" -gt "${rss[$name]}" ] && rss[$name]=$m
}

for ((k = 0; k < rounds; k++)); do
    for entry in "${cmds[@]}"; do
        name=${entry%%|*}
        [ "${state[$name]}" = ok ] && run_one "$name" "${entry#*|}"
    done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.2f", ms / 1000 }'; }

ht_wall=$(echo "${walls[heaptrack_print]}" | median)
echo
echo "| command | wall s (median of $rounds) | CPU s | peak RSS MB | wall / heaptrack_print | target (<= 0.5, < 64 MB) |"
echo "|---|---|---|---|---|---|"
for entry in "${cmds[@]}"; do
    name=${entry%%|*}
    label=$name
    [ "$name" = export ] && label="export --format perfetto"
    [ "$name" = heaptrack_print ] || label="memtrace $label"
    if [ "${state[$name]}" != ok ]; then
        echo "| $label | ${state[$name]} | | | | |"
        continue
    fi
    w=$(echo "${walls[$name]}" | median)
    c=$(echo "${cpus[$name]}" | median)
    m=$(awk -v k="${rss[$name]}" 'BEGIN { printf "%.1f", k / 1024 }')
    if [ "$name" = heaptrack_print ]; then
        echo "| $label | $(secs "$w") | $(secs "$c") | $m | 1 | |"
        continue
    fi
    ratio=n/a
    verdict=""
    if [ -n "$ht_wall" ] && [ "$ht_wall" -gt 0 ]; then
        ratio=$(awk -v a="$w" -v b="$ht_wall" 'BEGIN { printf "%.2f", a / b }')
        verdict=$(awk -v r="$ratio" -v m="$m" 'BEGIN {
            t = r <= 0.5 ? "time met" : "time missed"
            s = m < 64 ? "RSS met" : "RSS missed"
            print t ", " s }')
    fi
    echo "| $label | $(secs "$w") | $(secs "$c") | $m | $ratio | $verdict |"
done
if [ -n "$export_sys" ] && [ -n "$ht_wall" ] && [ "$ht_wall" -gt 0 ]; then
    es=$(echo "$export_sys" | median)
    echo "# the export's $export_mib MiB cost the kernel $(secs "$es") s (sys, median):" \
        "$(awk -v a="$es" -v b="$ht_wall" 'BEGIN { printf "%.2f", a / b }') of heaptrack_print's wall time"
fi
