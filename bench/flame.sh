#!/bin/sh
# flame.sh -- the index page's flame graph on large profiles (the
# goal: 100,000 distinct stacks drawn in under a second in Chromium on
# this machine), and the JSON form's size against the proto's.
#
# For N in 10,000 and 100,000: bench/flame_stacks makes an allocs profile
# of exactly N distinct stacks (a full binary tree of calls, every
# allocation sampled); its sizes are read with curl (the .pb.gz, the JSON,
# the JSON gzip'd as the page gets it); then Debian's headless chromium
# (test/browsercheck -bench) opens the index page, shows the allocs flame
# graph RUNS times (default 3) and reports, per run, the milliseconds from
# the response's headers to the drawn graph (body transfer, gunzip, JSON
# parse, tree, canvas) and from the JSON text to the graph.
#
# Usage: bench/flame.sh [RUNS]   (from the build directory, or set
#                                 top_builddir; about a minute)
set -eu
: "${top_builddir:=.}"
b=$top_builddir
runs=${1:-3}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-flame.XXXXXX")
pid=
cleanup() {
    [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
command -v chromium >/dev/null ||
    { echo "flame: chromium is missing (apt-get install chromium)" >&2; exit 1; }
make -s -C "$b" bench/flame_stacks test/browsercheck/browsercheck >/dev/null

# serve N: runs flame_stacks with N stacks on a free port; sets $pid, $base.
serve() {
    for attempt in 1 2 3 4 5; do
        port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000))
        CPPROF_MEM_PROFILE_RATE=1 "$b/bench/flame_stacks" "$1" "127.0.0.1:$port" \
            >"$tmp/out" 2>"$tmp/err" &
        pid=$!
        for tick in $(seq 300); do
            if grep -qs '^serving' "$tmp/out"; then
                base=http://127.0.0.1:$port/debug/pprof
                return 0
            fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=
    done
    echo "flame: flame_stacks never served: $(cat "$tmp/err")" >&2
    exit 1
}

size() {
    curl -s --max-time 60 -o /dev/null -w '%{size_download}' "$@"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-9s %10s %10s %10s   %s\n' stacks samples proto_gz json json_gz \
    'response->graph ms, json->graph ms, frames drawn (per run)'
for n in 10000 100000; do
    serve "$n"
    proto=$(size "$base/allocs")
    json=$(size "$base/allocs?format=json")
    json_gz=$(size -H 'Accept-Encoding: gzip' "$base/allocs?format=json")
    "$b/test/browsercheck/browsercheck" -url "$base/" -bench allocs -runs "$runs" \
        >"$tmp/bench" || { echo "flame: the browser failed" >&2; exit 1; }
    samples=$(awk '$1 == "bench" { s = $6 } END { print s }' "$tmp/bench")
    timings=$(awk '$1 == "bench" { printf "%s%s/%s/%s", sep, $3, $4, $5; sep = "  " }' \
        "$tmp/bench")
    printf '%-8s %-9s %10s %10s %10s   %s\n' "$n" "$samples" "$proto" "$json" \
        "$json_gz" "$timings"
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=
done
