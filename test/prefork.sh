#!/bin/sh
# prefork.sh -- a pre-forking program in zero-code mode (test/prefork):
# its forks are armed workers, which cost nothing of cpprof's until asked
# for through the started process (/debug/pprof/pid/PID/), and whose part
# goes again once idle; a child that execs or exits is no worker.
#   workers: the index's forked_processes are exactly the two workers,
#     the three idle ones and the late exec, armed, by their title; until
#     asked each runs its 1 thread and holds no socket of cpprof's; a pid
#     that is no worker (init, the started process, the exec'd and the
#     exited child, the late one once it has exec'd) answers 404; a CPU
#     profile of each worker through the started process has samples in
#     prefork_request_path; the first request for a worker blocked in
#     epoll_wait, and for one in timed polls, answers (from that worker)
#     within a generous bound; a request for one in nanosleep, which
#     cpprof does not watch, need not; no wait is cut short; each
#     worker's part is gone again within CPPROF_HTTP_WORKER_IDLE_MS of its
#     last request, with a generous bound, and answers again when asked
#     again; the exec'd child runs one thread and listens nowhere; a
#     worker forked while a client is connected to the started process
#     holds no socket of cpprof's;
#   daemon: the started process exits 1 s after its fork; its fork serves
#     the address asked for, says so, and reaches its own worker;
#   orphan: the same when the first process is gone before the fork
#     handlers run in the daemon;
#   unreaped: a worker that _exits is no longer listed within 1 s of its
#     exit although its parent has not reaped it (a zombie), and answers
#     404; one that stops cpprof's server while its part runs is rid of
#     it at once, and armed again;
#   CPPROF_HTTP_FORKS=0: no fork is armed: none listed, each answers 404;
#   jemalloc's or tcmalloc's malloc preloaded: forks are armed and answer
#     all the same (a worker's part starts at a blocking wait of the
#     program's, never in a fork handler, where another allocator may
#     still be locked).
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
PROG=$top_builddir/test/prefork
[ -x "$PROG" ] || fail "no $PROG"
pidfile=$tmp/pids
all_pids() { awk '{ print $2 }' "$pidfile" 2>/dev/null; }
end_family() {
    touch "$pidfile.go"
    for p in $(all_pids) $demo_pid; do
        kill "$p" 2>/dev/null
        kill -CONT "$p" 2>/dev/null # a stopped one (orphan) takes the TERM
    done
    demo_pid=
    rm -f "$pidfile.go"
}
trap 'end_family; cleanup' EXIT

# launch MODE [VAR=VALUE...]: runs prefork MODE for 60 s (a bound: the
# test ends it) serving a free port, workers' parts going after $idle_ms
# without a request (unless VAR=VALUE says otherwise), and waits until the command $launch_ready succeeds
# (the index answers, by default).  A port someone else holds (the
# started process says it cannot serve) is tried again on another, 8
# times in all.
launch_ready=answers_index
# A worker's part goes after this long without a request: short, so that
# the test sees it go.
idle_ms=1500
launch() {
    mode=$1
    shift
    for attempt in 1 2 3 4 5 6 7 8; do
        end_family
        : >"$pidfile"
        rm -f "$pidfile.fork" # asked for by one run only
        random_port
        base=http://127.0.0.1:$port/debug/pprof
        env LD_PRELOAD="$PRELOAD" CPPROF_HTTP=127.0.0.1:$port \
            CPPROF_HTTP_WORKER_IDLE_MS=$idle_ms "$@" "$PROG" "$mode" 60 \
            "$pidfile" \
            </dev/null >"$tmp/$mode.out" 2>"$tmp/$mode.err" &
        demo_pid=$!
        for tick in $(seq 100); do
            grep -q "cannot serve CPPROF_HTTP" "$tmp/$mode.err" && break
            $launch_ready && return 0
            sleep 0.1
        done
    done
    fail "prefork $mode never served: $(cat "$tmp/$mode.err")"
}

# workers_listed N: waits up to 30 s until the index at $base lists N
# forked processes; their "pid url" lines in $tmp/listed.
workers_listed() {
    for tick in $(seq 300); do
        curl -s --max-time 2 "$base/?format=json" >"$tmp/index.json" &&
            jq -r '.forked_processes[] | "\(.pid) \(.url)"' \
                "$tmp/index.json" >"$tmp/listed" 2>/dev/null &&
            [ "$(wc -l <"$tmp/listed")" -eq "$1" ] && return 0
        sleep 0.1
    done
    return 1
}

# fetch_profile PID: a 2 s CPU profile of worker PID, asked through $base,
# into $tmp/wPID.pb.gz, its status code into $tmp/wPID.code.
fetch_profile() {
    curl -s --max-time 60 -o "$tmp/w$1.pb.gz" -w '%{http_code}' \
        "$base/pid/$1/profile?seconds=2" >"$tmp/w$1.code"
}

# profile_has PID NAME: worker PID's profile (fetch_profile) answered 200
# with samples in NAME.
profile_has() {
    code=$(cat "$tmp/w$1.code")
    [ "$code" = 200 ] ||
        fail "worker $1's CPU profile through $base answered '$code': $(head -c 300 "$tmp/w$1.pb.gz")"
    go tool pprof -top -focus="^$2\$" "$tmp/w$1.pb.gz" >"$tmp/w$1.top" \
        2>"$tmp/w.err" || fail "pprof on worker $1's profile: $(cat "$tmp/w.err")"
    grep -q " $2\$" "$tmp/w$1.top"
}

# answers_404 PID WHAT: a request for PID's index through $base answers
# 404.
answers_404() {
    code=$(curl -s --max-time 30 -o "$tmp/404.body" -w '%{http_code}' \
        "$base/pid/$1/")
    [ "$code" = 404 ] ||
        fail "/debug/pprof/pid/$1/ ($2) answered '$code', not 404: $(head -c 300 "$tmp/404.body")"
}

# answers_from PID: the thread census of worker PID, asked through $base,
# answers 200 and is PID's own (its main thread's id is PID).
answers_from() {
    code=$(curl -s --max-time 60 -o "$tmp/g.txt" -w '%{http_code}' \
        "$base/pid/$1/goroutine?debug=2")
    [ "$code" = 200 ] ||
        fail "worker $1's census through $base answered '$code': $(head -c 300 "$tmp/g.txt"); its threads: $(cat /proc/$1/task/*/comm 2>&1 | paste -sd ' '), waiting in: $(cat /proc/$1/task/*/wchan 2>&1 | paste -sd ' '); stderr: $(cat "$tmp/$mode.err")"
    grep -q "^goroutine $1 \[.*, thread \"" "$tmp/g.txt" ||
        fail "worker $1's census through $base is not its own: $(head -20 "$tmp/g.txt")"
}

# pids_of WHAT...: the pids prefork wrote as WHAT, sorted, on one line.
pids_of() {
    for w in "$@"; do awk -v w="$w" '$1 == w { print $2 }' "$pidfile"; done |
        sort -n | paste -sd ' '
}

# -- workers --
launch workers
workers_listed 6 || fail "the index never listed the 5 workers and the late exec: $(cat "$tmp/index.json" "$tmp/workers.err")"
want=$(pids_of worker idle napping sleeping late)
got=$(awk '{ print $1 }' "$tmp/listed" | sort -n | paste -sd ' ')
[ "$want" = "$got" ] || fail "listed pids '$got', the workers are '$want'"
started=$demo_pid
title=$(ps -o args= -p "$started" | sed 's/ *$//')
for pid in $want; do
    costs_nothing "$pid" "$started" && [ -z "$(socket_inodes "$pid")" ] ||
        fail "a worker not yet asked for: $(worker_cost "$pid" "$started"); $(ls -l "/proc/$pid/fd")"
    jq -e --argjson p "$pid" --argjson s "$started" --arg t "$title" \
        '.forked_processes[] | select(.pid == $p) |
         .title == $t and .name == "prefork" and .parent == $s and
         .state == "armed"' "$tmp/index.json" >/dev/null ||
        fail "the index lists worker $pid as $(jq -c --argjson p "$pid" '.forked_processes[] | select(.pid == $p)' "$tmp/index.json"), not armed, titled '$title', forked by $started"
done
echo "ok: the 5 workers and the late exec are listed, armed, by their title; each runs 1 thread and holds no socket of cpprof's"
answers_404 1 init
answers_404 "$started" "the started process itself"
answers_404 "$(pids_of exec)" "a child that exec'd"
answers_404 "$(pids_of exit)" "a child that exited"
# The late one execs: its entry goes, though its pid lives on.
late=$(pids_of late)
touch "$pidfile.go"
workers_listed 5 || fail "the index still lists the worker that exec'd ($late): $(cat "$tmp/index.json")"
[ "$(cat "/proc/$late/comm")" = sleep ] || fail "the late worker $late did not exec sleep"
answers_404 "$late" "a worker that exec'd"
echo "ok: a worker that execs is no longer listed; pids of no worker answer 404"
asked=
for pid in $(pids_of worker); do
    fetch_profile "$pid" &
    asked="$asked $!"
done
for p in $asked; do wait "$p"; done
asked=
for pid in $(pids_of worker); do
    profile_has "$pid" prefork_request_path ||
        fail "worker $pid's profile has no prefork_request_path: $(cat "$tmp/w$pid.top")"
    asked="$asked $pid"
done
echo "ok: each worker's profile through the started process in prefork_request_path"
for pid in $(pids_of idle napping); do
    ms=$(date +%s%N)
    asked_ns=$ms
    answers_from "$pid"
    echo "ok: the first request for $(awk -v p="$pid" '$2 == p { print $1 }' "$pidfile") worker $pid answered from it in $((($(date +%s%N) - ms) / 1000000)) ms"
    asked="$asked $pid"
done
for pid in $asked; do
    await_costs_nothing "$pid" "$started" $((idle_ms / 1000 + 60))
    echo "ok: worker $pid's part went $acn_ms ms after its last request (CPPROF_HTTP_WORKER_IDLE_MS=$idle_ms)"
done
# Armed again: woken from its epoll_wait a second time.
answers_from "$(pids_of idle)"
echo "ok: a worker whose part went idle answers again"
# await_waits_ended: sleeps until every wait a request since $asked_ns
# woke has ended, 2 s from before it at most (the napping and the
# sleeping workers'; the idle one's was not to end).
await_waits_ended() {
    left_ms=$((2100 - ($(date +%s%N) - asked_ns) / 1000000))
    [ "$left_ms" -le 0 ] ||
        sleep "$((left_ms / 1000)).$(printf %03d $((left_ms % 1000)))"
}
await_waits_ended
! grep -E '^(woke|short|interrupted) ' "$pidfile" ||
    fail "a worker's wait was cut short"
echo "ok: no worker's wait was cut short"
# A worker in nanosleep, a wait cpprof does not watch: whatever it
# answers (503, or nothing within the 1 s the client waits), its sleep is
# not cut short; and a request given up on leaves the next answered.
curl -s --max-time 1 -o /dev/null "$base/pid/$(pids_of sleeping)/goroutine?debug=2"
asked_ns=$(date +%s%N)
await_waits_ended
! grep -E '^short ' "$pidfile" ||
    fail "a request for the worker $(pids_of sleeping) cut its nanosleep short"
answers_from "$(pids_of idle)"
echo "ok: a worker in nanosleep is not cut short, and a request given up on leaves the next answered"
exec_pid=$(pids_of exec)
[ "$(cat "/proc/$exec_pid/comm" 2>/dev/null)" = sleep ] ||
    fail "the exec'd child $exec_pid is not running sleep"
threads=$(threads_of "$exec_pid")
[ "$threads" -eq 1 ] || fail "the exec'd child runs $threads threads"
if ss -ltnp 2>/dev/null | grep -q "pid=$exec_pid,"; then
    fail "the exec'd child listens: $(ss -ltnp | grep "pid=$exec_pid,")"
fi
echo "ok: the exec'd child runs 1 thread and listens nowhere"
# A fork made while a client's connection to cpprof's server is open in
# the started process (a profile the test ends once the fork is made):
# the new worker holds none of it, nor any socket (prefork makes none).
curl -s --max-time 60 -o /dev/null "$base/profile?seconds=30" &
busy=$!
for tick in $(seq 300); do
    ss -Htn state established "sport = :$port" | grep -q . && break
    sleep 0.1
done
touch "$pidfile.fork"
for tick in $(seq 300); do
    grep -q '^forked ' "$pidfile" && break
    sleep 0.1
done
forked=$(pids_of forked)
[ -n "$forked" ] || fail "prefork forked no worker when told"
kill -0 "$busy" 2>/dev/null ||
    fail "the request ended before the fork: the test shows nothing"
costs_nothing "$forked" "$started" && [ -z "$(socket_inodes "$forked")" ] ||
    fail "a worker forked while a client was connected: $(worker_cost "$forked" "$started"); $(ls -l "/proc/$forked/fd")"
kill "$busy"
echo "ok: a worker forked while a client was connected to the started process holds none of its connections"
end_family

# -- unreaped --
# exited PID: whether PID has exited wholly (every thread gone) and is a
# zombie still, its parent having reaped it not.
exited() {
    grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null &&
        grep -q '^Threads:[[:space:]]*1$' "/proc/$1/status"
}
# lists PID: whether the index lists PID (its answer in $tmp/index.json);
# an index that does not answer (a loaded machine) says so with status 2.
lists() {
    curl -s --max-time 10 "$base/?format=json" >"$tmp/index.json" || return 2
    jq -e --argjson p "$1" 'any(.forked_processes[]; .pid == $p)' \
        "$tmp/index.json" >/dev/null
}
# answer_lists PID: as lists, asking again (30 times at most) until the
# index answers.
answer_lists() {
    for try in $(seq 30); do
        lists "$1"
        rc=$?
        [ "$rc" -eq 2 ] || return "$rc"
        sleep 1
    done
    fail "the index does not answer"
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
launch unreaped CPPROF_HTTP_WORKER_IDLE_MS=60000
workers_listed 2 || fail "the index never listed the 2 workers: $(cat "$tmp/index.json" "$tmp/unreaped.err")"
exiting=$(awk '$1 == "exiting" { print $2 }' "$pidfile")
touch "$pidfile.go"
for tick in $(seq 300); do
    exited "$exiting" && break
    sleep 0.1
done
exited "$exiting" || fail "the worker $exiting did not exit"
# Not listed within 1 s: an answer to a request sent a second after the
# exit or later must not list it (an earlier one may, but none did).
deadline=$(($(now_ms) + 1000))
for tick in $(seq 300); do
    sent=$(now_ms)
    lists "$exiting"
    case $? in
    1) break ;;
    0) [ "$sent" -lt "$deadline" ] ||
           fail "a second after its exit the index still lists the unreaped worker $exiting: $(cat "$tmp/index.json")" ;;
    esac
    sleep 0.05
done
answer_lists "$exiting" && fail "the index lists the unreaped worker $exiting: $(cat "$tmp/index.json")"
answers_404 "$exiting" "a worker that exited, unreaped"
exited "$exiting" || fail "the worker $exiting was reaped meanwhile: the test shows nothing"
echo "ok: a worker that _exits is not listed within 1 s, unreaped, and answers 404"
# A program that stops cpprof's server in a worker whose part runs: the
# part goes at once (not after the idle time, a minute here), and the
# worker is armed again, listed and reached as before.
stopping=$(pids_of stopping)
answers_from "$stopping"
touch "$pidfile.stop"
for tick in $(seq 300); do
    grep -qE "^(unserved|unstoppable) $stopping\$" "$pidfile" && break
    sleep 0.1
done
grep -q "^unserved $stopping\$" "$pidfile" ||
    fail "the worker $stopping, its part serving, could not stop it: $(cat "$pidfile" "$tmp/unreaped.err")"
await_costs_nothing "$stopping" "$demo_pid" 10
answer_lists "$stopping" ||
    fail "the index no longer lists the worker $stopping that stopped its part: $(cat "$tmp/index.json")"
jq -e --argjson p "$stopping" '.forked_processes[] | select(.pid == $p) | .state == "armed"' \
    "$tmp/index.json" >/dev/null ||
    fail "the worker $stopping that stopped its part is not listed armed: $(cat "$tmp/index.json")"
answers_from "$stopping"
echo "ok: a worker that stops its part is rid of it at once ($acn_ms ms), and armed again"
end_family

# -- daemon, orphan --
# check_daemon MODE: the daemon serves the address asked for, says so,
# and lists its worker, which answers through it.
check_daemon() {
    mode=$1
    launch "$mode"
    first=$demo_pid
    wait "$demo_pid" || fail "prefork $mode's first process exited with $?"
    demo_pid=
    stopped=$(awk '$1 == "stopped" { print $2 }' "$pidfile")
    [ -z "$stopped" ] || kill -CONT "$stopped"
    workers_listed 1 || fail "$mode: the daemon's index never listed its worker: $(cat "$tmp/index.json" "$tmp/$mode.err")"
    daemon_pid=$(awk '$1 == "daemon" { print $2 }' "$pidfile")
    # It is named by its title, its command line as ps shows it.
    grep -q "pid $daemon_pid ([^ ]*prefork $mode 60 $pidfile) was forked by pid $first, which has exited, so it serves 127.0.0.1:$port in its place" "$tmp/$mode.err" ||
        fail "$mode: the daemon did not say it serves in its parent's place: $(cat "$tmp/$mode.err")"
    read -r pid url <"$tmp/listed"
    [ "$pid" = "$(pids_of worker)" ] ||
        fail "$mode: the daemon lists $pid, not its worker"
    costs_nothing "$pid" "$daemon_pid" ||
        fail "$mode: the daemon's worker, not yet asked for: $(worker_cost "$pid" "$daemon_pid")"
    fetch_profile "$pid"
    profile_has "$pid" prefork_request_path ||
        fail "$mode: the daemon's worker's profile has no prefork_request_path"
    echo "ok: $mode: the daemon serves its parent's address and lists its worker"
    end_family
}
# The first process outlives the fork by 1 s: the daemon, armed, waits
# in sigsuspend when it goes.
check_daemon daemon
# The first process is gone before the daemon's fork handler runs (it
# was stopped as it left fork), where getppid() names init already: the
# daemon must still know whose place to take.
launch_ready="grep -q ^stopped $pidfile"
check_daemon orphan
launch_ready=answers_index

# -- CPPROF_HTTP_FORKS=0 --
# No fork is armed: the index lists none, a request for one answers 404,
# and it runs its one thread all the same.
launch workers CPPROF_HTTP_FORKS=0
for tick in $(seq 300); do
    [ "$(grep -c '^worker' "$pidfile")" -eq 2 ] && break
    sleep 0.1
done
curl -s --max-time 5 "$base/?format=json" >"$tmp/index.json" ||
    fail "no index with CPPROF_HTTP_FORKS=0"
jq -e '.forked_processes == []' "$tmp/index.json" >/dev/null ||
    fail "with CPPROF_HTTP_FORKS=0 the index lists forks: $(cat "$tmp/index.json")"
for pid in $(pids_of worker idle); do
    answers_404 "$pid" "a fork with CPPROF_HTTP_FORKS=0"
    costs_nothing "$pid" "$demo_pid" ||
        fail "with CPPROF_HTTP_FORKS=0, once asked for: $(worker_cost "$pid" "$demo_pid")"
done
echo "ok: with CPPROF_HTTP_FORKS=0 no fork is listed or reached, each runs its one thread"
end_family

# -- another allocator --
# A worker's part starts at a blocking wait of the program's, not in its
# fork handler, where jemalloc's or tcmalloc's locks may still be held by
# a thread left in the parent: with either preloaded, forks are armed and
# answer as with glibc's malloc.
libdir=$(dirname "$(gcc -print-file-name=libc.so.6)")
cpprof_preload=$PRELOAD
for alloc in "$libdir/libjemalloc.so.2" "$libdir/libtcmalloc_minimal.so.4"; do
    [ -f "$alloc" ] || fail "no $alloc (setup.sh installs it)"
    PRELOAD="$alloc $cpprof_preload"
    launch workers
    workers_listed 6 || fail "with $alloc the index never listed the 5 workers and the late exec: $(cat "$tmp/index.json" "$tmp/workers.err")"
    jq -e 'has("forks_declined") | not' "$tmp/index.json" >/dev/null ||
        fail "with $alloc the index says forks are declined: $(cat "$tmp/index.json")"
    for pid in $(pids_of worker idle); do
        answers_from "$pid"
    done
    echo "ok: with $(basename "$alloc") preloaded forks are armed and answer"
    end_family
done
echo PASS
