#!/bin/sh
# census_nondumpable.sh -- a census of a process that made itself
# non-dumpable (test/census_nondumpable: setuid to nobody, or
# PR_SET_DUMPABLE 0), where /proc/self/task/TID/syscall is root's and the
# census cannot read a blocked thread's stack from outside:
#   - every thread of /proc/PID/task is still in the census (debug=1's
#     total), not only the census's own (it listed 1 of 11 before);
#   - the thread blocked in read() is listed (debug=2) with the reason
#     "stack unreadable: the process is not dumpable" instead of a stack;
#   - stderr says so once, over three censuses;
#   - its read was not cut short: no census signalled it.
set -u
. "$(dirname "$0")/http_lib.sh"

start_program "$top_builddir/test/census_nondumpable"
grep -qx 'dumpable 0' "$tmp/demo.out" ||
    fail "the program did not make itself non-dumpable: $(cat "$tmp/demo.out")"
for i in 1 2 3; do
    code=$(fetch census$i "$base/goroutine?debug=$(((i + 1) % 2 + 1))")
    [ "$code" = 200 ] || fail "census $i: status $code: $(cat "$tmp/census$i.body")"
done
threads=$(ls /proc/"$demo_pid"/task | wc -l)
total=$(sed -n 's/^goroutine profile: total //p' "$tmp/census1.body")
[ "$total" = "$threads" ] ||
    fail "the census counts $total threads, /proc/$demo_pid/task lists $threads"
awk '/^goroutine [0-9]+ \[.*, thread "reader"/ { print; exit }' \
    "$tmp/census2.body" >"$tmp/reader"
grep -q 'stack unreadable: the process is not dumpable' "$tmp/reader" ||
    fail "the blocked reader is not listed with the reason: $(cat "$tmp/reader")"
[ "$(grep -c 'cannot be read: the process is not dumpable' "$tmp/demo.err")" = 1 ] ||
    fail "stderr does not say it once: $(cat "$tmp/demo.err")"

kill -TERM "$demo_pid"
wait "$demo_pid" || fail "the program exited with status $?: $(cat "$tmp/demo.err")"
demo_pid=
grep -qx 'read: ok' "$tmp/demo.out" ||
    fail "the reader's read was cut short: $(cat "$tmp/demo.out")"
echo "census_nondumpable: ok ($total threads)"
