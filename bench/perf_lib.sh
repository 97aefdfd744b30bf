# perf_lib.sh -- what a CPU profile costs a workload, counted by perf from
# outside; sourced by bench/overhead_perf.sh and bench/report.sh.
#
# Throughput figures (jobs per CPU second, profiled windows against
# unprofiled ones) swing by a point or more between windows on a shared VM,
# more than the cost they are after.  Here perf does the counting:
# `perf record -e cpu-clock` samples the process at 4999 Hz of its own CPU
# time (kernel included: timer expiry, signal delivery, sigreturn), so other
# load on the machine slows the count but does not tilt its shares much.  A
# sample is "work" when its function is one of the workload's own;
# everything else -- the profiler's handler and threads, the kernel's signal
# path, libc -- is not.  Only the workload's window counts (perf's clock is
# CLOCK_MONOTONIC, and the workload prints its windows' bounds in seconds):
# a profile's start and its encoding after stop are not sampling.  A
# profile's cost is the other-per-work share of a profiled run above an
# unprofiled run's.  (This machine's VM has no hardware counters -- `perf
# stat -e instructions` says "not supported" -- so sampling CPU time is the
# count there is.)
#
# Both functions use "$tmp", the caller's scratch directory.

# perf_sample NAME CMD...: runs CMD under perf, its stdout to $tmp/NAME.out
# and stderr to $tmp/NAME.err, and returns CMD's status (perf passes it on,
# and dies of the signal that killed CMD).  CMD is what perf starts: a
# program preloaded with something must be the real binary, so put libtool
# --mode=execute before a libtool wrapper (see bench/report.sh).
perf_sample() {
    perf_name=$1
    shift
    perf record -q -k CLOCK_MONOTONIC -e cpu-clock -F 4999 \
        -o "$tmp/$perf_name.data" -- "$@" \
        >"$tmp/$perf_name.out" 2>"$tmp/$perf_name.err"
}

# perf_windows NAME WORK: per window that NAME's run printed (a line with
# "window [LABEL...] OPEN,CLOSE"), in its order, "SAMPLES WORK_SAMPLES
# LABEL..." of the samples perf took in it; WORK is the workload's own
# functions as an alternation (name|name).  Fails when the run printed no
# window.
perf_windows() {
    grep -q 'window ' "$tmp/$1.out" || return 1
    perf script -i "$tmp/$1.data" -F time,ip,sym 2>/dev/null |
        awk -v work="^($2)\$" '
            NR == FNR {
                for (i = 1; i < NF; i++) if ($i == "window") break
                if (i == NF) next
                split($NF, b, ",")
                n++; lo[n] = b[1]; hi[n] = b[2]; label[n] = ""
                for (j = i + 1; j < NF; j++) label[n] = label[n] " " $j
                next
            }
            {
                t = $1 + 0
                for (w = 1; w <= n; w++)
                    if (t >= lo[w] && t <= hi[w]) {
                        total[w]++
                        if ($3 ~ work) own[w]++
                        break
                    }
            }
            END {
                for (w = 1; w <= n; w++)
                    printf "%d %d%s\n", total[w], own[w], label[w]
            }' "$tmp/$1.out" -
}
