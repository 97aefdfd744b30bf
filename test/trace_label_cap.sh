#!/bin/sh
# trace_label_cap.sh -- a trace does not end labelling (issue 44, item 6).
# test/trace_label_cap labels each job with a set of its own and releases
# it, so the label cap (10,000 sets) never binds it: after its first
# 100,000 sets, a CPU profile, a 1 s trace, and another CPU profile.  The
# profile after the trace must carry the program's labels as the one
# before does: of the samples outside cpprof's own threads, at most 1% in
# the cap's overflow set (cpprof_overflow) and 80% or more with a tenant.
# The same with the flight recorder on from the start (after twice the
# cap's sets), whose JSON snapshot must still show the jobs' labels.  Then a program that keeps
# every set (--keep) with a cap of 1,000: the overflow is reported on
# stderr (once), on the index page (HTML and JSON) and on /metrics.
set -u
. "$(dirname "$0")/http_lib.sh"
PROG=$top_builddir/test/trace_label_cap

# await_labelled N: waits (at most 120 s, a bound on a hang) until the
# program has labelled N sets.
await_labelled() {
    for tick in $(seq 1200); do
        grep -qx "labelled $1" "$tmp/demo.out" && return 0
        kill -0 "$demo_pid" 2>/dev/null || fail "the program died: $(cat "$tmp/demo.err")"
        sleep 0.1
    done
    fail "the program never labelled $1 sets"
}

# judge_labels NAME: CPU profile NAME's samples outside cpprof's threads:
# at most 1% folded into the overflow set, at least 80% with a tenant
# (of 20 at least; the rest is the making of each job's set, outside it).
judge_labels() {
    code=$(fetch "$1" "$base/profile?seconds=1")
    [ "$code" = 200 ] || fail "$1: status $code: $(cat "$tmp/$1.body")"
    "$GOCHECK" "$tmp/$1.body" >"$tmp/$1.check" ||
        fail "google/pprof rejects $1"
    awk -v name="$1" '
        $1 == "total" && $2 == 0 { total = $3 }
        # tag KEY VALUE IDX SUM, VALUE quoted when it holds spaces
        $1 == "tag" && $(NF - 1) == 0 && $2 == "pprof_internal" { own += $NF }
        $1 == "tag" && $(NF - 1) == 0 && $2 == "cpprof_overflow" { folded += $NF }
        $1 == "tag" && $(NF - 1) == 0 && $2 == "tenant" { tenant += $NF }
        END {
            n = total - own
            printf "%s: %d samples of the program, %d folded into cpprof_overflow, %d with a tenant\n",
                name, n, folded, tenant
            exit !(n >= 20 && folded <= 0.01 * n && tenant >= 0.8 * n)
        }' "$tmp/$1.check" >"$tmp/$1.judged" ||
        fail "$(cat "$tmp/$1.judged")"
    echo "ok: $(cat "$tmp/$1.judged")"
}

# --- A trace window ----------------------------------------------------------
start_program "$PROG"
await_labelled 100000
judge_labels before
code=$(fetch trace "$base/trace?seconds=1")
[ "$code" = 200 ] || fail "trace: status $code: $(cat "$tmp/trace.body")"
judge_labels after
kill "$demo_pid"
wait "$demo_pid" || fail "the program exited with status $?: $(cat "$tmp/demo.err")"
demo_pid=

# --- The flight recorder, on from the start ---------------------------------
CPPROF_TRACE_FLIGHT_SECONDS=1 start_program "$PROG"
await_labelled 20000
judge_labels flight
code=$(fetch flight "$base/trace?flight=1&format=json")
[ "$code" = 200 ] || fail "flight: status $code: $(cat "$tmp/flight.body")"
jobs=$(jq '[.traceEvents[] | select(.args.labels.job != null and .args.labels.tenant != null)] | length' \
    "$tmp/flight.body") || fail "the flight snapshot is not JSON"
[ "$jobs" -gt 0 ] || fail "the flight snapshot shows no job's labels"
echo "ok: the flight snapshot shows $jobs events with a job's labels"
kill "$demo_pid"
wait "$demo_pid" || fail "the program exited with status $?: $(cat "$tmp/demo.err")"
demo_pid=

# --- The cap reached: said where the user looks -----------------------------
CPPROF_LABEL_CAP=1000 start_program "$PROG" --keep
folded=0
for tick in $(seq 600); do
    code=$(fetch metrics "http://127.0.0.1:$port/metrics")
    [ "$code" = 200 ] || fail "/metrics: status $code"
    folded=$(awk '$1 == "cpprof_labelsets_folded_total" { print $2 }' "$tmp/metrics.body")
    [ "${folded:-0}" -gt 0 ] && break
    sleep 0.1
done
[ "${folded:-0}" -gt 0 ] || fail "/metrics: no cpprof_labelsets_folded_total above 0: $(grep labelsets "$tmp/metrics.body")"
echo "ok: /metrics: cpprof_labelsets_folded_total $folded"
# Accounting is off in this program: the counters only it moves say so.
grep -qx 'cpprof_accounting_enabled 0' "$tmp/metrics.body" &&
    grep -q '^# HELP cpprof_cpu_seconds_total .*accounting is off.*CPPROF_ACCOUNTING=1' \
        "$tmp/metrics.body" ||
    fail "/metrics does not say that accounting is off: $(grep -a 'accounting\|^# HELP cpprof_cpu' "$tmp/metrics.body")"
code=$(fetch index "$base/")
[ "$code" = 200 ] || fail "index: status $code"
grep -q 'id="label-cap"' "$tmp/index.body" ||
    fail "the index page does not say the label cap was reached"
sed -n 's/<[^>]*>//g; /label cap/p' "$tmp/index.body" | head -1
code=$(fetch index_json "$base/?format=json")
jq -e '.label_cap.cap == 1000 and .label_cap.folded > 0' "$tmp/index_json.body" \
    >/dev/null || fail "index JSON: $(jq -c .label_cap "$tmp/index_json.body")"
kill "$demo_pid"
wait "$demo_pid" || fail "the program exited with status $?: $(cat "$tmp/demo.err")"
demo_pid=
said=$(grep -c 'label cap' "$tmp/demo.err")
[ "$said" = 1 ] || fail "stderr says the cap was reached $said times, want once: $(cat "$tmp/demo.err")"
echo "ok: stderr, once: $(grep 'label cap' "$tmp/demo.err")"
