#!/bin/sh
# http_go_details.sh -- details where Go's profiles and cpprof's must agree,
# checked with go tool pprof itself against the demo:
#   - source paths are absolute (the compile unit's directory joined to a
#     relative name), so `go tool pprof -list decode_block` shows the source
#     from a directory other than the build directory;
#   - a snapshot profile (heap, allocs, block, mutex, threadcreate,
#     goroutine) has duration_nanos 0, so pprof prints no Duration, while a
#     ?seconds= delta carries its window (threadcreate's, which every build
#     serves).
set -u
. "$(dirname "$0")/http_lib.sh"
command -v go >/dev/null || fail "go not found (Debian package golang-go)"

start_demo --workers 1 --for 120
code=$(fetch cpu "$base/profile?seconds=2")
[ "$code" = 200 ] || fail "profile: status $code: $(cat "$tmp/cpu.body")"
mkdir "$tmp/elsewhere"
(cd "$tmp/elsewhere" &&
    go tool pprof -list 'decode_block' "$tmp/cpu.body") \
    >"$tmp/list.out" 2>"$tmp/list.err" ||
    fail "go tool pprof -list: $(cat "$tmp/list.err")"
grep -q 'decode_block(uint32_t seed)' "$tmp/list.out" ||
    fail "-list from $tmp/elsewhere shows no source: $(cat "$tmp/list.out" "$tmp/list.err")"
grep -q "^ROUTINE ======================== decode_block in /" "$tmp/list.out" ||
    fail "-list names no absolute path: $(head -3 "$tmp/list.out")"
echo "ok: go tool pprof -list decode_block from another directory: $(grep -c . "$tmp/list.out") lines"

for p in heap allocs block mutex threadcreate goroutine; do
    code=$(fetch "$p" "$base/$p")
    # Under a sanitizer the demo has no heap profile (its runtime's malloc
    # comes first), and says so.
    [ "$code" = 501 ] && [ "${CPPROF_SANITIZER:-none}" != none ] && continue
    [ "$code" = 200 ] || fail "/$p: status $code"
    go tool pprof -top "$tmp/$p.body" >"$tmp/$p.top" 2>"$tmp/$p.err" ||
        fail "go tool pprof -top $p: $(cat "$tmp/$p.err")"
    if grep -q 'Duration:' "$tmp/$p.top"; then
        fail "$p snapshot: pprof prints a Duration: $(grep Duration "$tmp/$p.top")"
    fi
done
echo "ok: no Duration for heap, allocs, block, mutex, threadcreate, goroutine snapshots"
code=$(fetch delta "$base/threadcreate?seconds=2")
[ "$code" = 200 ] || fail "threadcreate?seconds=2: status $code"
go tool pprof -top "$tmp/delta.body" >"$tmp/delta.top" 2>"$tmp/delta.err" ||
    fail "go tool pprof -top threadcreate delta: $(cat "$tmp/delta.err")"
grep -q 'Duration: 2' "$tmp/delta.top" ||
    fail "threadcreate?seconds=2: no 2 s Duration: $(head -5 "$tmp/delta.top")"
echo "ok: threadcreate?seconds=2: $(grep -o 'Duration: [^,]*' "$tmp/delta.top")"
kill "$demo_pid"; wait "$demo_pid" 2>/dev/null; demo_pid=
