#!/bin/sh
# http_exit_profile.sh -- a CPU profile cut short by the program's exit.
#
# test/http_exit_profile (which returns from main on SIGTERM, its server
# running) is told to end while a 30 s profile's window is open.  exit()
# waits for the open request, which must be answered as ended by the exit
# (503, "the program is exiting"), not blamed on a client that is still
# there, and promptly, not after 30 s.
set -u
. "$(dirname "$0")/http_lib.sh"

start_program "$top_builddir/test/http_exit_profile"
(fetch cpu "$base/profile?seconds=30" --max-time 60 >"$tmp/cpu.code") &
client=$!
# The profile's handler waits on a window thread: the index counts it.
open=
for tick in $(seq 300); do
    if curl -s --max-time 5 "$base/?format=json" |
        grep -Eq '"windows_open": ?[1-9]'; then
        open=1
        break
    fi
    sleep 0.1
done
[ -n "$open" ] || fail "the profile's window never opened"
t0=$(date +%s)
kill -TERM "$demo_pid"
wait "$client"
t1=$(date +%s)
wait "$demo_pid" || fail "the program exited with status $?: $(cat "$tmp/demo.err")"
demo_pid=
code=$(cat "$tmp/cpu.code")
body=$(head -c 300 "$tmp/cpu.body")
echo "status $code after $((t1 - t0)) s: $body"
! grep -q "client went away" "$tmp/cpu.body" ||
    fail "the exit was blamed on the client: $code $body"
[ "$code" = 503 ] || fail "status $code, 503 wanted: $body"
grep -q "the program is exiting" "$tmp/cpu.body" ||
    fail "the answer does not say the program is exiting: $body"
[ $((t1 - t0)) -lt 20 ] || fail "the answer took $((t1 - t0)) s after the exit"
echo "ok: a profile cut short by exit is answered 503, the program exiting"
