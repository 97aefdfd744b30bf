#!/bin/sh
# overhead_perf.sh -- what a 100 Hz CPU profile costs, counted by perf
# rather than inferred from throughput.
#
# bench/unwind's throughput figure (jobs per CPU second, profiled against
# unprofiled windows) swings by +-2% between windows on a shared 2-core VM,
# more than the cost it is after.  Here an outside profiler does the
# counting: `perf record -e cpu-clock` samples the whole process at 4999 Hz
# (kernel included: timer expiry, signal delivery, sigreturn), while
# `build/bench/unwind run MODE 20` runs one worker of 30-frame frameless
# chains for 20 s, without a profile (off) and with a 100 Hz profile using
# the frame-pointer (fp) or the CFI (cfi) walker.  A perf sample is "work"
# when its function is the workload's own (work_leaf, bench_chain, worker);
# everything else -- cpprof's handler and collector, the kernel's signal
# path, libc -- is not.  Only the window counts (perf's clock is
# CLOCK_MONOTONIC, and the run prints its window): the profile's start and
# its encoding after stop are not sampling.  Prints per mode:
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

# Samples of the workload's functions and of everything else.
count() {
    perf report -i "$1" --time "$2" --stdio --sort sym -F sample,sym \
        2>/dev/null |
        awk '/^#/ || NF < 2 { next }
             { n = $1; total += n
               if ($0 ~ /(work_leaf|bench_chain|worker)$/) work += n }
             END { printf "%d %d\n", total, work }'
}

for mode in off fp cfi; do
    perf record -q -k CLOCK_MONOTONIC -e cpu-clock -F 4999 \
        -o "$tmp/$mode.data" -- "$bin" run "$mode" "$seconds" \
        >"$tmp/$mode.out" 2>"$tmp/$mode.err" ||
        { cat "$tmp/$mode.err" >&2; exit 1; }
    window=$(sed -n 's/.* window //p' "$tmp/$mode.out")
    set -- $(count "$tmp/$mode.data" "$window")
    other=$(($1 - $2))
    pct=$(awk -v o="$other" -v w="$2" 'BEGIN { printf "%.3f", 100 * o / w }')
    echo "perf mode=$mode samples=$1 work=$2 other=$other other_per_work_percent $pct"
    eval "pct_$mode=$pct"
done
for w in fp cfi; do
    eval "p=\$pct_$w"
    awk -v p="$p" -v o="$pct_off" -v w="$w" \
        'BEGIN { printf "overhead walker=%s cpu_overhead_percent %.3f\n", w, p - o }'
done
