#!/bin/sh
# trace_demo.sh -- /debug/pprof/trace of the demo, read by clients that are
# not cpprof: protoc decodes the Perfetto trace with the vendored
# perfetto_trace.proto, Python's json module reads the JSON form, and
# trace_check.py holds both to the demo's own log of its jobs (one track
# per thread, each tenant's label-span time within 5% of its jobs' time,
# every CPU sample inside a span of its labels).  Then Go's answers: a
# second trace at once, bad parameters, the flight recorder when off; a
# client leaving mid-trace; the demo's exit status (under ASan: its leaks);
# then the flight recorder on, answered at once.
set -u
. "$(dirname "$0")/http_lib.sh"
: "${srcdir:=.}"

command -v protoc >/dev/null ||
    fail "protoc not found (Debian package protobuf-compiler)"
proto_dir=$srcdir/src/upper

start_demo --workers 4 --rate 1000 --for 120 --job-log "$tmp/jobs.log"

# The demo's threads alive before and after a trace: each needs a track.
threads_now() { ls "/proc/$demo_pid/task" | sort; }

# trace NAME QUERY: a 2 s trace into $tmp/NAME.body, and the threads alive
# throughout it into $tmp/NAME.tids.
trace() {
    threads_now >"$tmp/$1.before"
    code=$(fetch "$1" "$base/trace?seconds=2$2")
    [ "$code" = 200 ] || fail "trace$2: status $code: $(cat "$tmp/$1.body")"
    threads_now >"$tmp/$1.after"
    comm -12 "$tmp/$1.before" "$tmp/$1.after" >"$tmp/$1.tids"
}

# --- The Perfetto form, as Go serves its trace -------------------------------
trace proto ""
[ "$(header proto content-type)" = application/octet-stream ] ||
    fail "content-type: $(cat "$tmp/proto.hdr")"
[ "$(header proto content-disposition)" = 'attachment; filename="trace"' ] ||
    fail "content-disposition: $(cat "$tmp/proto.hdr")"
protoc --decode=perfetto.protos.Trace -I "$proto_dir" \
    "$proto_dir/perfetto_trace.proto" <"$tmp/proto.body" \
    >"$tmp/proto.txt" 2>"$tmp/protoc.err" ||
    fail "protoc cannot decode the trace: $(cat "$tmp/protoc.err")"
python3 "$srcdir/test/trace_check.py" perfetto "$tmp/proto.txt" \
    "$tmp/jobs.log" "$tmp/proto.tids" || fail "the Perfetto trace"

# --- The JSON form -----------------------------------------------------------
trace json "&format=json"
python3 "$srcdir/test/trace_check.py" json "$tmp/json.body" \
    "$tmp/jobs.log" "$tmp/json.tids" || fail "the JSON trace"

# --- Go's answers ------------------------------------------------------------
# A second trace while one runs: the first is given half a second to
# open its window; should the second come first instead (a loaded machine),
# both end and the pair is tried again, 5 times at most.
busy=
for try in 1 2 3 4 5; do
    curl -s -o "$tmp/first.body" "$base/trace?seconds=3" &
    first=$!
    sleep 0.5
    code=$(fetch second "$base/trace?seconds=0.1")
    wait "$first"
    if [ "$code" = 500 ]; then
        busy=1
        break
    fi
done
[ -n "$busy" ] || fail "a second trace at once was never refused"
grep -qx "Could not enable tracing: tracing is already enabled" \
    "$tmp/second.body" || fail "second trace: $(cat "$tmp/second.body")"

for q in seconds=abc seconds=0 seconds=-1 seconds=100000 seconds=nan \
    format=xml; do
    code=$(fetch bad "$base/trace?$q")
    [ "$code" = 400 ] || fail "trace?$q: status $code, want 400"
    grep -q '^invalid value for' "$tmp/bad.body" ||
        fail "trace?$q: $(cat "$tmp/bad.body")"
done
code=$(fetch flight "$base/trace?flight=1")
[ "$code" = 404 ] || fail "flight=1 with the recorder off: status $code"
grep -q "flight recorder is off" "$tmp/flight.body" ||
    fail "flight=1: $(cat "$tmp/flight.body")"

# --- A client that leaves mid-trace: the window ends, nothing is built -----
# (the ASan build's leak check at the demo's exit sees what it held).
curl -s -o /dev/null --max-time 0.5 "$base/trace?seconds=3"
code=$(fetch after "$base/trace?seconds=0.2")
[ "$code" = 200 ] || fail "a trace after a client left: status $code"

# --- The index lists it, as Go's does ----------------------------------------
code=$(fetch index "$base/")
grep -q 'href="trace' "$tmp/index.body" || fail "the index lists no trace"
stop_demo

# --- The flight recorder over HTTP: at once, the last seconds ---------------
export CPPROF_TRACE_FLIGHT_SECONDS=2
start_demo --workers 1 --for 120
unset CPPROF_TRACE_FLIGHT_SECONDS
code=$(fetch flight "$base/trace?flight=1")
[ "$code" = 200 ] || fail "flight=1: status $code: $(cat "$tmp/flight.body")"
protoc --decode=perfetto.protos.Trace -I "$proto_dir" \
    "$proto_dir/perfetto_trace.proto" <"$tmp/flight.body" \
    >"$tmp/flight.txt" 2>"$tmp/protoc.err" ||
    fail "protoc cannot decode the flight recording: $(cat "$tmp/protoc.err")"
for tenant in acme globex initech; do
    grep -q "tenant=$tenant" "$tmp/flight.txt" ||
        fail "the flight recording has no span of tenant $tenant"
done
code=$(fetch flightjson "$base/trace?flight=1&format=json")
[ "$code" = 200 ] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))' \
    "$tmp/flightjson.body" || fail "flight=1&format=json: status $code"
stop_demo
echo "ok: trace_demo"
