#!/bin/sh
# trace_pidns.sh -- traces of a program of more than 100 threads in a pid
# namespace, as in every container.  There tids number from 1, and an
# entry of /proc/self/task with a tid of four digits or fewer takes 24
# bytes, so one batch of the listing held up to 85 tids, while the trace
# snapshot listed them into 64 slots: the program died at its first trace,
# JSON trace or flight snapshot (50 threads: fine).  Here the demo, with
# 100 parked threads besides its workers and cpprof's, runs as pid 1 of a
# new pid namespace with its own /proc (`unshare -p -f --mount-proc`,
# which needs root or an unprivileged user namespace: SKIP, saying why,
# where it cannot), the flight recorder on.  A trace, a JSON trace, the
# flight recorder's snapshot and its JSON form must each answer 200, with
# a track for every one of the parked threads in the JSON forms,
# and the program must still serve after them.
set -u
. "$(dirname "$0")/http_lib.sh"

PARKED=100
command -v unshare >/dev/null || {
    echo "SKIP: no unshare (util-linux) to make a pid namespace"
    exit 77
}
if ! why=$(unshare -p -f --mount-proc --kill-child -- true 2>&1); then
    echo "SKIP: cannot make a pid namespace here: $why"
    exit 77
fi

# The demo as pid 1 of its namespace (killed with unshare, which the
# cleanup kills); --addr and the rest are the demo's, after "--".
cat >"$tmp/in_pidns" <<EOF
#!/bin/sh
exec unshare -p -f --mount-proc --kill-child -- "$JOBRUNNER" "\$@"
EOF
chmod +x "$tmp/in_pidns"
export CPPROF_TRACE_FLIGHT_SECONDS=2
# --for 120: the demo runs 10 s unless told, and a loaded run takes longer
# than that to get here (13 s seen in CI); the cleanup ends it.
start_program "$tmp/in_pidns" --workers 1 --rate 20 --park $PARKED --for 120

# The namespace's tids are short: what the test is about.
inner=$(awk '$1 == "NSpid:" { print $NF }' \
    "/proc/$(pgrep -P "$demo_pid" | head -1)/status")
[ -n "$inner" ] && [ "$inner" -lt 1000 ] ||
    fail "the demo is not in a pid namespace of short ids (its pid there: '$inner')"

# answered NAME QUERY: QUERY (a trace) answers 200 into $tmp/NAME.body.
answered() {
    code=$(fetch "$1" "$base/trace?$2")
    [ "$code" = 200 ] && return 0
    if ! kill -0 "$demo_pid" 2>/dev/null; then
        wait "$demo_pid"
        fail "trace?$2: the program died (status $?): $(cat "$tmp/demo.err")"
    fi
    fail "trace?$2: status $code: $(cat "$tmp/$1.body")"
}

# parked_tracks NAME: fails unless the JSON trace $tmp/NAME.body has a
# track for each parked thread: its threads keep the program's name.
parked_tracks() {
    n=$(python3 -c '
import json, sys
events = json.load(open(sys.argv[1]))
events = events.get("traceEvents", events) if isinstance(events, dict) else events
print(sum(1 for e in events if e.get("ph") == "M" and
          e.get("name") == "thread_name" and
          "jobrunner" in e.get("args", {}).get("name", "")))
' "$tmp/$1.body") || fail "$1: not JSON: $(head -c 300 "$tmp/$1.body")"
    [ "$n" -ge $PARKED ] ||
        fail "$1: $n tracks of the demo's threads, $PARKED parked ones at least wanted"
    echo "ok: $1 has $n tracks of the demo's threads"
}

answered trace "seconds=1"
answered json "seconds=1&format=json"
parked_tracks json
answered flight "flight=1"
answered flight_json "flight=1&format=json"
parked_tracks flight_json
code=$(fetch index "$base/")
kill -0 "$demo_pid" 2>/dev/null ||
    fail "the program died after the traces: $(cat "$tmp/demo.err")"
[ "$code" = 200 ] ||
    fail "the index answered $code after the traces: $(head -c 300 "$tmp/index.body"); stderr: $(cat "$tmp/demo.err")"
echo "trace_pidns: ok"
