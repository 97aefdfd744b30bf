#!/bin/sh
# report.sh -- cpprof against gperftools and Go, side by side, in one table.
# Runs the existing benches (bench/labels, bench/cpu_overhead,
# bench/attribution.sh, bench/encode, bench/census) and their counterparts:
# Go's runtime/pprof (bench/go, built here with Debian's golang-go) and
# gperftools' libprofiler (Debian libgoogle-perftools-dev, preloaded).
#
#   label apply      cpprof_do vs pprof.Do, ns per scoped apply, and ratio
#   CPU overhead     cost of a 100 Hz CPU profile to the demo's job loop
#                    (bench/cpu_overhead run), counted by perf as in
#                    bench/overhead_perf.sh (bench/perf_lib.sh): the share
#                    of the process's CPU outside the job loop in profiled
#                    windows above that in unprofiled ones, alternating in
#                    one run, for cpprof's profile and for gperftools'
#                    (libprofiler preloaded, ProfilerStart, SIGPROF at
#                    100 Hz) alike; and its spread, the standard error
#                    over the rounds
#   attribution      worst tenant share error, profile vs the threads' own
#                    CPU clocks, over a 10 s profile of the same job mix
#                    (the demo; bench/go jobmix for Go)
#   sampled CPU      the profile's CPU total over getrusage's, same runs
#   encode           profile size and time for 10,000 and 100,000 stacks
#   census           thread census of 100 and 1,000 parked labelled threads
#                    (census_take_stacks, what the goroutine profile's
#                    proto takes) vs Go's goroutine profile with as many
#                    goroutines (median of the repeats, and of the first
#                    censuses of 1,000 new threads, which take no thread
#                    from an earlier census)
#   wall profile     CPU per second of a wall profile of 10, 100 and 1,000
#                    parked threads (bench/wall), at its defaults and at
#                    fgprof's 99 Hz without a budget, vs a sampler of
#                    fgprof's design over as many goroutines (bench/go
#                    fgprof), % of one CPU
#   parked tasks     the goroutine profile of 100,000 parked tasks
#                    (bench/tasks) vs Go's of 100,000 goroutines
#
# Usage: bench/report.sh   (from the build directory, or set top_builddir;
#                           takes about 6 minutes)
# The machine's load average is printed with the table: figures from a
# shared, busy machine are noisy.  A step that fails -- a peer killed by a
# signal included -- ends the report with the step's name, how it ended and
# its stderr: no table with a hole in it.
set -eu
: "${top_builddir:=.}"
srcdir=$(cd "$(dirname "$0")/.." && pwd)
b=$top_builddir
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-report.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
. "$srcdir/bench/perf_lib.sh"

# failed STEP STATUS ERRFILE: ends the report, saying which step failed and
# how, with the end of its stderr.
failed() {
    how="exit status $2"
    [ "$2" -le 128 ] || how="killed by SIG$(kill -l $(($2 - 128)))"
    echo "report: step \"$1\" failed ($how); its stderr ends:" >&2
    tail -n 20 "$3" | sed 's/^/    /' >&2
    exit 1
}

# step STEP OUT CMD...: one step of the report, CMD's stdout to OUT.
step() {
    step_name=$1 step_out=$2
    shift 2
    "$@" >"$step_out" 2>"$tmp/step.err" || failed "$step_name" $? "$tmp/step.err"
}

step "make bench" /dev/null make -s -C "$b" bench examples/jobrunner
gobench=$tmp/cpprofbench-go
step "go build bench/go" /dev/null sh -c 'cd "$1/bench/go" &&
    GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE=$2/gocache \
    go build -o "$3" main.go' sh "$srcdir" "$tmp" "$gobench"
libprofiler=$(ls /usr/lib/*/libprofiler.so.0 2>/dev/null | head -n 1)
[ -n "$libprofiler" ] ||
    { echo "report: no libprofiler (apt-get install libgoogle-perftools-dev)" >&2; exit 1; }
command -v perf >/dev/null ||
    { echo "report: no perf (apt-get install linux-perf)" >&2; exit 1; }

# field FILE KEY: the word after KEY on its (last) line.
field() {
    awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) v = $(i + 1) } END { print v }' "$1"
}

echo "report: label apply" >&2
step "label apply (cpprof)" "$tmp/labels" "$b/bench/labels"
step "label apply (Go)" "$tmp/golabels" "$gobench" labels

# The CPU overhead: bench/cpu_overhead is a libtool wrapper (a shell
# script), so it runs through `libtool --mode=execute`, which starts the
# real binary with the library path set.  A preload must reach that binary,
# not the wrapper: a profiler preloaded into the shell starts its SIGPROF
# timer there, the timer survives the exec, and its first tick kills the
# real binary before anything there handles the signal.
# Threads = cores (at most 4); per run, rounds of an unprofiled and a
# profiled window in alternating order, so that the machine's changing load
# hits both alike.
threads=$(nproc); [ "$threads" -le 4 ] || threads=4
rounds=15 window=2
execute="$b/libtool --mode=execute"
echo "report: CPU overhead counted by perf (cpprof, then gperftools)" >&2
# overhead_run PROFILER [VAR=VALUE...]: the job loop's windows with and
# without PROFILER's profile, under perf, with the variables in its
# environment; their sample counts to $tmp/PROFILER.windows.
overhead_run() {
    run_profiler=$1
    shift
    # shellcheck disable=SC2086 # $execute is words
    perf_sample "$run_profiler" $execute env "$@" "$b/bench/cpu_overhead" \
        run "$run_profiler" "$threads" "$window" "$rounds" ||
        failed "CPU overhead ($run_profiler, under perf)" $? "$tmp/$run_profiler.err"
    perf_windows "$run_profiler" 'hash_block|job|worker' \
        >"$tmp/$run_profiler.windows" ||
        failed "CPU overhead ($run_profiler): no windows" 1 "$tmp/$run_profiler.err"
}
overhead_run cpprof CPPROF_CPU_HZ=100
overhead_run gperftools LD_PRELOAD="$libprofiler" CPUPROFILE_FREQUENCY=100
# libprofiler says at each stop how many ticks it took: none means the
# preload never profiled, and its figure would be a false zero.
grep -Eq 'PROFILE: interrupts/evictions/bytes = [1-9]' "$tmp/gperftools.err" ||
    failed "CPU overhead (gperftools): libprofiler took no samples" 1 "$tmp/gperftools.err"

echo "report: attribution (cpprof, then Go)" >&2
step "attribution (cpprof)" "$tmp/attr" \
    env top_builddir="$b" sh "$srcdir/bench/attribution.sh" 2 10
step "attribution (Go)" "$tmp/goattr" "$gobench" jobmix 10

echo "report: encode and census" >&2
step "encode" "$tmp/encode" "$b/bench/encode" 10000 100000
step "census" "$tmp/census" "$b/bench/census" parked
step "Go goroutine profile, 100" "$tmp/gor100" "$gobench" goroutines 100
step "Go goroutine profile, 1000" "$tmp/gor1000" "$gobench" goroutines 1000

echo "report: wall profile and parked tasks" >&2
step "wall (defaults)" "$tmp/wall" "$b/bench/wall"
step "wall (99 Hz)" "$tmp/wall99" env CPPROF_WALL_HZ=99 CPPROF_WALL_CPU_PERCENT=100 "$b/bench/wall"
for n in 10 100 1000; do
    step "Go fgprof-style, $n" "$tmp/fgprof$n" "$gobench" fgprof $n
done
step "tasks" "$tmp/tasks" "$b/bench/tasks"
step "Go goroutine profile, 100000" "$tmp/gor100000" "$gobench" goroutines 100000

c_apply=$(field "$tmp/labels" scoped_apply_restore_ns)
g_apply=$(field "$tmp/golabels" go_pprof_do_ns)
# overhead PROFILER: the profile's cost, in percent of the work: the
# other-per-work share of the profiled windows above the unprofiled ones',
# all rounds pooled; then the spread: the standard deviation of the
# rounds' own differences over the square root of their number (the
# figure's standard error, which is what run-to-run agreement depends on).
overhead() {
    awk '{ t[$3, $4] = $1; w[$3, $4] = $2; T[$3] += $1; W[$3] += $2 }
         END {
             share_on = 100 * (T["on"] - W["on"]) / W["on"]
             share_off = 100 * (T["off"] - W["off"]) / W["off"]
             for (r = 1; ("off", r) in t; r++) {
                 d = 100 * (t["on", r] - w["on", r]) / w["on", r] - \
                     100 * (t["off", r] - w["off", r]) / w["off", r]
                 s += d; ss += d * d; n++
             }
             sd = sqrt((ss - s * s / n) / (n - 1))
             printf "%.2f %.2f\n", share_on - share_off, sd / sqrt(n)
         }' "$tmp/$1.windows"
}
# shellcheck disable=SC2046 # two words each
set -- $(overhead cpprof) $(overhead gperftools)
c_ovh=$1 c_se=$2 g_ovh=$3 g_se=$4
c_attr=$(field "$tmp/attr" max_share_diff_points)
g_attr=$(field "$tmp/goattr" go_max_share_diff_points)
c_ratio=$(awk '/^sampled_cpu_seconds/ { print $6 }' "$tmp/attr")
g_ratio=$(field "$tmp/goattr" go_sampled_cpu_ratio)
enc() { awk -v n="$1" -v k="$2" '$2 == n { for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$tmp/encode"; }
# cen N KIND: the median of KIND (first, repeat) on the stacks census line
# for N threads ("KIND_ms min M median M").
cen() { awk -v n="$1" -v k="$2_ms" '$1 == "parked" && $2 == n && $3 == "stacks" { for (i = 4; i + 4 <= NF; i++) if ($i == k) print $(i + 4) }' "$tmp/census"; }
g100=$(field "$tmp/gor100" profile_ms)
g1000=$(field "$tmp/gor1000" profile_ms)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

echo "cpprof benchmark report, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(nproc) CPUs, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $(uname -sr)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '| %-46s | %14s | %14s | %8s |\n' measure cpprof other "ratio"
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' $(seq 48))" "$(printf -- '-%.0s' $(seq 16))" "$(printf -- '-%.0s' $(seq 16))" "$(printf -- '-%.0s' $(seq 10))"
row() { printf '| %-46s | %14s | %14s | %8s |\n' "$1" "$2" "$3" "$4"; }
row "label apply, ns (other: Go pprof.Do)" "$c_apply" "$g_apply" "$(ratio "$c_apply" "$g_apply")"
row "CPU overhead at 100 Hz, % (other: gperftools)" "$c_ovh" "$g_ovh" "$(ratio "$c_ovh" "$g_ovh")"
row "  its spread: standard error, pts" "$c_se" "$g_se" ""
row "attribution error, worst share pts (Go)" "$c_attr" "$g_attr" "$(ratio "$c_attr" "$g_attr")"
row "sampled CPU / getrusage (Go)" "$c_ratio" "$g_ratio" ""
row "encode 10,000 stacks, ms" "$(enc 10000 encode_ms)" "" ""
row "encode 10,000 stacks, bytes" "$(enc 10000 bytes)" "" ""
row "encode 100,000 stacks, ms" "$(enc 100000 encode_ms)" "" ""
row "encode 100,000 stacks, bytes" "$(enc 100000 bytes)" "" ""
row "census 100 threads, ms (Go goroutine profile)" "$(cen 100 repeat)" "$g100" "$(ratio "$(cen 100 repeat)" "$g100")"
row "census 1,000 threads, ms (Go)" "$(cen 1000 repeat)" "$g1000" "$(ratio "$(cen 1000 repeat)" "$g1000")"
row "first census of 1,000 new threads, ms (Go)" "$(cen 1000 first)" "$g1000" "$(ratio "$(cen 1000 first)" "$g1000")"
# wallcpu FILE N: cpu_pct of bench/wall's line for N threads.
wallcpu() { awk -v n="$2" '$1 == "threads" && $2 == n { print $6 }' "$1"; }
for n in 10 100 1000; do
    go_pct=$(field "$tmp/fgprof$n" cpu_pct)
    row "wall profile, $n threads, % CPU, defaults (fgprof)" "$(wallcpu "$tmp/wall" $n)" "$go_pct" ""
    row "  at 99 Hz, no budget (fgprof at 99 Hz)" "$(wallcpu "$tmp/wall99" $n)" "$go_pct" "$(ratio "$(wallcpu "$tmp/wall99" $n)" "$go_pct")"
done
t_prof=$(field "$tmp/tasks" goroutine_profile_100000_parked_tasks_ms)
g100000=$(field "$tmp/gor100000" profile_ms)
row "goroutine profile, 100,000 parked tasks, ms (Go)" "$t_prof" "$g100000" "$(ratio "$t_prof" "$g100000")"
