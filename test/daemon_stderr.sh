#!/bin/sh
# daemon_stderr.sh -- cpprof writes nothing into a daemon's data files.
# test/daemon_stderr, run in zero-code mode
# (LD_PRELOAD=libcpprof.so CPPROF_HTTP=...), closes every descriptor with
# close_range(0, ~0U, 0) and opens three data files, which get 0, 1 and 2;
# the server's listening socket went in the close, and cpprof's thread
# that holds it until the first client (cpprof-listen) noticed and wrote
# its notice to descriptor 2:
# into the daemon's third file.  The program writes one line into each
# file and waits until that thread has ended (after its notice);
# each file must then hold exactly the daemon's line.  The same with the
# crash handler on (CPPROF_CRASH_HANDLER=1) and the daemon calling abort()
# after that: its traceback must not land in the file either.
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
PROG=$top_builddir/test/daemon_stderr

# run_daemon WANT [abort]: runs the daemon (its stderr $tmp/err) and fails
# unless it exits with status WANT.
run_daemon() {
    want=$1
    shift
    rm -f "$tmp/data0" "$tmp/data1" "$tmp/data2"
    (ulimit -c 0
     exec env LD_PRELOAD="$PRELOAD" CPPROF_HTTP=127.0.0.1:0 "$PROG" \
         "$tmp/data0" "$tmp/data1" "$tmp/data2" "$@" \
         </dev/null >"$tmp/out" 2>"$tmp/err")
    status=$?
    case $status in
    "$want") ;;
    3) fail "no cpprof-listen thread within 60 s: the address was not held: $(cat "$tmp/err")" ;;
    4) fail "close_range failed" ;;
    5) fail "a data file did not get descriptor 0, 1 or 2" ;;
    6) fail "cpprof's listening thread did not end within 60 s" ;;
    *) fail "the daemon exited with status $status (not $want): $(cat "$tmp/err")" ;;
    esac
}

# files_intact WHAT: each data file holds exactly its line.
files_intact() {
    for i in 0 1 2; do
        printf 'data file %d\n' $i >"$tmp/want$i"
        cmp -s "$tmp/want$i" "$tmp/data$i" && continue
        echo "data file $i ($1): wanted" >&2
        od -c "$tmp/want$i" >&2
        echo "has:" >&2
        od -c "$tmp/data$i" >&2
        fail "$1: the daemon's data file $i holds what it did not write"
    done
}

run_daemon 0
files_intact "the server's notice"
CPPROF_CRASH_HANDLER=1 run_daemon 134 abort
files_intact "the crash handler's traceback"
echo "daemon_stderr: ok"
