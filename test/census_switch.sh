#!/bin/sh
# census_switch.sh -- censuses of threads that switch between tasks all
# the time (test/census_switch.c: four threads, two tasks each, 20 us in
# a task and 20 us out): in each of 10 goroutine profiles (debug=1), no
# thread carries a task's labels without its task (pprof_task=running),
# and no task is listed twice (as its thread and again as parked): each
# tenant's entries are at most its two tasks.  (Before the census read
# labels and task in one step, 6 of 10 censuses failed.)
set -u
. "$(dirname "$0")/http_lib.sh"

start_program "$top_builddir/test/census_switch"
for i in $(seq 10); do
    code=$(fetch g "$base/goroutine?debug=1")
    [ "$code" = 200 ] || fail "debug=1: status $code"
    awk '/^[0-9]+ @/ { n = $1; next }
         /^# labels: / && match($0, /"tenant":"[a-z]+"/) {
             t = substr($0, RSTART + 10, RLENGTH - 11)
             if (!index($0, "\"pprof_task\":")) { print "no task: " $0; bad = 1 }
             count[t] += n }
         END { for (t in count) if (count[t] > 2) { print t " listed " count[t] " times"; bad = 1 }
               exit bad }' "$tmp/g.body" >"$tmp/bad" ||
        fail "census $i: $(cat "$tmp/bad")"
done
echo "ok: 10 censuses, no thread with a task's labels and no task, no task twice"
stop_demo
echo "PASS: census_switch"
