#!/bin/sh
# attribution.sh -- how truthful is a labelled CPU profile? 
#
# Runs the demo with --addr, fetches a 10-second profile over HTTP and
# compares, with figures printed:
#   - each tenant's share of the profile's samples against the true CPU
#     share the demo measured with its threads' CPU clocks (goal: within 2
#     percentage points);
#   - the total CPU the profile accounts for against the CPU the kernel
#     charged the process over the same window (utime + stime from
#     /proc/PID/stat; goal: within 5%).
# The profile is read by `go tool pprof -raw`, the real client.
#
# Usage: bench/attribution.sh [WORKERS [SECONDS]]   (run from the build dir,
# or set top_builddir)
set -u
test_dir=$(dirname "$0")/../test
. "$test_dir/http_lib.sh"

workers=${1:-2}
seconds=${2:-10}

# CPU seconds the kernel has charged the demo so far.
process_cpu() {
    awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' \
        "/proc/$demo_pid/stat"
}

start_demo --workers "$workers" --for $((seconds + 60))
cpu0=$(process_cpu)
code=$(fetch cpu "$base/profile?seconds=$seconds" --max-time $((seconds + 30)))
cpu1=$(process_cpu)
[ "$code" = 200 ] || fail "profile: status $code: $(cat "$tmp/cpu.body")"
stop_demo

go tool pprof -raw "$tmp/cpu.body" >"$tmp/raw.out" 2>"$tmp/pprof.err" ||
    fail "go tool pprof -raw: $(cat "$tmp/pprof.err")"

# -raw prints each sample as "COUNT NANOS: LOCATION IDS" followed by its
# labels, one "key:[value]" line each.
awk -v cpu0="$cpu0" -v cpu1="$cpu1" -v truth="$tmp/demo.out" '
    function flush() {
        if (n != "") { count[tenant] += n; total += n; nanos += ns }
        n = ""; tenant = "(none)"
    }
    /^Samples:/ { in_samples = 1; next }
    /^Locations/ { flush(); in_samples = 0 }
    in_samples && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+:$/ {
        flush(); n = $1; ns = $2 + 0; next
    }
    in_samples && match($0, /tenant:\[[^]]*\]/) {
        tenant = substr($0, RSTART + 8, RLENGTH - 9)
    }
    END {
        flush()
        while ((getline line < truth) > 0) {
            split(line, f, " ")
            if (f[1] == "tenant" && f[5] == "share") true_share[f[2]] = f[6]
        }
        # The truth covers job CPU only, so shares are of labelled samples.
        labelled = total - count["(none)"]
        worst = 0
        for (t in true_share) {
            p = labelled ? count[t] / labelled : 0
            d = (p - true_share[t]) * 100
            if (d < 0) d = -d
            if (d > worst) worst = d
            # One binomial standard error: the noise any sampler has at
            # this many samples, to tell bias from bad luck.
            se = labelled ? 100 * sqrt(true_share[t] * (1 - true_share[t]) / labelled) : 0
            printf "tenant %s profile_share %.4f true_share %.4f diff_points %.2f sampling_stderr_points %.2f\n",
                t, p, true_share[t], d, se
        }
        if (count["(none)"])
            printf "unlabelled_samples %d\n", count["(none)"]
        printf "samples %d\n", total
        printf "max_share_diff_points %.2f (goal <= 2)\n", worst
        proc = cpu1 - cpu0
        printf "sampled_cpu_seconds %.3f process_cpu_seconds %.3f ratio %.4f (goal 0.95..1.05)\n",
            nanos / 1e9, proc, proc ? nanos / 1e9 / proc : 0
    }' "$tmp/raw.out"
