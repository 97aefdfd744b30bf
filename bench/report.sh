#!/bin/sh
# report.sh -- cpprof against gperftools and Go, side by side, in one table
# (issue 8).  Runs the existing benches (bench/labels, bench/cpu_overhead,
# bench/attribution.sh, bench/encode, bench/census) and their counterparts:
# Go's runtime/pprof (bench/go, built here with Debian's golang-go) and
# gperftools' libprofiler (Debian libgoogle-perftools-dev, preloaded).
#
#   label apply      cpprof_do vs pprof.Do, ns per scoped apply, and ratio
#   CPU overhead     cost of a 100 Hz CPU profile to the demo's job loop, in
#                    jobs per process CPU second (a busy machine disturbs
#                    that less than wall-clock throughput): cpprof's on/off
#                    windows in one run; gperftools' (CPUPROFILE, SIGPROF
#                    at 100 Hz) as a run under libprofiler against a run
#                    without, both with cpprof off
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
#
# Usage: bench/report.sh   (from the build directory, or set top_builddir;
#                           takes about 3 minutes)
# The machine's load average is printed with the table: figures from a
# shared, busy machine are noisy.
set -eu
: "${top_builddir:=.}"
srcdir=$(cd "$(dirname "$0")/.." && pwd)
b=$top_builddir
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-report.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

make -s -C "$b" bench examples/jobrunner >/dev/null
gobench=$tmp/cpprofbench-go
(cd "$srcdir/bench/go" && GO111MODULE=off GOPATH=/usr/share/gocode \
    GOCACHE=$tmp/gocache go build -o "$gobench" main.go)
libprofiler=$(ls /usr/lib/*/libprofiler.so.0 2>/dev/null | head -n 1)
[ -n "$libprofiler" ] ||
    { echo "report: no libprofiler (apt-get install libgoogle-perftools-dev)" >&2; exit 1; }

# field FILE KEY: the word after KEY on its (last) line.
field() {
    awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) v = $(i + 1) } END { print v }' "$1"
}

echo "report: label apply" >&2
"$b/bench/labels" >"$tmp/labels"
"$gobench" labels >"$tmp/golabels"

echo "report: CPU overhead (cpprof, then gperftools)" >&2
# Threads = cores (at most 4), 3 s windows, 4 rounds of each.
threads=$(nproc); [ "$threads" -le 4 ] || threads=4
"$b/bench/cpu_overhead" "$threads" 3 4 >"$tmp/cpprof_ovh"
# gperftools holds SIGPROF: cpprof's own windows move to another signal
# (only the runs' cpprof-off windows are compared).
CPPROF_CPU_SIGNAL=40 "$b/bench/cpu_overhead" "$threads" 3 4 >"$tmp/plain_ovh"
CPPROF_CPU_SIGNAL=40 LD_PRELOAD=$libprofiler CPUPROFILE=$tmp/gperf.prof \
    CPUPROFILE_FREQUENCY=100 "$b/bench/cpu_overhead" "$threads" 3 4 \
    >"$tmp/gperf_ovh" 2>/dev/null

echo "report: attribution (cpprof, then Go)" >&2
top_builddir=$b sh "$srcdir/bench/attribution.sh" 2 10 >"$tmp/attr"
"$gobench" jobmix 10 >"$tmp/goattr"

echo "report: encode and census" >&2
"$b/bench/encode" 10000 100000 >"$tmp/encode"
"$b/bench/census" parked >"$tmp/census"
"$gobench" goroutines 100 >"$tmp/gor100"
"$gobench" goroutines 1000 >"$tmp/gor1000"

c_apply=$(field "$tmp/labels" scoped_apply_restore_ns)
g_apply=$(field "$tmp/golabels" go_pprof_do_ns)
c_ovh=$(field "$tmp/cpprof_ovh" cpu_overhead_percent)
plain=$(field "$tmp/plain_ovh" jobs_per_cpu_second_off)
gperf=$(field "$tmp/gperf_ovh" jobs_per_cpu_second_off)
g_ovh=$(awk -v p="$plain" -v g="$gperf" 'BEGIN { printf "%.2f", 100 * (p - g) / p }')
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
row "attribution error, worst share pts (Go)" "$c_attr" "$g_attr" "$(ratio "$c_attr" "$g_attr")"
row "sampled CPU / getrusage (Go)" "$c_ratio" "$g_ratio" ""
row "encode 10,000 stacks, ms" "$(enc 10000 encode_ms)" "" ""
row "encode 10,000 stacks, bytes" "$(enc 10000 bytes)" "" ""
row "encode 100,000 stacks, ms" "$(enc 100000 encode_ms)" "" ""
row "encode 100,000 stacks, bytes" "$(enc 100000 bytes)" "" ""
row "census 100 threads, ms (Go goroutine profile)" "$(cen 100 repeat)" "$g100" "$(ratio "$(cen 100 repeat)" "$g100")"
row "census 1,000 threads, ms (Go)" "$(cen 1000 repeat)" "$g1000" "$(ratio "$(cen 1000 repeat)" "$g1000")"
row "first census of 1,000 new threads, ms (Go)" "$(cen 1000 first)" "$g1000" "$(ratio "$(cen 1000 first)" "$g1000")"
