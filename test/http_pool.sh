#!/bin/sh
# http_pool.sh -- the server on a fixed pool of threads, against
# the demo:
#   - 1,000 requests leave threadcreate's count unchanged (a request
#     creates no thread, and the pool's threads are not counted);
#   - the server's threads show in the census under pprof_internal=http,
#     and the index reports their number and CPU time; after a CPU
#     profile, it reports the sampler's collector's CPU time too (none
#     before the first);
#   - with http_threads=2, two windows (a CPU profile, a goroutine delta)
#     run on the two window threads while quick requests are answered at
#     once, also on the same keep-alive connection as a window; a third
#     window is a 503 naming the setting.
set -u
. "$(dirname "$0")/http_lib.sh"

# threads_created: threadcreate's total.
threads_created() {
    curl -s --max-time 30 "$base/threadcreate?debug=1" |
        awk '$1 == "threadcreate" && $2 == "profile:" { print $4 }'
}

start_demo --workers 2 --rate 200 --park 3 --for 120
before=$(threads_created)
[ -n "$before" ] || fail "no threadcreate total"
for i in $(seq 1000); do
    case $((i % 4)) in
    0) echo "url = \"$base/cmdline\"" ;;
    1) echo "url = \"$base/\"" ;;
    2) echo "url = \"http://127.0.0.1:$port/metrics\"" ;;
    3) echo "url = \"$base/symbol\"" ;;
    esac
    echo 'output = "/dev/null"'
done >"$tmp/urls"
# One connection each, as scrapers without keep-alive make them.
curl -s -K "$tmp/urls" -H 'Connection: close' -w '%{http_code}\n' >"$tmp/codes"
[ "$(grep -c '^200$' "$tmp/codes")" = 1000 ] ||
    fail "1,000 requests: $(sort "$tmp/codes" | uniq -c)"
after=$(threads_created)
echo "threadcreate total: $before before 1,000 requests, $after after"
[ "$after" = "$before" ] || fail "threadcreate went from $before to $after"

code=$(fetch census "$base/goroutine?debug=1")
[ "$code" = 200 ] || fail "goroutine: status $code"
grep -q '^# labels: {"pprof_internal":"http"}$' "$tmp/census.body" ||
    fail "no server thread labelled pprof_internal=http: $(cat "$tmp/census.body")"
code=$(fetch index "$base/?format=json")
[ "$code" = 200 ] || fail "index: status $code"
jq -e '.profiler.label == "pprof_internal=http" and .profiler.threads >= 1 and
       .profiler.threads <= 9 and .profiler.cpu_seconds > 0' \
    "$tmp/index.body" >/dev/null || fail "index: $(jq .profiler "$tmp/index.body")"
jq -e '.sampler.label == "pprof_internal=sampler" and .sampler.cpu_seconds == 0' \
    "$tmp/index.body" >/dev/null || fail "index before any profile: $(jq .sampler "$tmp/index.body")"
code=$(fetch html "$base/")
grep -q 'id="profiler">This server.s [0-9]* threads have used [0-9.]* s of CPU' \
    "$tmp/html.body" || fail "index page: no CPU line"
stop_demo

CPPROF_HTTP_THREADS=2 start_demo --workers 1 --rate 200 --for 120
curl -s -o "$tmp/long.pb" -w '%{http_code}\n' --max-time 30 \
    "$base/profile?seconds=10" >"$tmp/long.code" &
long=$!
# A keep-alive connection: a goroutine window, then a quick request on
# the same connection (curl reuses it for the second URL).
curl -s -w '%{http_code} %{time_total}\n' --max-time 30 \
    -o /dev/null "$base/goroutine?seconds=8" -o /dev/null "$base/cmdline" \
    >"$tmp/keepalive.codes" &
keepalive=$!
# The index says when both windows hold their threads (slow to come
# under the sanitizers: the windows are long enough for that).
open=
for tick in $(seq 100); do
    fetch windows "$base/?format=json" >/dev/null
    open=$(jq .profiler.windows_open "$tmp/windows.body" 2>/dev/null)
    [ "$open" = 2 ] && break
    sleep 0.1
done
[ "$open" = 2 ] || fail "the two windows never both opened: $open"
code=$(fetch third "$base/goroutine?seconds=1")
[ "$code" = 503 ] || fail "third window with http_threads=2: status $code"
grep -q 'http_threads=2' "$tmp/third.body" ||
    fail "503 does not name the setting: $(cat "$tmp/third.body")"
# 5 s: well inside the 8 and 10 s windows, so a request they held would
# fail, and beyond what a loaded machine adds to a quick one.
code=$(fetch quick "$base/cmdline" --max-time 5)
[ "$code" = 200 ] || fail "a quick request during two windows: status $code"
kill -0 "$long" 2>/dev/null || fail "the profile ended before the quick request"
wait "$long"
[ "$(cat "$tmp/long.code")" = 200 ] || fail "the profile: status $(cat "$tmp/long.code")"
fetch after "$base/?format=json" >/dev/null
jq -e '.sampler.cpu_seconds > 0' "$tmp/after.body" >/dev/null ||
    fail "index after a profile: no collector CPU: $(jq .sampler "$tmp/after.body")"
fetch afterhtml "$base/" >/dev/null
grep -q 'collector threads have used [0-9.]* s' "$tmp/afterhtml.body" ||
    fail "index page: no collector CPU line"
wait "$keepalive"
[ "$(awk '{ print $1 }' "$tmp/keepalive.codes" | tr '\n' ' ')" = "200 200 " ] ||
    fail "keep-alive window then quick request: $(cat "$tmp/keepalive.codes")"
stop_demo
echo "http_pool: ok"
