#!/bin/sh
# scope_moved.sh -- a label scope held across a co_await in a coroutine
# that is no task (test/scope_moved.cc): cpprof says that its code moved
# on within a second of the suspension, while the thread it began on
# works on under a CPU profile, naming that thread; and when the scope
# ends on another thread, it names both, by their real ids.
set -u
: "${top_builddir:=.}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-scope.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

"$top_builddir/test/scope_moved" "$tmp/err" >"$tmp/out" 2>"$tmp/err" ||
    fail "scope_moved: status $?: $(cat "$tmp/err")"
a=$(sed -n 's/^threads a=\([0-9]*\) .*/\1/p' "$tmp/out")
b=$(sed -n 's/^threads .* b=\([0-9]*\)$/\1/p' "$tmp/out")
seen=$(sed -n 's/^seen_ms=//p' "$tmp/out")
[ -n "$a" ] && [ -n "$b" ] && [ "$a" != 0 ] && [ "$b" != 0 ] && [ "$a" != "$b" ] ||
    fail "no two threads: $(cat "$tmp/out")"
grep -qx 'early=0' "$tmp/out" ||
    fail "said while the scope's block still ran: $(cat "$tmp/err")"
[ "$seen" -ge 0 ] && [ "$seen" -lt 1000 ] ||
    fail "the moved scope was not said within a second (seen_ms=$seen): $(cat "$tmp/err")"
grep -q "begun on thread $a outside a task is still open there, but the code that began it has moved on" "$tmp/err" ||
    fail "the line when it moved does not name thread $a: $(cat "$tmp/err")"
grep -q "begun on thread $a ended on thread $b:" "$tmp/err" ||
    fail "the line at its end does not name threads $a and $b: $(cat "$tmp/err")"
echo "ok: said ${seen} ms after the move, naming thread $a; at its end, threads $a and $b"
echo "PASS: scope_moved"
