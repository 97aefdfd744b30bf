#!/bin/sh
# http_hostile.sh -- the server against a program that does unusual but
# legal things, test/hostile_app holding a 40-key label set with
# bytes that are not valid UTF-8:
#   - /metrics answers within 10 s (its work once doubled with each key
#     of a set) and the server stops working when a client leaves;
#   - keys that sanitise to one Prometheus name get _2, _3;
#   - every endpoint that shows labels (/metrics, /debug/pprof/labels,
#     /debug/pprof/accounting, goroutine in all three forms and as JSON)
#     answers valid UTF-8, invalid bytes shown as U+FFFD: the Prometheus
#     text passes the strict parser (and `promtool check metrics` when
#     installed), the JSON jansson, the profile google/pprof's parser;
#   - 10,000 symbol POSTs of 60 KB, each asking for 200 addresses no other
#     asked for, leave RSS bounded: after the first 2,000 it grows by no
#     more than SCRAPE_RSS_SLACK_KB (8 MiB; sanitizers' quarantine needs
#     more, Makefile.am sets it, and they get 2,000 POSTs in all).
set -u
. "$(dirname "$0")/http_lib.sh"
APP=$top_builddir/test/hostile_app
CHECK=$top_builddir/test/check_accounting

# start_app: runs hostile_app on a free port; sets $port, $base, $demo_pid.
start_app() {
    serve_on_free_port hostile_app "$tmp/app.err" launch_app app_serving
}
launch_app() {
    "$APP" "127.0.0.1:$port" >"$tmp/app.out" 2>"$tmp/app.err" &
}
app_serving() {
    grep -qs '^serving' "$tmp/app.out"
}

# cpu_ticks: the app's user + system CPU time in clock ticks.
cpu_ticks() {
    sed 's/.*) //' "/proc/$demo_pid/stat" | awk '{ print $12 + $13 }'
}

# utf8 NAME: the response body NAME is valid UTF-8.
utf8() {
    iconv -f UTF-8 -t UTF-8 "$tmp/$1.body" >/dev/null 2>&1 ||
        fail "$1: not valid UTF-8"
}

start_app

# --- /metrics with a 40-key set -----------------------------------------------
# 10 s: far above its cost (milliseconds), far below 2^40 steps, and no
# bound a loaded machine's scheduling can reach.
code=$(fetch metrics "http://127.0.0.1:$port/metrics" --max-time 10)
[ "$code" = 200 ] || fail "/metrics with a 40-key set: status $code in 10 s"
# Clients that give up early: the server must not keep working for them.
for i in 1 2 3; do
    curl -s -o /dev/null --max-time 0.05 "http://127.0.0.1:$port/metrics"
done
# Scheduling on a loaded machine may delay the last answers; the idle
# figure is taken once three successive 0.5 s windows agree.
before=$(cpu_ticks)
idle=0
for window in $(seq 20); do
    sleep 0.5
    now=$(cpu_ticks)
    if [ $((now - before)) -le 10 ]; then
        idle=$((idle + 1))
        [ "$idle" = 3 ] && break
    else
        idle=0
    fi
    before=$now
done
[ "$idle" = 3 ] || fail "server keeps using CPU after its clients left"

utf8 metrics
"$CHECK" --parse-metrics "$tmp/metrics.body" >/dev/null ||
    fail "/metrics does not parse"
if command -v promtool >/dev/null; then
    promtool check metrics <"$tmp/metrics.body" ||
        fail "promtool check metrics rejects /metrics"
else
    echo "promtool not installed: strict parser only"
fi
series=$(grep '^cpprof_threads{' "$tmp/metrics.body" | grep 'k00=')
[ -n "$series" ] || fail "no series for the 40-key set: $(head -c 2000 "$tmp/metrics.body")"
for want in 'a_b="' 'a_b_2="' 'a_b_3="' 'k00="v\357\277\27500"' \
    'bad___key="cut\357\277\275\357\277\275"' 'k35="v\357\277\27535"' \
    'a_b_3="z\357\277\275\357\277\275\357\277\275"'; do
    printf '%s\n' "$series" | grep -qF "$(printf "$want")" ||
        fail "/metrics: no $want in $series"
done
[ "$(printf '%s\n' "$series" | tr ',' '\n' | wc -l)" = 40 ] ||
    fail "/metrics: the set does not have 40 labels: $series"

# --- JSON and profiles -------------------------------------------------------
for ep in labels accounting; do
    code=$(fetch "$ep" "$base/$ep")
    [ "$code" = 200 ] || fail "$ep: status $code"
    utf8 "$ep"
    "$APP" --json "$tmp/$ep.body" || fail "$ep: jansson rejects it"
    grep -qF "$(printf 'v\357\277\27507')" "$tmp/$ep.body" ||
        fail "$ep: the label value is missing: $(head -c 2000 "$tmp/$ep.body")"
done
for debug in 1 2; do
    code=$(fetch "goroutine$debug" "$base/goroutine?debug=$debug")
    [ "$code" = 200 ] || fail "goroutine?debug=$debug: status $code"
    utf8 "goroutine$debug"
done
code=$(fetch index "$base/?format=json")
[ "$code" = 200 ] || fail "index: status $code"
utf8 index
code=$(curl -s -o "$tmp/goroutine.pb" -w '%{http_code}' --max-time 30 "$base/goroutine")
[ "$code" = 200 ] || fail "goroutine: status $code"
"$GOCHECK" "$tmp/goroutine.pb" >"$tmp/goroutine.check" ||
    fail "google/pprof rejects the goroutine profile"
grep -qF "$(printf 'v\357\277\27512')" "$tmp/goroutine.check" ||
    fail "goroutine profile: no label value: $(cat "$tmp/goroutine.check")"
code=$(fetch goroutinejson "$base/goroutine?format=json")
[ "$code" = 200 ] || fail "goroutine?format=json: status $code"
utf8 goroutinejson
"$APP" --json "$tmp/goroutinejson.body" || fail "goroutine?format=json: jansson rejects it"
grep -qF "$(printf 'v\357\277\27512')" "$tmp/goroutinejson.body" ||
    fail "goroutine?format=json: no label value"

# --- Symbol POSTs by the thousand ------------------------------------------------
rss_kb() {
    awk '$1 == "VmRSS:" { print $2 }' "/proc/$demo_pid/status"
}
# Under a sanitizer its quarantine holds freed memory (the RSS bound is
# then its 512 MiB slack, Makefile.am) and LeakSanitizer is the leak
# check: what is tested there is the server's memory and threads through
# the same requests, a fifth as many.
warm_posts=2000 more_posts=8000
case ${CPPROF_SANITIZER:-none} in
asan | tsan) warm_posts=400 more_posts=1600 ;;
esac
"$APP" --post-symbols "$port" $warm_posts 0 || fail "symbol POSTs failed"
warm=$(rss_kb)
"$APP" --post-symbols "$port" $more_posts $warm_posts || fail "symbol POSTs failed"
after=$(rss_kb)
echo "RSS after $warm_posts symbol POSTs: $warm kB; after $((warm_posts + more_posts)): $after kB"
[ $((after - warm)) -le "${SCRAPE_RSS_SLACK_KB:-8192}" ] ||
    fail "RSS grew from $warm kB to $after kB over $more_posts symbol POSTs"
echo "http_hostile: ok"
