#!/bin/sh
# http_metrics.sh -- per-label-set accounting against the demo run for 20 s
# with CPPROF_ACCOUNTING=1:
#   - bytes allocated and jobs counted (cpprof_counter_add) per tenant equal
#     the demo's own totals exactly;
#   - CPU seconds per tenant agree with the demo's thread-CPU-clock truth
#     within 5%;
#   - while it runs, cpprof_threads shows the parked threads holding their
#     sets;
#   - /metrics is text/plain; version=0.0.4 and passes the strict parser of
#     test/check_accounting (and `promtool check metrics` when Debian's
#     prometheus package is installed); /debug/pprof/accounting parses
#     with jansson.
# The demo holds after its run (--hold), so the counters read are final.
set -u
. "$(dirname "$0")/http_lib.sh"
CHECK=$top_builddir/test/check_accounting

CPPROF_ACCOUNTING=1 start_demo --workers 1 --for 20 --park 3 --hold
metrics=http://127.0.0.1:$port/metrics
fetch enabled "$metrics" >/dev/null
grep -qx 'cpprof_accounting_enabled 1' "$tmp/enabled.body" &&
    ! grep -q 'accounting is off' "$tmp/enabled.body" ||
    fail "/metrics does not say that accounting is on: $(grep -a accounting "$tmp/enabled.body")"

# The parked threads take their labels as they start.
for tick in $(seq 100); do
    fetch running "$metrics" >/dev/null
    [ "$(grep -c '^cpprof_threads{kind="wait",tenant="[a-z]*"} 1$' \
        "$tmp/running.body")" = 3 ] && break
    sleep 0.1
done
[ "$(grep -c '^cpprof_threads{kind="wait",tenant="[a-z]*"} 1$' \
    "$tmp/running.body")" = 3 ] ||
    fail "parked threads not counted: $(grep threads "$tmp/running.body")"

for tick in $(seq 400); do
    grep -qs '^jobs_per_second ' "$tmp/demo.out" && break
    kill -0 "$demo_pid" 2>/dev/null || fail "demo died: $(cat "$tmp/demo.err")"
    sleep 0.1
done
grep -qs '^jobs_per_second ' "$tmp/demo.out" || fail "demo never finished"

code=$(fetch metrics "$metrics")
[ "$code" = 200 ] || fail "/metrics: status $code: $(cat "$tmp/metrics.body")"
case "$(header metrics content-type)" in
"text/plain; version=0.0.4"*) ;;
*) fail "/metrics: content-type $(header metrics content-type)" ;;
esac
"$CHECK" --parse-metrics "$tmp/metrics.body" >/dev/null ||
    fail "/metrics does not parse"
if command -v promtool >/dev/null; then
    promtool check metrics <"$tmp/metrics.body" ||
        fail "promtool check metrics rejects /metrics"
fi
code=$(fetch json "$base/accounting")
[ "$code" = 200 ] || fail "accounting: status $code"
[ "$(header json content-type)" = application/json ] ||
    fail "accounting: content-type $(header json content-type)"
"$CHECK" --parse-json "$tmp/json.body" || fail "accounting JSON does not parse"

# sum METRIC TENANT: the metric summed over the tenant's job kinds.
sum() {
    awk -v m="$1" -v t="tenant=\"$2\"" '
        index($1, m "{") == 1 && index($1, t) && !index($1, "kind=\"wait\"") {
            s += $2; n++ }
        END { if (!n) exit 1; printf "%.9f\n", s }' "$tmp/metrics.body"
}

for tenant in acme globex initech; do
    truth_bytes=$(awk -v t="$tenant" '$1 == "tenant" && $2 == t &&
        $3 == "alloc_bytes" { print $4 }' "$tmp/demo.out")
    truth_jobs=$(awk -v t="$tenant" '$1 == "tenant" && $2 == t &&
        $3 == "alloc_bytes" { print $6 }' "$tmp/demo.out")
    truth_cpu=$(awk -v t="$tenant" '$1 == "tenant" && $2 == t &&
        $3 == "cpu_seconds" { print $4 }' "$tmp/demo.out")
    bytes=$(sum cpprof_alloc_bytes_total "$tenant") || fail "$tenant: no bytes"
    jobs=$(sum cpprof_user_jobs_total "$tenant") || fail "$tenant: no jobs"
    cpu=$(sum cpprof_cpu_seconds_total "$tenant") || fail "$tenant: no cpu"
    echo "$tenant: alloc_bytes $bytes (truth $truth_bytes)" \
        "jobs $jobs (truth $truth_jobs) cpu_seconds $cpu (truth $truth_cpu)"
    # Under ASan or TSan the sanitizer's malloc comes before
    # libcpprof's in the demo, so no allocation is counted.
    case ${CPPROF_SANITIZER:-none} in
    asan | tsan) ;;
    *) awk -v a="$bytes" -v b="$truth_bytes" 'BEGIN { exit !(a == b) }' ||
        fail "$tenant: alloc_bytes $bytes, truth $truth_bytes" ;;
    esac
    awk -v a="$jobs" -v b="$truth_jobs" 'BEGIN { exit !(a == b) }' ||
        fail "$tenant: jobs $jobs, truth $truth_jobs"
    awk -v a="$cpu" -v b="$truth_cpu" 'BEGIN {
        d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.05 * b) }' ||
        fail "$tenant: cpu_seconds $cpu, truth $truth_cpu (over 5%)"
done
echo "PASS"
