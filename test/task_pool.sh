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
tenants="acme globex initech"
# value KEY LINE-PREFIX: KEY=VALUE's VALUE on the program's line.
value() {
    sed -n "s/^$2 .*\\b$1=\\([0-9]*\\).*/\\1/p" "$tmp/demo.out"
}

# --- The CPU profile --------------------------------------------------------
"$GOCHECK" -frames "$tmp/cpu.pb.gz" >"$tmp/cpu.check" ||
    fail "pprof's parser rejects the CPU profile"
moved=$(value migrations truth)
[ "${MOVES:-1}" = 0 ] || [ "${moved:-0}" -gt 0 ] ||
    fail "no job moved between threads: $(cat "$tmp/demo.out")"
# A sampled share is off from the truth by chance: with n independent
# draws its standard error is sqrt(q(1-q)/n).  The kernel checks CPU-time
# timers at its tick (CONFIG_HZ, Debian's 250), so above that rate a
# sample is one tick's draw weighted by its overruns: n is the profile's
# CPU time over the tick.  Each share may be off by 2 points or by 4
# standard errors, whichever is more.
kernel_hz=$( { zcat /proc/config.gz 2>/dev/null || cat "/boot/config-$(uname -r)" 2>/dev/null; } |
    sed -n 's/^CONFIG_HZ=\([0-9]*\)$/\1/p')
kernel_hz=${kernel_hz:-250}
true_total=0 seen_total=0
for t in $tenants; do
    true_total=$((true_total + $(value $t truth)))
    seen=$(awk -v t=$t '$1 == "tag" && $2 == "tenant" && $3 == t && $4 == 1 { print $5 }' "$tmp/cpu.check")
    seen_total=$((seen_total + ${seen:-0}))
done
[ "$seen_total" -gt 0 ] || fail "no tenant-labelled CPU: $(cat "$tmp/cpu.check")"
for t in $tenants; do
    truth=$(value $t truth)
    seen=$(awk -v t=$t '$1 == "tag" && $2 == "tenant" && $3 == t && $4 == 1 { print $5 }' "$tmp/cpu.check")
    awk -v t=$t -v a="${seen:-0}" -v b="$truth" -v sa=$seen_total -v sb=$true_total -v hz=$kernel_hz '
        BEGIN { p = 100 * a / sa; q = 100 * b / sb; n = sa * hz / 1e9
                bound = 4 * sqrt(q * (100 - q) / n); if (bound < 2) bound = 2
                printf "%s: profile %.1f%%, truth %.1f%% (%d ticks: within %.1f points)\n", t, p, q, n, bound
                exit !(p - q <= bound && q - p <= bound) }' ||
        fail "$t's CPU share is off by more than the bound"
done
# Work functions against labels: a sample in work_T carries tenant=T only.
for t in $tenants; do
    for other in $tenants '!tenant'; do
        [ "$other" = $t ] && continue
        case $other in '!tenant') where='!tenant' ;; *) where=tenant=$other ;; esac
        "$GOCHECK" -chain "work_$t" -where "$where" "$tmp/cpu.pb.gz" >"$tmp/cross.check" ||
            fail "gocheck -chain work_$t -where $where"
        awk '$1 == "chain" && $2 == "judged" { exit !($5 == 0) }' "$tmp/cross.check" ||
            fail "samples in work_$t with $where: $(cat "$tmp/cross.check")"
    done
    "$GOCHECK" -chain "work_$t" -where tenant=$t "$tmp/cpu.pb.gz" >"$tmp/own.check" ||
        fail "gocheck -chain work_$t"
    awk '$1 == "chain" && $2 == "judged" { exit !($5 > 0) }' "$tmp/own.check" ||
        fail "no sample of work_$t with tenant=$t: $(cat "$tmp/own.check")"
done
echo "ok: no sample in a tenant's work carries another tenant's labels, or none"
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
