#!/bin/sh
# asio_echo.sh -- Boost.Asio's own coroutine echo server, its co_spawn
# made cpprof::co_spawn and a cpprof::scope per session once its tenant is
# known (test/asio_echo.cc), on 4 threads, under a client of its own
# process (test/asio_echo_client.c) with busy and parked connections per
# tenant:
#   - each tenant's share of the tenant-labelled CPU is the server's own
#     measure of its work's (within 2 points or 4 standard errors);
#   - no sample in a tenant's work function carries another's labels, or
#     none;
#   - at least 90% of the server's CPU outside cpprof's own threads and
#     the idle waits of Asio's scheduler carries a tenant, the profile's
#     comment says what share carried no label, and every sample in send(), which Asio makes for a
#     session's async_write once the session has suspended, carries one;
#   - once the busy connections have closed, the census lists exactly each
#     tenant's parked connections as parked tasks with its labels
#     (debug=1, /debug/pprof/labels).
set -u
. "$(dirname "$0")/http_lib.sh"
. "$(dirname "$0")/task_shares.sh"

client_pid=
trap '[ -z "$client_pid" ] || kill "$client_pid" 2>/dev/null; cleanup' EXIT

# await_line FILE PATTERN WHAT: waits for a line (at most 60 s: a bound
# on a hang, not a timing).
await_line() {
    for tick in $(seq 600); do
        grep -q "$2" "$1" && return 0
        kill -0 "$demo_pid" 2>/dev/null || fail "asio_echo died: $(cat "$tmp/demo.err")"
        sleep 0.1
    done
    fail "$3 never came: $(cat "$1" "$tmp/demo.err" "$tmp/client.err")"
}

start_program "$top_builddir/test/asio_echo" --profile "$tmp/cpu.pb.gz"
await_line "$tmp/demo.out" '^echo port ' "the echo server's port"
echo_port=$(sed -n 's/^echo port //p' "$tmp/demo.out")
: >"$tmp/client.err"
"$top_builddir/test/asio_echo_client" "$echo_port" >"$tmp/client.out" 2>"$tmp/client.err" &
client_pid=$!
await_line "$tmp/client.out" '^ready$' "the client's connections"

# --- The CPU profile --------------------------------------------------------
kill -USR1 "$demo_pid"
await_line "$tmp/demo.out" '^truth ' "the profile"
"$GOCHECK" "$tmp/cpu.pb.gz" >"$tmp/cpu.check" ||
    fail "pprof's parser rejects the CPU profile"
check_shares "$tmp/cpu.check"
check_work_labels "$tmp/cpu.pb.gz"
# The server's CPU outside cpprof's threads and its idle waits (Asio's
# scheduler in epoll_wait or its condition variable, without a tenant):
# what carries a tenant.
"$GOCHECK" -chain 'epoll_wait|__futex_abstimed_wait_common64|__futex_abstimed_wait_common' \
    -where '!tenant' -value 1 "$tmp/cpu.pb.gz" >"$tmp/idle.check" ||
    fail "gocheck -chain epoll_wait"
idle=$(awk '$1 == "chain" && $2 == "judged" { print $5 }' "$tmp/idle.check")
awk -v idle="${idle:-0}" '$1 == "total" && $2 == 1 { all = $3 }
     $1 == "tag" && $2 == "pprof_internal" && $4 == 1 { own += $5 }
     $1 == "tag" && $2 == "tenant" && $4 == 1 { tenant += $5 }
     END { share = 100 * tenant / (all - own - idle)
           printf "ok: %.1f%% of the program'"'"'s CPU outside idle waits (%.1f%% of it) carries a tenant\n", share, 100 * idle / (all - own)
           exit !(share >= 90) }' "$tmp/cpu.check" ||
    fail "less than 90% of the program's CPU carries a tenant: $(cat "$tmp/cpu.check")"
# The profile says what share of the program's CPU carried no label: here
# all that carries no tenant, cpprof's threads left out.
go tool pprof -comments "$tmp/cpu.pb.gz" >"$tmp/comments" 2>"$tmp/comments.err" ||
    fail "go tool pprof -comments: $(cat "$tmp/comments.err")"
said=$(sed -n "s/^\([0-9.]*\)% of the program's CPU carried no label .*/\1/p" "$tmp/comments")
[ -n "$said" ] || fail "no comment on the CPU without labels: $(cat "$tmp/comments")"
awk -v said="$said" '$1 == "total" && $2 == 1 { all = $3 }
     $1 == "tag" && $2 == "pprof_internal" && $4 == 1 { own += $5 }
     $1 == "tag" && $2 == "tenant" && $4 == 1 { tenant += $5 }
     END { bare = 100 * (all - own - tenant) / (all - own)
           printf "ok: the profile says %s%% of the program'"'"'s CPU carried no label (%.2f%%)\n", said, bare
           exit !(said - bare < 0.06 && bare - said < 0.06) }' "$tmp/cpu.check" ||
    fail "the profile's comment ($said%) is not its samples' share without labels"
send='__libc_send|__send|send|__libc_sendmsg|sendmsg'
"$GOCHECK" -chain "$send" "$tmp/cpu.pb.gz" >"$tmp/send.check" &&
    "$GOCHECK" -chain "$send" -where '!tenant' "$tmp/cpu.pb.gz" >"$tmp/send_bare.check" ||
    fail "gocheck -chain send"
awk '$1 == "chain" && $2 == "judged" { exit !($5 > 0) }' "$tmp/send.check" ||
    fail "no sample in send(): $(cat "$tmp/send.check")"
awk '$1 == "chain" && $2 == "judged" { exit !($5 == 0) }' "$tmp/send_bare.check" ||
    fail "samples in send() without a tenant: $(cat "$tmp/send_bare.check")"
echo "ok: every sample in send() carries a tenant"

# --- The census once only the parked connections are left --------------------
kill -USR1 "$client_pid"
await_line "$tmp/client.out" '^quiet ' "the client's quiet moment"
code=$(fetch g1 "$base/goroutine?debug=1")
[ "$code" = 200 ] || fail "debug=1: status $code"
code=$(fetch labels "$base/labels")
[ "$code" = 200 ] || fail "labels: status $code"
for t in $tenants; do
    want=$(sed -n "s/^quiet .*\\b$t=\\([0-9]*\\).*/\\1/p" "$tmp/client.out")
    got=$(awk -v t="\"tenant\":\"$t\"" '
        /^[0-9]+ @/ { n = $1; next }
        /^# labels: / && index($0, "\"pprof_task\":\"parked\"") &&
            index($0, "\"pprof_wait\":\"co_await\"") && index($0, t) { sum += n }
        END { print sum + 0 }' "$tmp/g1.body")
    [ "$got" = "$want" ] || fail "debug=1: $got parked $t sessions, the client keeps $want: $(cat "$tmp/g1.body")"
    got=$(jq ".tasks.labels.tenant.$t.count" "$tmp/labels.body")
    [ "$got" = "$want" ] || fail "labels: $got parked $t tasks, want $want: $(jq -c .tasks "$tmp/labels.body")"
done
echo "ok: the census lists each tenant's parked connections, and no more"
# The program's own threads, idle now, carry no label: the io_context's
# four and the profile's; the census says so beside cpprof's.
[ "$(jq .unlabelled.count "$tmp/labels.body")" = 5 ] ||
    fail "labels: not 5 threads without labels: $(jq -c '{total, unlabelled, labels}' "$tmp/labels.body")"

kill -TERM "$client_pid"
wait "$client_pid"
client_pid=
stop_demo
echo "PASS: asio_echo"
