#!/bin/sh
# http_unlabelled.sh -- /debug/pprof/heap, allocs, block, mutex and
# threadcreate against test/unlabelled_app, whose work all runs labelled
# tenant=acme at sites of known size and cost:
#  * every profile parses and passes CheckValid (gocheck), with Go's sample
#    types, and carries no string label: -tagfocus=tenant=acme matches
#    nothing in go tool pprof;
#  * heap: retain_site's 32 MiB in use within 20%; freed_site's 32 MiB
#    allocated within 20% and nothing of it in use;
#  * allocs?seconds=5: churn_site's 10 MiB/s within 20% over the window;
#  * block and mutex: the waiter's and the holder's delay within 20% of the
#    true wait the app measured with its own clock;
#  * threadcreate: exactly the 3 threads spawn_site created;
#  * Go's errors for bad seconds and debug values, and the text forms.
# The app samples every 64 KiB (not 512 KiB) so that the 20% bands are
# over 4 standard deviations wide: the test checks the estimator, not luck.
set -u
# Sanitizer builds: in a program linked with ASan or TSan the
# sanitizer's malloc comes before libcpprof's, so nothing reaches the heap
# profiler (test/check_heap still checks it, linked statically).
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER" >&2; exit 77 ;;
esac
. "$(dirname "$0")/http_lib.sh"
JOBRUNNER=$top_builddir/test/unlabelled_app
export CPPROF_MEM_PROFILE_RATE=65536

command -v go >/dev/null || fail "go not found (Debian package golang-go)"
[ -x "$GOCHECK" ] || fail "$GOCHECK not built"
start_demo
wait_ns=$(awk '$1 == "wait_ns" { print $2 }' "$tmp/demo.out")
[ -n "$wait_ns" ] || fail "app printed no wait_ns"

# get NAME QUERY: fetches a profile into $tmp/NAME.pb.gz, which must be a
# 200 attachment named NAME (or NAME-delta with seconds) that gocheck
# accepts with no string label.
get() {
    name=$1 query=${2:-}
    code=$(fetch "$name" "$base/$name$query")
    [ "$code" = 200 ] || fail "$name$query: status $code: $(cat "$tmp/$name.body")"
    want="attachment; filename=\"$name\""
    case $query in *seconds=*) want="attachment; filename=\"$name-delta\"" ;; esac
    [ "$(header "$name" content-disposition)" = "$want" ] ||
        fail "$name$query: content-disposition $(header "$name" content-disposition)"
    mv "$tmp/$name.body" "$tmp/$name.pb.gz"
    "$GOCHECK" "$tmp/$name.pb.gz" >"$tmp/$name.check" 2>&1 ||
        fail "gocheck $name: $(cat "$tmp/$name.check")"
    ! grep -q '^tag ' "$tmp/$name.check" ||
        fail "$name carries string labels: $(grep '^tag ' "$tmp/$name.check")"
    go tool pprof -tagfocus=tenant=acme -top "$tmp/$name.pb.gz" \
        >"$tmp/$name.tf" 2>&1 || fail "pprof -tagfocus $name: $(cat "$tmp/$name.tf")"
    grep -q 'TagFocus expression matched no samples' "$tmp/$name.tf" ||
        fail "-tagfocus=tenant=acme matched samples of $name: $(cat "$tmp/$name.tf")"
}

# focused NAME INDEX REGEXP [UNIT]: what go tool pprof counts under frames
# matching REGEXP for sample type INDEX, in UNIT (B, ns; none for counts).
focused() {
    go tool pprof -sample_index="$2" -focus="$3" -top -unit="${4:-B}" \
        "$tmp/$1.pb.gz" 2>"$tmp/pprof.err" |
        sed -n 's/^Showing nodes accounting for \([0-9.]*\)[a-zA-Z]*,.*/\1/p'
}

# within VALUE TRUTH WHAT: VALUE is within 20% of TRUTH.
within() {
    awk -v v="$1" -v t="$2" 'BEGIN { exit !(v >= 0.8 * t && v <= 1.2 * t) }' ||
        fail "$3: $1, expected $2 within 20%"
}

types() {
    grep '^sample_types ' "$tmp/$1.check" | cut -d' ' -f2-
}

heap_types="alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"
mib32=$((32 * 1024 * 1024))

# --- heap: in use and freed --------------------------------------------
get heap
[ "$(types heap)" = "$heap_types" ] || fail "heap types: $(types heap)"
grep -qx 'period_type space/bytes 65536' "$tmp/heap.check" ||
    fail "heap period: $(grep period "$tmp/heap.check")"
! grep -q '^default_sample_type' "$tmp/heap.check" ||
    fail "heap has a default sample type (Go leaves it unset)"
grep -qx 'numtag bytes bytes' "$tmp/heap.check" || fail "heap: no bytes numtag"
within "$(focused heap inuse_space retain_site)" $mib32 "retain_site in use"
within "$(focused heap alloc_space freed_site)" $mib32 "freed_site allocated"
freed_inuse=$(focused heap inuse_space freed_site)
[ "${freed_inuse:-0}" = 0 ] || fail "freed_site still in use: $freed_inuse"

# --- allocs: cumulative, and a 5 s delta of the churn ----------------------
get allocs
[ "$(types allocs)" = "$heap_types" ] || fail "allocs types: $(types allocs)"
grep -qx 'default_sample_type alloc_space' "$tmp/allocs.check" ||
    fail "allocs default sample type"
get allocs '?seconds=5'
within "$(focused allocs alloc_space churn_site)" $((50 * 1024 * 1024)) \
    "churn_site over 5 s"
dur=$(awk '$1 == "duration_nanos" { print $2 }' "$tmp/allocs.check")
within "$dur" 5000000000 "allocs delta duration_nanos"

# --- block and mutex --------------------------------------------------------
for p in block mutex; do
    get $p
    [ "$(types $p)" = "contentions/count delay/nanoseconds" ] ||
        fail "$p types: $(types $p)"
    grep -qx 'period_type contentions/count 1' "$tmp/$p.check" ||
        fail "$p period"
done
within "$(focused block delay waiter_site ns)" "$wait_ns" "block delay at waiter_site"
within "$(focused mutex delay holder_site ns)" "$wait_ns" "mutex delay at holder_site"

# --- threadcreate -------------------------------------------------------------
get threadcreate
[ "$(types threadcreate)" = "threadcreate/count" ] || fail "threadcreate types"
[ "$(focused threadcreate 0 spawn_site)" = 3 ] ||
    fail "threadcreate at spawn_site: $(focused threadcreate 0 spawn_site)"

# --- text forms -------------------------------------------------------------
expect_text() {
    code=$(fetch text "$base/$1")
    [ "$code" = 200 ] || fail "$1: status $code"
    [ "$(header text content-type)" = "text/plain; charset=utf-8" ] ||
        fail "$1: content-type $(header text content-type)"
    head -n1 "$tmp/text.body" | grep -q "$2" ||
        fail "$1: first line $(head -n1 "$tmp/text.body")"
}
expect_text 'heap?debug=1' '^heap profile: [0-9]*: [0-9]* \[[0-9]*: [0-9]*\] @ heap/131072$'
grep -q 'retain_site' "$tmp/text.body" || fail "heap?debug=1 names no retain_site"
expect_text 'allocs?debug=1' '^heap profile: '
expect_text 'block?debug=1' '^--- contention:$'
expect_text 'mutex?debug=1' '^--- mutex:$'
grep -qx 'sampling period=1' "$tmp/text.body" || fail "mutex?debug=1: no sampling period"
expect_text 'threadcreate?debug=1' '^threadcreate profile: total [0-9]*$'
code=$(fetch gc "$base/heap?gc=1")
[ "$code" = 200 ] || fail "heap?gc=1: status $code"
# Go reads a bad debug as 0; cpprof answers a bad value of a known
# parameter with a 400.
code=$(fetch dbg "$base/heap?debug=x")
[ "$code" = 400 ] || fail "heap?debug=x: status $code, want 400"

# --- Go's errors, in Go's order ---------------------------------------------
expect_error() {
    code=$(fetch err "$base/$1")
    [ "$code" = "$2" ] || fail "$1: status $code, expected $2"
    [ "$(cat "$tmp/err.body")" = "$3" ] || fail "$1: body $(cat "$tmp/err.body")"
    [ "$(header err x-go-pprof)" = 1 ] || fail "$1: no X-Go-Pprof"
}
bad='invalid value for "seconds" - must be a positive integer'
for p in heap allocs block mutex threadcreate; do
    for s in 0 -1 abc 1.5 99999999999999999999; do
        expect_error "$p?seconds=$s" 400 "$bad"
    done
    expect_error "$p?seconds=x&debug=1" 400 "$bad"
    expect_error "$p?seconds=1&debug=1" 400 \
        'seconds and debug params are incompatible'
done
echo "PASS: heap, allocs, block, mutex, threadcreate"
