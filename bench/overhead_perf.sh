#!/bin/sh
# overhead_perf.sh -- what a 100 Hz CPU profile costs, counted by perf
# rather than inferred from throughput (the method: bench/perf_lib.sh).
#
# bench/unwind's throughput figure (jobs per CPU second, profiled against
# unprofiled windows) swings by +-2% between windows on a shared 2-core VM,
# more than the cost it is after.  Here `build/bench/unwind run MODE 20`
# runs one worker of 30-frame frameless chains for 20 s, without a profile
# (off) and with a 100 Hz profile using the frame-pointer (fp) or the CFI
# (cfi) walker, and perf samples it; the work is the workload's own
# functions (work_leaf, bench_chain, worker).  Prints per mode:
#   perf mode=M samples=N work=W other=O other_per_work_percent P
# and per walker the profile's cost, the other-per-work share above the
# unprofiled run's:
#   overhead walker=fp|cfi cpu_overhead_percent P    (goal: at most 1)
# With ~100,000 perf samples a share is known to about +-0.05 points.
#
# Usage: bench/overhead_perf.sh [SECONDS]   (from the build directory)
set -eu
seconds=${1:-20}
bin=${top_builddir:-.}/bench/unwind
command -v perf >/dev/null || { echo "overhead_perf: needs perf (Debian linux-perf)" >&2; exit 77; }
[ -x "$bin" ] || { echo "overhead_perf: build $bin first (make bench)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/perf_lib.sh"

for mode in off fp cfi; do
    perf_sample "$mode" "$bin" run "$mode" "$seconds" ||
        { cat "$tmp/$mode.err" >&2; exit 1; }
    counts=$(perf_windows "$mode" 'work_leaf|bench_chain|worker') ||
        { echo "overhead_perf: the $mode run printed no window" >&2; exit 1; }
    set -- $counts
    pct=$(awk -v n="$1" -v w="$2" 'BEGIN { printf "%.3f", 100 * (n - w) / w }')
    echo "perf mode=$mode samples=$1 work=$2 other=$(($1 - $2)) other_per_work_percent $pct"
    eval "pct_$mode=$pct"
done
for w in fp cfi; do
    eval "p=\$pct_$w"
    awk -v p="$p" -v o="$pct_off" -v w="$w" \
        'BEGIN { printf "overhead walker=%s cpu_overhead_percent %.3f\n", w, p - o }'
done
