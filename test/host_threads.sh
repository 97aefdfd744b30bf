#!/bin/sh
# host_threads.sh -- what cpprof's threads must not take from the program's
# thread that creates them: its signal mask, and a real-time policy.
#
# test/host_threads moves its main thread to SCHED_FIFO, starts cpprof's
# server and a CPU profile before it blocks its signals, then takes them
# with sigwait() on a thread of its own, and parks enough threads for a
# census to start its helpers.  After one census:
#   - every thread the program did not list as its own is cpprof's (named
#     so; under TSan its runtime's thread is left out), and blocks SIGHUP,
#     SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGCHLD
#     and SIGWINCH and leaves SIGPROF (the CPU sampler's), the census's
#     signal (39) and SIGSEGV open, as /proc/PID/task/TID/status's SigBlk
#     says; among them are each kind of cpprof's threads: the server's
#     pool (libmicrohttpd's MHD-worker), cpprof-window (made by the
#     window this test waits out first: the server makes one only then),
#     cpprof-watch, cpprof-sampler and cpprof-census;
#   - each of them runs under SCHED_OTHER while the program's main thread
#     runs under SCHED_FIFO (policy, field 41 of /proc/PID/task/TID/stat);
#     where the system refuses SCHED_FIFO, and under TSan (whose
#     interceptor gives pthread_create attributes of its own), this part
#     is said not checked;
#   - each of those signals, sent to the process with kill, is taken by the
#     program's thread ("took NAME"), one after the other, and SIGTERM
#     ends the program with status 0.  Before cpprof's threads blocked
#     them, the first kill ended the program (status 129: SIGHUP's default
#     action, run on one of cpprof's threads); before they left the real-
#     time policy, every one of them ran under SCHED_FIFO.
set -u
. "$(dirname "$0")/http_lib.sh"

start_program "$top_builddir/test/host_threads"
code=$(fetch window "$base/block?seconds=1")
[ "$code" = 200 ] || fail "window: status $code: $(cat "$tmp/window.body")"
code=$(fetch census "$base/goroutine?debug=1")
[ "$code" = 200 ] || fail "census: status $code: $(cat "$tmp/census.body")"

program=" $(sed -n 's/^program threads: //p' "$tmp/demo.out") "
[ "$program" != "  " ] || fail "the program did not list its threads"

# policy TASK: the scheduling policy of /proc/PID/task/TID (0 SCHED_OTHER,
# 1 SCHED_FIFO), field 41 of its stat, the 39th after the ")" that ends
# the name.
policy() {
    # shellcheck disable=SC2046 # the fields are words
    set -- $(sed 's/.*) //' "$1/stat")
    shift 38
    echo "$1"
}
realtime=yes
if [ "${CPPROF_SANITIZER:-none}" = tsan ]; then
    # TSan's pthread_create interceptor passes attributes of its own, and
    # cpprof leaves a creator's attributes alone (thread.h).
    realtime=
    echo "not checked under TSan: the policy of cpprof's threads"
elif grep -q '^realtime: refused' "$tmp/demo.out"; then
    realtime=
    echo "not checked: the policy of cpprof's threads ($(grep '^realtime' "$tmp/demo.out"))"
else
    [ "$(policy /proc/"$demo_pid"/task/"$demo_pid")" = 1 ] ||
        fail "the program's main thread is not under SCHED_FIFO"
fi

# blocked HALF SIGNAL: whether SIGNAL's bit is set in HALF, the low
# (signals 1-32) or high (33-64) 8 hex digits of a SigBlk line.
blocked() {
    [ $(((0x$1 >> (($2 - 1) % 32)) & 1)) = 1 ]
}

kinds=
own=0
for task in /proc/"$demo_pid"/task/*; do
    tid=${task##*/}
    case $program in *" $tid "*) continue ;; esac
    name=$(sed -n 's/^Name:\t//p' "$task/status") || continue
    mask=$(sed -n 's/^SigBlk:\t//p' "$task/status")
    [ ${#mask} = 16 ] || continue # gone meanwhile
    high=${mask%????????} low=${mask#????????}
    case $name in
    MHD-worker | cpprof-*) ;;
    *)
        # TSan's runtime has a thread of its own (which blocks every
        # signal); in other builds every thread is the program's or
        # cpprof's, and all of cpprof's are named.
        [ "${CPPROF_SANITIZER:-none}" = tsan ] && continue
        fail "thread $tid ($name) is neither the program's nor named as cpprof's"
        ;;
    esac
    own=$((own + 1))
    for sig in 1 2 3 10 12 13 14 15 17 28; do
        blocked "$low" $sig ||
            fail "cpprof's thread $tid ($name) leaves signal $sig open: SigBlk $mask"
    done
    for sig in 11 27; do
        blocked "$low" $sig &&
            fail "cpprof's thread $tid ($name) blocks signal $sig: SigBlk $mask"
    done
    blocked "$high" 39 &&
        fail "cpprof's thread $tid ($name) blocks the census's signal 39: SigBlk $mask"
    if [ -n "$realtime" ]; then
        p=$(policy "$task")
        [ "$p" = 0 ] || fail "cpprof's thread $tid ($name) runs under policy $p, not SCHED_OTHER"
    fi
    kinds="$kinds $name"
done
echo "cpprof's threads ($own):$kinds"
for kind in MHD-worker cpprof-window cpprof-watch cpprof-sampler cpprof-census; do
    case " $kinds " in *" $kind "*) ;; *) fail "no thread $kind among cpprof's:$kinds" ;; esac
done

for sig in HUP INT QUIT USR1 USR2 PIPE ALRM CHLD WINCH; do
    kill -s "$sig" "$demo_pid"
    took=
    for tick in $(seq 50); do
        grep -qx "took $sig" "$tmp/demo.out" && took=yes && break
        kill -0 "$demo_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$took" ]; then
        kill -0 "$demo_pid" 2>/dev/null ||
            { wait "$demo_pid"; fail "SIG$sig ended the program (status $?) instead of reaching its sigwait"; }
        fail "SIG$sig did not reach the program's sigwait within 5 s"
    fi
done
kill -s TERM "$demo_pid"
wait "$demo_pid"
status=$?
demo_pid=
[ $status = 0 ] || fail "SIGTERM: the program exited with status $status: $(cat "$tmp/demo.err")"
grep -qx "took TERM" "$tmp/demo.out" || fail "SIGTERM did not reach the program's sigwait"
echo "host_threads: ok"
