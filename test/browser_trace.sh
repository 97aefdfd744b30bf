#!/bin/sh
# browser_trace.sh -- the index page's timeline view (www/trace.js) in
# headless chromium, driven by test/browsercheck -trace over the DevTools
# protocol.
#
# First against a known trace: test/trace_fixture.json, given to the page
# in answer to its request for /debug/pprof/trace?seconds=1&format=json
# (browsercheck -trace-fixture holds the request in the browser), so every
# lane, span, legend entry and tooltip is known: three threads and the
# main thread, a task lane, tenants acme, initech and globex, a region, a
# mutex and a block wait with stacks, CPU samples, logs, 3 dropped events.
# The view must draw each lane with its spans, colour by tenant (keys kind
# and tenant offered), say that events were dropped, show a span's labels
# and duration on hover and a lock wait's and a CPU sample's stack, zoom by
# the wheel and by a drag, pan, reset, and say when a trace has no CPU
# samples.
#
# Then the real thing, the acceptance line of issue 28: the demo (2
# workers, 3 parked threads) traced for 2 s through /debug/pprof/trace:
# the workers' lanes drawn with their jobs' label spans (tenants acme,
# globex, initech; kinds reindex and export), a span's labels shown on
# hover.  No console errors in either run.  test/browser-shots/trace.png
# (build tree) is the view as drawn, a tooltip open.
set -u
. "$(dirname "$0")/http_lib.sh"
BROWSERCHECK=$top_builddir/test/browsercheck/browsercheck
FIXTURE=$(dirname "$0")/trace_fixture.json
SHOTS=$top_builddir/test/browser-shots
command -v chromium >/dev/null || fail "chromium is missing: apt-get install chromium"

# line WORDS: the page's first line starting with WORDS.
line() {
    grep -m1 "^$1 " "$tmp/page"
}

# no_console_errors [PATTERN]: the page logged no error but those matching
# PATTERN (expected ones).
no_console_errors() {
    ! grep '^console' "$tmp/page" | grep -v "${1:-^$}" ||
        fail "the page logged errors (above)"
}

# check_zoom: the wheel narrowed the view, shift+wheel moved it without
# changing its width, the reset gave the whole window back, a drag across
# 200 px zoomed to those 200 px (showing the selection meanwhile), and a
# drag along the ruler moved the view.
check_zoom() {
    line 'trace zoom' | awk '{ full = $3; wheel = $4; panned = $5; pw = $6
        reset = $7; drag = $8; want = $9; sel = $10; ruler = $11
        d = drag / want - 1; if (d < 0) d = -d
        pd = pw / wheel - 1; if (pd < 0) pd = -pd
        ok = full > 0 && wheel < 0.7 * full && panned > 0 && pd < 1e-6 &&
             reset == full && d < 0.01 && sel == "true" && ruler > 0 }
        END { exit !ok }' || fail "zoom and pan: $(line 'trace zoom')"
}

start_demo --workers 2 --rate 400 --park 3 --for 120
mkdir -p "$SHOTS"

# ---- The fixture ------------------------------------------------------------
"$BROWSERCHECK" -url "$base/" -trace 1 -trace-fixture "$FIXTURE" \
    -shots "$tmp" >"$tmp/page" ||
    fail "the browser could not show the fixture's timeline"
cat "$tmp/page"
grep -qx "trace request $base/trace?seconds=1&format=json" "$tmp/page" ||
    fail "the view asked for: $(grep '^trace request' "$tmp/page")"
# Lanes: threads by tid, then the task; spans, drawn, bars, instants.
[ "$(grep '^trace lane' "$tmp/page")" = "$(cat <<'EOF'
trace lane 4242 0 0 0 0 - - jobrunner 4242
trace lane 4243 4 4 1 8 acme,globex,initech export,reindex worker-0 4243
trace lane 4244 2 2 1 3 globex,initech export,reindex worker-1 4244
trace lane 4245 0 0 1 2 - - producer 4245
trace lane 1000000007 2 2 0 0 acme export task 7
EOF
)" ] || fail "fixture lanes: $(grep '^trace lane' "$tmp/page")"
[ "$(line 'trace keys')" = 'trace keys tenant kind tenant' ] ||
    fail "colour keys: $(line 'trace keys')"
[ "$(line 'trace legend')" = 'trace legend acme globex initech' ] ||
    fail "legend: $(line 'trace legend')"
line 'trace other' | grep -q '^trace other 3 true .*3 events were dropped' ||
    fail "dropped events not told: $(line 'trace other')"
# The widest label span is worker-1's initech job of 200 ms.
[ "$(line 'trace hover')" = 'trace hover kind=reindex tenant=initech | kind=reindex | tenant=initech | duration 200.000 ms | on worker-1 4244 at +160.000 ms' ] ||
    fail "hover: $(line 'trace hover')"
line 'trace lockwait' | grep -q 'block: waiting for a condition.*duration 300.000 ms.*stack: |   pthread_cond_wait |   queue_push' ||
    fail "lock wait: $(line 'trace lockwait')"
line 'trace cpusample' | grep -q '^trace cpusample CPU sample | .*tenant=.*stack: |   [a-z_]' ||
    fail "CPU sample: $(line 'trace cpusample')"
[ "$(line 'trace task')" = 'trace task task 7 | kind=export | tenant=acme | duration 60.000 ms | run on thread 4243 | then parked: io | on task 7 at +20.000 ms' ] ||
    fail "task run: $(line 'trace task')"
check_zoom
grep -qx "trace request $base/trace?flight=1&format=json" "$tmp/page" &&
    line 'trace flight' | grep -q '^trace flight ok as of' ||
    fail "flight recorder button: $(line 'trace flight'); $(grep '^trace request' "$tmp/page")"
line 'trace nocpu' | grep -q 'No CPU samples' ||
    fail "no word on a trace without CPU samples: $(line 'trace nocpu')"
no_console_errors

# ---- The demo ---------------------------------------------------------------
"$BROWSERCHECK" -url "$base/" -trace 2 -shots "$SHOTS" >"$tmp/page" ||
    fail "the browser could not show the demo's timeline"
cat "$tmp/page"
# Two workers, each running jobs of the three tenants' two kinds.
workers=$(awk '$1 == "trace" && $2 == "lane" && $4 >= 2 && $5 >= 1 &&
               $9 == "export,reindex" { n++ } END { print n + 0 }' "$tmp/page")
[ "$workers" -ge 2 ] || fail "worker lanes drawn: $workers"
[ "$(awk '$1 == "trace" && $2 == "lane" { n = split($8, v, ","); for (i = 1; i <= n; i++) if (v[i] != "-") t[v[i]] = 1 }
          END { for (k in t) print k }' "$tmp/page" | sort | tr '\n' ' ')" = 'acme globex initech ' ] ||
    fail "tenants on the lanes: $(grep '^trace lane' "$tmp/page")"
# The hovered span's labels, every one of them, in its tooltip.
hover=$(line 'trace hover')
labels=$(echo "$hover" | sed 's/^trace hover \([^|]*\) | .*/\1/')
case $labels in *tenant=*) ;; *) fail "hovered span without a tenant: $hover" ;; esac
tip=" | $(echo "$hover" | sed 's/^[^|]*| //') | "
for kv in $labels; do
    echo "$tip" | grep -qF " | $kv | " || fail "tooltip without $kv: $hover"
done
echo "$hover" | grep -q '| duration [0-9.]* [mµ]*s |' || fail "tooltip without a duration: $hover"
# And a job's span on a worker's lane, among a thousand others.
line 'trace job' | grep -q '^trace job kind=\(reindex\|export\) | tenant=[a-z]* | duration [0-9.]* [mµ]*s | on ' ||
    fail "a job's span: $(line 'trace job')"
# The window ran the CPU sampler: a sample's tooltip tells its stack.
if line 'trace other' | grep -q '^trace other [0-9]* true '; then
    line 'trace cpusample' | grep -q '^trace cpusample CPU sample | .*stack: |   [^ ]' ||
        fail "CPU sample: $(line 'trace cpusample')"
fi
check_zoom
# The demo runs no flight recorder: the button shows the server's word.
line 'trace flight' | grep -q '^trace flight error .*flight recorder is off' ||
    fail "flight recorder off: $(line 'trace flight')"
# ... a 404, which the browser logs.
no_console_errors '^console log Failed to load resource: .* 404 .*/debug/pprof/trace?flight=1&format=json'
[ "$(od -An -N4 -tx1 "$SHOTS/trace.png" | tr -d ' ')" = 89504e47 ] ||
    fail "no trace.png screenshot"
stop_demo
echo "browser_trace: ok"
