#!/bin/sh
# own_threads.sh -- cpprof's own threads in a CPU profile.
# SLOW: about OWN_THREADS_SECONDS + 5 s (default 30 + 5).
#
# The demo runs two workers while a scraper fetches one endpoint a second
# (goroutine, allocs, heap, the index, metrics in turn) and a CPU profile
# of OWN_THREADS_SECONDS is taken over HTTP.  go tool pprof -traces reads
# it.  A sample is cpprof's when its stack holds a frame that only
# cpprof's threads run: the sampler's collector (collector_main), the
# server's window and watch threads (window_thread, watch_fds), the
# census's helpers (crew_helper_main: a census of 128 threads or more), or
# libmicrohttpd (MHD_* or its bare addresses, whose threads are all the
# server's; the demo never calls it).  Asserted:
#   - every such sample carries pprof_internal=sampler, =http or =census,
#     so that -tagignore removes it;
#   - none with pprof_internal=sampler lacks collector_main (the label
#     names only the collector).
# Printed: cpprof's threads' share of the profile's samples, every sample
# labelled pprof_internal (the goal: at most 0.3%; a figure under
# the machine's load, not asserted).
set -u
. "$(dirname "$0")/http_lib.sh"
seconds=${OWN_THREADS_SECONDS:-30}

start_demo --workers 1 --park 3 --for $((seconds + 60))
deadline=$(($(date +%s) + seconds + 2))
(
    while [ "$(date +%s)" -lt "$deadline" ]; do
        for path in 'goroutine?debug=1' allocs heap '' ../../metrics; do
            curl -s -o /dev/null --max-time 10 "$base/$path"
            sleep 1
        done
    done
) &
scraper=$!
code=$(fetch cpu "$base/profile?seconds=$seconds" --max-time $((seconds + 30)))
kill "$scraper" 2>/dev/null
wait "$scraper" 2>/dev/null
[ "$code" = 200 ] || fail "profile: status $code: $(head -c 300 "$tmp/cpu.body")"
go tool pprof -traces "$tmp/cpu.body" >"$tmp/traces" 2>"$tmp/traces.err" ||
    fail "go tool pprof -traces: $(cat "$tmp/traces.err")"

# One line per sample: "VALUE<TAB>LABELS<TAB>FRAMES" (labels as "key=value ",
# frames joined by ";", leaf first), from -traces' blocks: "key:  value"
# lines, then the value with the leaf frame, then one frame a line; a line
# of dashes between samples.
awk '
function flush() { if (v != "") print v "\t" l "\t" f; v = ""; l = ""; f = "" }
/^-+\+-+$/ { flush(); inblock = 1; next }
!inblock { next }
v == "" && /^ *[^ ]+:  / { k = $1; sub(/:$/, "", k); l = l k "=" $2 " "; next }
v == "" && /^ +[0-9.]+[a-z]* +[^ ]/ { v = $1; f = $2 ";"; next }
v != "" && /^ +[^ ]/ { f = f $1 ";"; next }
END { flush() }
' "$tmp/traces" >"$tmp/samples"
[ -s "$tmp/samples" ] || fail "no samples in -traces output: $(head -20 "$tmp/traces")"

ours='(^|;)(collector_main|window_thread|watch_fds|crew_helper_main|MHD_[A-Za-z_]*|libmicrohttpd[^;]*);'
# ms VALUE: a -traces value (1.69s, 10ms, 500us) in milliseconds.
ms() {
    awk -F '\t' '
    { v = $1; u = v; sub(/^[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
      f = 1; if (u == "s") f = 1000; if (u == "us") f = 0.001; if (u == "ns") f = 1e-6
      if (u == "m") f = 60000; if (u == "h") f = 3600000
      t += v * f }
    END { printf "%.0f", t }'
}
share() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f%%", 100 * a / b }'; }
total=$(ms <"$tmp/samples")
[ "$total" -gt 0 ] || fail "no CPU time read from -traces: $(head -20 "$tmp/traces")"
# The share counts every sample labelled as cpprof's: a stack of one of
# its threads need not hold one of the frames above (a walk cut short),
# but its label is the thread's.
own=$(grep -E 'pprof_internal=(sampler|http|census) ' "$tmp/samples" | ms)
sampler=$(grep -E 'pprof_internal=sampler ' "$tmp/samples" | ms)
http=$(grep -E 'pprof_internal=http ' "$tmp/samples" | ms)
census=$(grep -E 'pprof_internal=census ' "$tmp/samples" | ms)
unlabelled=$(grep -E "	[^	]*	.*$ours" "$tmp/samples" |
    grep -vcE '	[^	]*pprof_internal=(sampler|http|census) ')
misnamed=$(grep -E 'pprof_internal=sampler ' "$tmp/samples" |
    grep -vc 'collector_main')
echo "CPU in profile: ${total} ms; on cpprof's threads: ${own} ms" \
     "($(share "$own" "$total"), goal at most 0.3%): sampler ${sampler} ms" \
     "($(share "$sampler" "$total")), http ${http} ms ($(share "$http" "$total")), census" \
     "${census} ms ($(share "$census" "$total"));" \
     "samples of cpprof's threads without pprof_internal: $unlabelled"
[ "$unlabelled" = 0 ] || {
    grep -E "	[^	]*	.*$ours" "$tmp/samples" |
        grep -vE 'pprof_internal=(sampler|http|census) ' | head -5 >&2
    fail "$unlabelled of cpprof's threads' samples carry no pprof_internal label"
}
[ "$misnamed" = 0 ] || {
    grep -E 'pprof_internal=sampler ' "$tmp/samples" | grep -v collector_main |
        head -5 >&2
    fail "$misnamed pprof_internal=sampler samples not in collector_main"
}
go tool pprof -tagignore 'pprof_internal=sampler|http|census' -traces "$tmp/cpu.body" 2>/dev/null |
    grep -qE "(collector_main|window_thread|watch_fds|crew_helper_main|MHD_|libmicrohttpd)" &&
    fail "-tagignore pprof_internal left cpprof's frames in the profile"
echo "ok: every sample of cpprof's threads is labelled pprof_internal; -tagignore removes them"
