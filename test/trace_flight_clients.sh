#!/bin/sh
# trace_flight_clients.sh -- clients that ask for the flight recorder's
# JSON and never read it cost the host a bounded amount (issue 44, item
# 7).  test/trace_flight_clients fills a 2 MiB flight recorder; its JSON
# is some 4 MB, which the server held whole for each client (30 clients
# of a full 32 MiB recorder took a host from 39 to 430-795 MB; here, 30
# grew the program by 156 MB before issue 44).  Judged by
# reply_clients.py:
#  - 30 clients one after another, none reading: each is answered, the
#    process's peak resident size grows by less than 40 MiB (the working
#    set of a trace's encoding, 10 MB here, in the malloc arenas of the
#    threads that encode, and 30 compressed replies of 0.3 MB with their
#    inflating state: 22-24 MB measured), a reading client is served the
#    whole JSON meanwhile, the index too, and the program lives.  The size
#    before is the server's after one reader (the first request maps
#    libcpprof-upper.so and fills the symbolizer's tables, which is not
#    what replies hold);
#  - with http_reply_kb at 1 MiB, 6 such clients: the first are answered,
#    the rest get a 503 with Retry-After naming the setting, small replies
#    (the index) are still served, and once the clients have gone a
#    reading client is served again.
set -u
. "$(dirname "$0")/http_lib.sh"
: "${srcdir:=.}"
PROG=$top_builddir/test/trace_flight_clients
CLIENTS="python3 $srcdir/test/reply_clients.py"
JSON="/debug/pprof/trace?flight=1&format=json"
CPPROF_TRACE_KB=2048 CPPROF_TRACE_FLIGHT_SECONDS=3600
export CPPROF_TRACE_KB CPPROF_TRACE_FLIGHT_SECONDS

# await_filled: waits (at most 60 s, a bound on a hang) until the program
# has written its recorder round.
await_filled() {
    for tick in $(seq 600); do
        grep -qx filled "$tmp/demo.out" && return 0
        kill -0 "$demo_pid" 2>/dev/null || fail "the program died: $(cat "$tmp/demo.err")"
        sleep 0.1
    done
    fail "the program never filled its flight recorder"
}

# field NAME FILE: the value after NAME on reply_clients.py's lines.
field() {
    awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$2"
}

# --- 30 clients that never read ---------------------------------------------
start_program "$PROG" 100000
await_filled
code=$(fetch first "$base/trace?flight=1&format=json")
[ "$code" = 200 ] || fail "flight JSON: status $code: $(head -c 300 "$tmp/first.body")"
size=$(wc -c <"$tmp/first.body")
$CLIENTS "$port" "$demo_pid" "$JSON" 30 >"$tmp/held" 2>"$tmp/held.err" ||
    fail "the clients: $(cat "$tmp/held" "$tmp/held.err")"
cat "$tmp/held"
kill -0 "$demo_pid" 2>/dev/null || fail "the program died: $(cat "$tmp/demo.err")"
[ "$(field ok "$tmp/held")" = 30 ] ||
    fail "30 clients of a $size-byte reply: not all answered 200"
growth=$(field growth_kib "$tmp/held")
[ "$growth" -lt $((40 * 1024)) ] ||
    fail "30 clients holding a $size-byte reply grew the program by $growth KiB (40 MiB at most)"
grep -Eq "^reader 200 [0-9]+ json=OK$" "$tmp/held" ||
    fail "a reading client among them was not served the JSON whole"
grep -qx "index 200" "$tmp/held" || fail "the index was not served meanwhile"
echo "ok: 30 clients of a $size-byte reply that never read it: the program grew $growth KiB"
kill "$demo_pid"
wait "$demo_pid" || fail "the program exited with status $?: $(cat "$tmp/demo.err")"
demo_pid=

# --- Past http_reply_kb -----------------------------------------------------
CPPROF_HTTP_REPLY_KB=1024 start_program "$PROG" 100000
await_filled
$CLIENTS "$port" "$demo_pid" "$JSON" 6 >"$tmp/capped" 2>"$tmp/capped.err" ||
    fail "the clients: $(cat "$tmp/capped" "$tmp/capped.err")"
cat "$tmp/capped"
[ "$(field ok "$tmp/capped")" -ge 1 ] && [ "$(field refused "$tmp/capped")" -ge 1 ] ||
    fail "with http_reply_kb at 1 MiB, 6 clients of a $size-byte reply: not some answered and some refused"
retry=$(field retry_after "$tmp/capped")
[ "$retry" -gt 0 ] 2>/dev/null || fail "the 503 had no Retry-After: $retry"
grep -qx "index 200" "$tmp/capped" || fail "the index was not served past the limit"
code=$(fetch busy "$base/trace?flight=1&format=json")
[ "$code" = 200 ] || grep -q "http_reply_kb" "$tmp/busy.body" ||
    fail "the 503 does not name http_reply_kb: $(cat "$tmp/busy.body")"
# The clients gone, their replies are let go: a reader is served (the
# server sees a closed connection at its next write, within a moment).
for tick in $(seq 100); do
    code=$(fetch after "$base/trace?flight=1&format=json")
    [ "$code" = 200 ] && break
    sleep 0.1
done
[ "$code" = 200 ] || fail "after the clients left, a reader still got $code: $(cat "$tmp/after.body")"
echo "ok: past http_reply_kb a 503 (Retry-After: $retry s); the clients gone, a reader is served"
kill "$demo_pid"
wait "$demo_pid" || fail "the program exited with status $?: $(cat "$tmp/demo.err")"
demo_pid=
