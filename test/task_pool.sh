#!/bin/sh
# task_pool.sh -- tasks on a thread pool (test/task_pool.c): three
# tenants' jobs park on simulated I/O and resume on whichever pool thread
# is free, each measuring its own CPU with the thread CPU clock.
#   - the CPU profile (google/pprof's parser, gocheck; go tool pprof -tags)
#     gives each tenant its true share of CPU within 2 points or 4
#     standard errors of the sampled share (the kernel's ticks), and no
#     sample in one tenant's work function carries another tenant's labels
#     or none;
#   - the census taken while the jobs are parked lists exactly the parked
#     tasks the program counts per tenant (and /debug/pprof/labels counts
#     them under "tasks"), marked pprof_task=parked and
#     pprof_wait=io, each with await_io (PARK_FUNCTION) in its stack: the proto
#     (gocheck, go tool pprof -tags and -tagfocus), debug=1 and debug=2.
# TASK_PROGRAM and PARK_FUNCTION: the program and the function its jobs
# park in (test/task_coro.sh runs the C++20 coroutines' program);
# TASK_ARGS: the program's further arguments.
set -u
. "$(dirname "$0")/http_lib.sh"
. "$(dirname "$0")/task_shares.sh"
# MOVES=0: the program runs every job on one thread (an event loop).
# SCOPE_LABEL (KEY=VALUE): a label scope the jobs hold across their
# parks, which every sample of their work and every parked job carries.
program=${TASK_PROGRAM:-task_pool} park=${PARK_FUNCTION:-await_io}
scope_label=${SCOPE_LABEL:-}

# shellcheck disable=SC2086 # TASK_ARGS are words
start_program "$top_builddir/test/$program" --profile "$tmp/cpu.pb.gz" ${TASK_ARGS:-}
# The run takes 9 s before its quiet moment; 60 s bounds a hang.
for tick in $(seq 600); do
    grep -q '^quiet ' "$tmp/demo.out" && break
    kill -0 "$demo_pid" 2>/dev/null || fail "$program died: $(cat "$tmp/demo.err")"
    sleep 0.1
done
grep -q '^quiet ' "$tmp/demo.out" || fail "$program never got quiet: $(cat "$tmp/demo.out" "$tmp/demo.err")"

# --- The CPU profile --------------------------------------------------------
"$GOCHECK" -frames "$tmp/cpu.pb.gz" >"$tmp/cpu.check" ||
    fail "pprof's parser rejects the CPU profile"
moved=$(value migrations truth)
[ "${MOVES:-1}" = 0 ] || [ "${moved:-0}" -gt 0 ] ||
    fail "no job moved between threads: $(cat "$tmp/demo.out")"
check_shares "$tmp/cpu.check"
check_work_labels "$tmp/cpu.pb.gz"
if [ -n "$scope_label" ]; then
    for t in $tenants; do
        "$GOCHECK" -chain "work_$t" -where "!${scope_label%%=*}" "$tmp/cpu.pb.gz" >"$tmp/scope.check" ||
            fail "gocheck -chain work_$t -where !${scope_label%%=*}"
        awk '$1 == "chain" && $2 == "judged" { exit !($5 == 0) }' "$tmp/scope.check" ||
            fail "samples in work_$t without the scope's ${scope_label%%=*}: $(cat "$tmp/scope.check")"
    done
    echo "ok: every sample of the jobs' work carries $scope_label, the scope held across their parks"
fi
go tool pprof -tags "$tmp/cpu.pb.gz" >"$tmp/cpu.tags" 2>"$tmp/cpu.tags.err" ||
    fail "go tool pprof -tags: $(cat "$tmp/cpu.tags.err")"
for t in $tenants; do
    grep -q ": $t\$" "$tmp/cpu.tags" || fail "go tool pprof -tags shows no $t: $(cat "$tmp/cpu.tags")"
done

# --- The census at the quiet moment -----------------------------------------
total_parked=0
for t in $tenants; do
    total_parked=$((total_parked + $(value $t quiet)))
done
code=$(fetch g0 "$base/goroutine")
[ "$code" = 200 ] || fail "goroutine: status $code: $(cat "$tmp/g0.body")"
"$GOCHECK" "$tmp/g0.body" >"$tmp/g0.check" || fail "pprof's parser rejects the goroutine profile"
for want in valid "tag pprof_task parked 0 $total_parked" "tag pprof_wait io 0 $total_parked"; do
    grep -qx "$want" "$tmp/g0.check" || fail "goroutine: no '$want' in: $(cat "$tmp/g0.check")"
done
for t in $tenants; do
    want=$(value $t quiet)
    "$GOCHECK" -chain "$park" -where tenant=$t "$tmp/g0.body" >"$tmp/g0.chain" ||
        fail "gocheck -chain $park -where tenant=$t"
    awk -v n=$want '$1 == "chain" && $2 == "judged" { exit !($3 == n && $5 == n) }' "$tmp/g0.chain" ||
        fail "goroutine: $want parked $t tasks in $park wanted: $(cat "$tmp/g0.chain")"
done
echo "ok: the goroutine profile lists the parked tasks per tenant, in $park"
go tool pprof -tags "$tmp/g0.body" >"$tmp/g0.tags" 2>"$tmp/g0.tags.err" ||
    fail "go tool pprof -tags: $(cat "$tmp/g0.tags.err")"
grep -q "^ *$total_parked\.0 ( *100%): parked\$" "$tmp/g0.tags" ||
    fail "go tool pprof -tags shows no $total_parked parked: $(cat "$tmp/g0.tags")"
go tool pprof -tagfocus=pprof_task=parked -top "$tmp/g0.body" >"$tmp/g0.top" 2>"$tmp/g0.top.err" ||
    fail "go tool pprof -tagfocus: $(cat "$tmp/g0.top.err")"
grep -q "^Showing nodes accounting for $total_parked, " "$tmp/g0.top" ||
    fail "go tool pprof -tagfocus=pprof_task=parked: $(cat "$tmp/g0.top")"

# /debug/pprof/labels: the parked tasks per label, beside the threads.
code=$(fetch labels "$base/labels")
[ "$code" = 200 ] || fail "labels: status $code"
[ "$(jq '.tasks.total' "$tmp/labels.body")" = "$total_parked" ] &&
    [ "$(jq '.tasks.labels.pprof_wait.io.count' "$tmp/labels.body")" = "$total_parked" ] ||
    fail "labels: tasks are not the $total_parked parked: $(cat "$tmp/labels.body")"
for t in $tenants; do
    [ "$(jq ".tasks.labels.tenant.$t.count" "$tmp/labels.body")" = "$(value $t quiet)" ] ||
        fail "labels: parked $t tasks: $(jq -c .tasks "$tmp/labels.body")"
done
# The index's goroutine count: the threads (the pool is held: none come
# or go) and the parked tasks, as the goroutine profile lists them.
code=$(fetch index "$base/?format=json")
threads=$(ls "/proc/$demo_pid/task" | wc -l)
count=$(jq '.profiles[] | select(.name == "goroutine") | .count' "$tmp/index.body")
[ "$count" = $((threads + total_parked)) ] ||
    fail "index: goroutine count $count, not $threads threads and $total_parked parked tasks"
echo "ok: /debug/pprof/labels counts the parked tasks per tenant, the index's count them too"


code=$(fetch g1 "$base/goroutine?debug=1")
[ "$code" = 200 ] || fail "debug=1: status $code"
for t in $tenants; do
    want=$(value $t quiet)
    got=$(awk -v t="\"tenant\":\"$t\"" '
        /^[0-9]+ @/ { n = $1; next }
        /^# labels: / && index($0, "\"pprof_task\":\"parked\"") && index($0, t) { sum += n }
        END { print sum + 0 }' "$tmp/g1.body")
    [ "$got" = "$want" ] || fail "debug=1: $got parked $t tasks, the program counts $want: $(cat "$tmp/g1.body")"
done
grep -q "$(printf '^#\t0x[0-9a-f]*\t%s+0x' "$park")" "$tmp/g1.body" ||
    fail "debug=1: no $park frame"

code=$(fetch g2 "$base/goroutine?debug=2")
[ "$code" = 200 ] || fail "debug=2: status $code"
for t in $tenants; do
    want=$(value $t quiet)
    scoped=
    [ -z "$scope_label" ] || scoped="\"${scope_label%%=*}\": \"${scope_label#*=}\", "
    got=$(grep -c "^goroutine [0-9]* \[io, [0-9]* seconds, labels:{\"pprof_task\": \"parked\", \"pprof_wait\": \"io\", $scoped\"tenant\": \"$t\"}\]:\$" "$tmp/g2.body")
    [ "$got" = "$want" ] || fail "debug=2: $got parked $t tasks, want $want: $(grep '^goroutine' "$tmp/g2.body")"
done
# Each task's block names where it parked.
awk -v park="$park(" '/^goroutine .*"pprof_task": "parked"/ { if (inblock && !found) bad++; inblock = 1; found = 0; next }
     /^goroutine / { if (inblock && !found) bad++; inblock = 0; next }
     index($0, park) == 1 { found = 1 }
     END { if (inblock && !found) bad++; exit bad > 0 }' "$tmp/g2.body" ||
    fail "debug=2: a parked task without $park: $(cat "$tmp/g2.body")"
echo "ok: debug=1 and debug=2 list the parked tasks per tenant, in $park"

stop_demo
echo "PASS: $program"
