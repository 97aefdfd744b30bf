#!/bin/sh
# census_rename.sh -- a thread renamed by another while it sleeps shows its
# new name in the next census, through libcpprof.so: the census
# takes a thread that has not run since the last census from that census,
# name and all, so it must learn of the rename from cpprof's
# pthread_setname_np, which the library must export for the program's call
# to reach it.  test/census_rename parks the thread as "parked-old" and
# renames it "parked-new" on SIGUSR1; the script takes goroutine?debug=2
# twice before the rename (the second from the first's reuse) and once
# after.
set -u
. "$(dirname "$0")/http_lib.sh"

start_program "$top_builddir/test/census_rename"
name_line() { grep -c '^goroutine [0-9]* \[sleeping[^]]*, thread "'"$1"'"' "$tmp/$2.body"; }
for i in 1 2; do
    code=$(fetch before$i "$base/goroutine?debug=2")
    [ "$code" = 200 ] || fail "census $i: status $code"
    [ "$(name_line parked-old before$i)" = 1 ] ||
        fail "census $i: no sleeping parked-old: $(grep '^goroutine' "$tmp/before$i.body")"
done
kill -USR1 "$demo_pid"
for tick in $(seq 100); do
    grep -qx renamed "$tmp/demo.out" && break
    sleep 0.1
done
grep -qx renamed "$tmp/demo.out" || fail "the program never renamed its thread"
code=$(fetch after "$base/goroutine?debug=2")
[ "$code" = 200 ] || fail "census after the rename: status $code"
[ "$(name_line parked-new after)" = 1 ] ||
    fail "after the rename: $(grep '^goroutine' "$tmp/after.body")"
stop_demo
echo "ok: the renamed sleeping thread has its new name in the next census"
