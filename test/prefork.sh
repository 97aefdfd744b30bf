#!/bin/sh
# prefork.sh -- a pre-forking program in zero-code mode (test/prefork):
# the forked children that live on serve, and the started process's index
# lists them; a child that execs or exits at once starts nothing.
#   workers: the index's forked_processes are exactly the two workers, a
#     CPU profile fetched from each one's listed URL has samples in
#     prefork_request_path, the exec'd child (sleep) runs one thread and
#     listens nowhere, one that execs after serving is listed no more,
#     and stderr says once where the workers serve;
#   daemon: the started process exits 1 s after its fork (after the
#     fork delay); its fork serves the address asked for, says so, and
#     lists its own worker;
#   orphan: the same when the first process is gone before the fork
#     handlers run in the daemon;
#   unreaped: a worker that _exits is no longer listed within 1 s of its
#     exit although its parent has not reaped it (a zombie, its port
#     anyone's), and one that stops its server is not listed once the
#     stop has returned;
#   CPPROF_HTTP_FORKS=0: no worker starts a thread of cpprof's;
#   jemalloc's or tcmalloc's malloc preloaded: no worker starts a thread
#     of cpprof's, stderr says why once, and the index (HTML and JSON).
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
# test ends it) serving a free port, forks serving after 200 ms, and
# waits until the command $launch_ready succeeds (the index answers, by
# default).  A port someone else holds (the started process says it
# cannot serve) is tried again on another, 8 times in all.
launch_ready=answers_index
launch() {
    mode=$1
    shift
    for attempt in 1 2 3 4 5 6 7 8; do
        end_family
        : >"$pidfile"
        random_port
        base=http://127.0.0.1:$port/debug/pprof
        env "$@" LD_PRELOAD="$PRELOAD" CPPROF_HTTP=127.0.0.1:$port \
            CPPROF_HTTP_FORK_DELAY_MS=200 "$PROG" "$mode" 60 "$pidfile" \
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

# profile_has URL NAME: a 2 s CPU profile from URL has samples in NAME.
profile_has() {
    curl -s --max-time 30 -o "$tmp/w.pb.gz" "${1}profile?seconds=2" ||
        fail "no CPU profile from $1"
    go tool pprof -top -focus="^$2\$" "$tmp/w.pb.gz" >"$tmp/w.top" \
        2>"$tmp/w.err" || fail "pprof on $1's profile: $(cat "$tmp/w.err")"
    grep -q " $2\$" "$tmp/w.top"
}

# -- workers --
launch workers
workers_listed 3 || fail "the index never listed the 2 workers and the late exec: $(cat "$tmp/index.json" "$tmp/workers.err")"
want=$(awk '$1 == "worker" || $1 == "late" { print $2 }' "$pidfile" | sort | tr '\n' ' ')
got=$(awk '{ print $1 }' "$tmp/listed" | sort | tr '\n' ' ')
[ "$want" = "$got" ] || fail "listed pids '$got', the workers are '$want'"
# The late one execs: its entry goes, though its pid lives on.
late=$(awk '$1 == "late" { print $2 }' "$pidfile")
touch "$pidfile.go"
workers_listed 2 || fail "the index still lists the worker that exec'd ($late): $(cat "$tmp/index.json")"
[ "$(cat "/proc/$late/comm")" = sleep ] || fail "the late worker $late did not exec sleep"
echo "ok: a worker that execs is no longer listed"
want=$(awk '$1 == "worker" { print $2 }' "$pidfile" | sort | tr '\n' ' ')
got=$(awk '{ print $1 }' "$tmp/listed" | sort | tr '\n' ' ')
[ "$want" = "$got" ] || fail "listed pids '$got', the workers are '$want'"
while read -r pid url; do
    profile_has "$url" prefork_request_path ||
        fail "worker $pid's profile ($url) has no prefork_request_path: $(cat "$tmp/w.top")"
done <"$tmp/listed"
echo "ok: both workers listed, each profile in prefork_request_path"
exec_pid=$(awk '$1 == "exec" { print $2 }' "$pidfile")
[ "$(cat "/proc/$exec_pid/comm" 2>/dev/null)" = sleep ] ||
    fail "the exec'd child $exec_pid is not running sleep"
threads=$(ls "/proc/$exec_pid/task" | wc -l)
[ "$threads" -eq 1 ] || fail "the exec'd child runs $threads threads"
if ss -ltnp 2>/dev/null | grep -q "pid=$exec_pid,"; then
    fail "the exec'd child listens: $(ss -ltnp | grep "pid=$exec_pid,")"
fi
echo "ok: the exec'd child runs 1 thread and listens nowhere"
said=$(grep -c "forked processes that live on serve too" "$tmp/workers.err")
[ "$said" -eq 1 ] || fail "stderr said where workers serve $said times: $(cat "$tmp/workers.err")"
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
launch unreaped
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
exited "$exiting" || fail "the worker $exiting was reaped meanwhile: the test shows nothing"
echo "ok: a worker that _exits is not listed within 1 s, unreaped"
stopping=$(awk '$1 == "stopping" { print $2 }' "$pidfile")
touch "$pidfile.stop"
for tick in $(seq 300); do
    grep -q "^unserved $stopping\$" "$pidfile" && break
    sleep 0.1
done
grep -q "^unserved $stopping\$" "$pidfile" || fail "the worker $stopping did not stop its server: $(cat "$tmp/unreaped.err")"
answer_lists "$stopping" && fail "the index lists the worker $stopping whose server has stopped: $(cat "$tmp/index.json")"
kill -0 "$stopping" || fail "the worker $stopping is gone: the test shows nothing"
echo "ok: a worker whose server stopped is not listed"
end_family

# -- daemon, orphan --
# check_daemon MODE: the daemon serves the address asked for, says so,
# and lists its worker.
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
    grep -q "pid $daemon_pid (prefork) was forked by pid $first, which has exited, so it serves 127.0.0.1:$port in its place" "$tmp/$mode.err" ||
        fail "$mode: the daemon did not say it serves in its parent's place: $(cat "$tmp/$mode.err")"
    read -r pid url <"$tmp/listed"
    [ "$pid" = "$(awk '$1 == "worker" { print $2 }' "$pidfile")" ] ||
        fail "$mode: the daemon lists $pid, not its worker"
    profile_has "$url" prefork_request_path ||
        fail "$mode: the daemon's worker's profile has no prefork_request_path"
    echo "ok: $mode: the daemon serves its parent's address and lists its worker"
    end_family
}
# The first process outlives the fork delay: the daemon serves a port of
# its own until it is gone.
check_daemon daemon
# The first process is gone before the daemon's fork handler runs (it
# was stopped as it left fork), where getppid() names init already: the
# daemon must still know whose place to take.
launch_ready="grep -q ^stopped $pidfile"
check_daemon orphan
launch_ready=answers_index

# -- CPPROF_HTTP_FORKS=0 --
# A worker that will serve has cpprof's waiting thread as soon as fork
# returns in it (the first part saw them serve); with
# CPPROF_HTTP_FORKS=0 it has none, so its one thread is all it will run.
# workers_single_threaded WHY: once both workers have started, each runs
# its one thread: the fork handler decides before fork returns in the
# child, and a worker writes its pid after that.
workers_single_threaded() {
    for tick in $(seq 300); do
        [ "$(grep -c '^worker' "$pidfile")" -eq 2 ] && break
        sleep 0.1
    done
    for pid in $(awk '$1 == "worker" { print $2 }' "$pidfile"); do
        threads=$(ls "/proc/$pid/task" | wc -l)
        [ "$threads" -eq 1 ] ||
            fail "with $1 worker $pid runs $threads threads"
    done
}
launch workers CPPROF_HTTP_FORKS=0
workers_single_threaded CPPROF_HTTP_FORKS=0
echo "ok: with CPPROF_HTTP_FORKS=0 each worker runs its one thread"
end_family

# -- another allocator --
# Forks serve only where the program's malloc is glibc's (http_forks.c):
# with jemalloc's or tcmalloc's preloaded no worker starts cpprof's
# thread, stderr says why once for the family, and the index says it too.
libdir=$(dirname "$(gcc -print-file-name=libc.so.6)")
cpprof_preload=$PRELOAD
for alloc in "$libdir/libjemalloc.so.2" "$libdir/libtcmalloc_minimal.so.4"; do
    [ -f "$alloc" ] || fail "no $alloc (setup.sh installs it)"
    PRELOAD="$alloc $cpprof_preload"
    launch workers
    workers_single_threaded "$alloc"
    said=$(grep -c "^cpprof: forks do not serve: the program's malloc is $alloc's" "$tmp/workers.err")
    [ "$said" -eq 1 ] ||
        fail "with $alloc stderr said forks do not serve $said times: $(cat "$tmp/workers.err")"
    curl -s --max-time 5 "$base/?format=json" >"$tmp/index.json" ||
        fail "no index with $alloc"
    jq -e --arg a "$alloc" '(.forks_declined | contains($a)) and (.forked_processes == [])' \
        "$tmp/index.json" >/dev/null ||
        fail "with $alloc the index's JSON does not say forks do not serve: $(cat "$tmp/index.json")"
    curl -s --max-time 5 "$base/" | grep -q "its children do not serve: the program&#39;s malloc is $alloc&#39;s" ||
        fail "with $alloc the index page does not say forks do not serve"
    echo "ok: with $(basename "$alloc") preloaded no worker serves, and stderr and the index say why"
    end_family
done
echo PASS
