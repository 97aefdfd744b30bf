#!/bin/sh
# http_own_memory.sh -- cpprof's own memory is not the program's (issue
# 17): after 20 CPU profiles of the demo (libdw's DWARF, profile building,
# the HTTP server all allocating), no stack of its heap profile -- in-use
# or allocated -- has a frame of cpprof (but for the two that call the
# program back), libdw, libelf, libmicrohttpd, protobuf-c or zlib; the demo's own allocations are there; and cpprof's
# own memory is reported apart, on the index (JSON and HTML) and /metrics.
set -u
# Sanitizer builds: the sanitizer's runtime comes before cpprof, so the
# demo (linked with libcpprof.so) has no heap profile, and says why.
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER" >&2; exit 77 ;;
esac
. "$(dirname "$0")/http_lib.sh"

start_demo --workers 2 --rate 400 --for 120
for i in $(seq 20); do
    code=$(fetch profile "$base/profile?seconds=1")
    [ "$code" = 200 ] || fail "profile $i: status $code: $(cat "$tmp/profile.body")"
done
code=$(fetch heap "$base/heap")
[ "$code" = 200 ] || fail "/heap: status $code: $(cat "$tmp/heap.body")"
"$GOCHECK" -frames "$tmp/heap.body" >"$tmp/heap.check" ||
    fail "google/pprof rejects the heap profile"
# Every location of the profile is on some sample's stack.  cpprof_do and
# thread_start_run are cpprof frames on the program's stacks (they call
# the program back); any other frame of cpprof's is its own allocation.
if grep '^frame ' "$tmp/heap.check" |
    grep -Ev '^frame (cpprof_do|thread_start_run) ' |
    grep -Ei ' (cpprof|dwfl|dwarf|elf|__libdw|__libelf|MHD|protobuf_c|deflate|builder|symbolize|census|http)_|libdw|libelf|libmicrohttpd|libprotobuf|libz\.|[ /]src/(upper/)?[a-z_]+\.c:' \
    >"$tmp/own.frames"; then
    fail "the heap profile has cpprof's own allocations: $(head -20 "$tmp/own.frames")"
fi
grep -q '^frame run_job ' "$tmp/heap.check" ||
    fail "the heap profile lacks the demo's run_job: $(cat "$tmp/heap.check")"
echo "ok: heap profile after 20 CPU profiles: $(grep -c '^frame ' "$tmp/heap.check") frames, none cpprof's"

code=$(fetch index "$base/?format=json")
[ "$code" = 200 ] || fail "index: status $code"
inuse=$(jq -e '.cpprof_internal_heap.inuse_bytes' "$tmp/index.body") ||
    fail "index JSON has no cpprof_internal_heap: $(cat "$tmp/index.body")"
allocated=$(jq -e '.cpprof_internal_heap.alloc_bytes' "$tmp/index.body")
[ "$allocated" -gt 0 ] && [ "$inuse" -ge 0 ] ||
    fail "cpprof's own memory: $inuse in use, $allocated allocated"
fetch page "$base/" >/dev/null
grep -q "cpprof's own memory: " "$tmp/page.body" ||
    fail "the index page does not show cpprof's own memory"
code=$(fetch metrics "http://127.0.0.1:$port/metrics")
[ "$code" = 200 ] || fail "/metrics: status $code"
grep -Eq '^cpprof_internal_heap_bytes [0-9]+$' "$tmp/metrics.body" ||
    fail "/metrics has no cpprof_internal_heap_bytes: $(cat "$tmp/metrics.body")"
echo "cpprof's own memory after 20 profiles: $inuse bytes in use, $allocated allocated (index);" \
    "$(grep '^cpprof_internal_heap_bytes ' "$tmp/metrics.body") (/metrics)"
kill "$demo_pid"; wait "$demo_pid" 2>/dev/null; demo_pid=
