#!/bin/sh
# trace_flight.sh -- the flight recorder holds the last N seconds: a
# program that logs marks of known times (trace_flight.c) writes the
# recorder's snapshot with cpprof_trace_flight_write; protoc decodes it
# with the vendored perfetto_trace.proto and trace_check.py compares the
# marks.  Without CPPROF_TRACE_FLIGHT_SECONDS the call says the recorder
# is off.
set -u
: "${top_builddir:=.}" "${srcdir:=.}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-flight.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v protoc >/dev/null ||
    fail "protoc not found (Debian package protobuf-compiler)"
prog=$top_builddir/test/trace_flight

CPPROF_TRACE_FLIGHT_SECONDS=2 "$prog" "$tmp/flight.pftrace" \
    >"$tmp/marks" 2>"$tmp/err" || fail "trace_flight: $(cat "$tmp/err")"
protoc --decode=perfetto.protos.Trace -I "$srcdir/src/upper" \
    "$srcdir/src/upper/perfetto_trace.proto" <"$tmp/flight.pftrace" \
    >"$tmp/flight.txt" 2>"$tmp/protoc.err" ||
    fail "protoc cannot decode the snapshot: $(cat "$tmp/protoc.err")"
python3 "$srcdir/test/trace_check.py" flight "$tmp/flight.txt" \
    "$tmp/marks" 2 || fail "the flight recorder's snapshot"

env -u CPPROF_TRACE_FLIGHT_SECONDS "$prog" "$tmp/off.pftrace" \
    >/dev/null 2>"$tmp/off.err" && fail "a snapshot with the recorder off"
grep -q "flight recorder is off" "$tmp/off.err" ||
    fail "recorder off: $(cat "$tmp/off.err")"
echo "ok: trace_flight"
