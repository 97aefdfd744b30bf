#!/bin/sh
# goroutine_panicparse.sh -- Go's dump parsers read cpprof's dumps:
# panicparse (Debian's, 2.3.0) reads the demo's goroutine?debug=2 in its
# --tasks mode (threads, and tasks parked with --park-tasks) and finds
# every goroutine the dump lists, with "created by" for each the dump
# names a creator of (every task, the workers at least); it reads a crash report
# too (test/crash_labels --addr: one goroutine, created by main), and that
# report's header is the one debug=2 gave the same thread while it ran,
# with its labels, or without in both with CPPROF_TRACEBACKLABELS=0.
set -u
. "$(dirname "$0")/http_lib.sh"
command -v panicparse >/dev/null ||
    fail "panicparse is missing: apt-get install panicparse"

# panicparse NAME: parses $tmp/NAME into $tmp/NAME.pp, failing on an
# error; prints how many goroutines it found and how many of them it
# gives a creator ("N: state [Created by ...]" per group of N).
parse() {
    panicparse -parse=false -rebase=false -no-color "$tmp/$1" \
        >"$tmp/$1.pp" 2>"$tmp/$1.pperr" ||
        fail "$1: panicparse failed: $(cat "$tmp/$1.pperr")"
    awk '/^[0-9]+: / { n += $1; if (/\[Created by /) c += $1 }
         END { print n + 0, c + 0 }' "$tmp/$1.pp"
}

# --- the demo's debug=2, with parked tasks --------------------------------
start_demo --workers 2 --rate 50 --tasks --park 2 --park-tasks 3 --for 120
for tick in $(seq 100); do
    code=$(fetch d2 "$base/goroutine?debug=2")
    [ "$code" = 200 ] || fail "debug=2: status $code"
    [ "$(grep -c '"pprof_task": "parked"' "$tmp/d2.body")" -ge 3 ] && break
    sleep 0.1
done
headers=$(grep -c '^goroutine [0-9]* \[.*\]:$' "$tmp/d2.body")
tasks=$(grep -c '^goroutine [0-9]* \[.*"pprof_task": "parked".*\]:$' "$tmp/d2.body")
threads=$(grep -c '^goroutine [0-9]* \[[^]]*, thread "' "$tmp/d2.body")
[ "$tasks" -ge 3 ] || fail "debug=2: $tasks parked tasks, want 3"
[ "$((threads + tasks))" = "$headers" ] ||
    fail "debug=2: $headers headers, $threads threads and $tasks tasks"
[ "$threads" -ge "$(ls "/proc/$demo_pid/task" | wc -l)" ] ||
    fail "debug=2: $threads threads, /proc lists $(ls "/proc/$demo_pid/task" | wc -l)"
created=$(grep -c '^created by .* in goroutine [0-9]*$' "$tmp/d2.body")
# The workers, made by main with pthread_create, and every task.
[ "$(grep -c "^created by .* in goroutine $demo_pid\$" "$tmp/d2.body")" -ge 2 ] ||
    fail "debug=2: no worker created by main ($demo_pid)"
[ "$created" -ge $((tasks + 2)) ] ||
    fail "debug=2: $created creators for $tasks tasks and the workers"
set -- $(parse d2.body)
[ "$1" = "$headers" ] || fail "panicparse found $1 goroutines of $headers: $(cat "$tmp/d2.body.pp")"
[ "$2" = "$created" ] || fail "panicparse found $2 creators of $created"
echo "ok: panicparse read $1 goroutines ($threads threads, $tasks tasks), $2 with their creator"
stop_demo

# --- a crash report, and the same thread's header in debug=2 ------------
# crash_header NAME: runs test/crash_labels serving, takes debug=2 while
# its crasher runs, sets it off, and checks that the report's header is
# debug=2's for that thread; leaves the report in $tmp/NAME, the header in
# $tmp/NAME.header.
crash_header() {
    start_program "$top_builddir/test/crash_labels" segv
    tid=$(sed -n 's/^crasher \([0-9]*\)$/\1/p' "$tmp/demo.out")
    [ -n "$tid" ] || fail "$1: the crasher did not say its tid: $(cat "$tmp/demo.out")"
    code=$(fetch running "$base/goroutine?debug=2")
    [ "$code" = 200 ] || fail "$1: debug=2 of the crasher: status $code"
    grep "^goroutine $tid \[" "$tmp/running.body" >"$tmp/$1.running" ||
        fail "$1: debug=2 has no goroutine $tid"
    kill -USR1 "$demo_pid"
    wait "$demo_pid" # the shell may say "Segmentation fault": it is the test
    status=$?
    demo_pid=
    [ "$status" = 139 ] || fail "$1: the crasher exited with status $status, not SIGSEGV's: $(cat "$tmp/demo.err")"
    cp "$tmp/demo.err" "$tmp/$1"
    grep "^goroutine $tid \[" "$tmp/$1" >"$tmp/$1.header" ||
        fail "$1: the report has no goroutine $tid: $(cat "$tmp/$1")"
    cmp -s "$tmp/$1.running" "$tmp/$1.header" ||
        fail "$1: debug=2 and the crash report differ: $(cat "$tmp/$1.running") against $(cat "$tmp/$1.header")"
}
ulimit -c 0
crash_header crash
grep -q 'labels:{"kind": "crash", "tenant": "acme"}' "$tmp/crash.header" ||
    fail "the header has not the crasher's labels: $(cat "$tmp/crash.header")"
set -- $(parse crash)
[ "$1 $2" = "1 1" ] || fail "panicparse found $1 goroutines, $2 with a creator, in: $(cat "$tmp/crash")"
echo "ok: the crash report's header is debug=2's: $(cat "$tmp/crash.header")"
# The off switch, for both.
CPPROF_TRACEBACKLABELS=0
export CPPROF_TRACEBACKLABELS
crash_header unlabelled
! grep -q 'labels:' "$tmp/unlabelled.header" ||
    fail "CPPROF_TRACEBACKLABELS=0: labels in $(cat "$tmp/unlabelled.header")"
echo "ok: with CPPROF_TRACEBACKLABELS=0 neither shows labels: $(cat "$tmp/unlabelled.header")"
echo "PASS: goroutine_panicparse.sh"
