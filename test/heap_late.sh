#!/bin/sh
# heap_late.sh -- a process given cpprof by LD_PRELOAD without CPPROF_HTTP
# cannot serve, so it samples no allocation (heap.c): test/heap_late, a
# program that never links cpprof, allocates 16 MiB in allocate_before,
# then starts the server itself (cpprof_http_start through dlsym, as a
# plugin linked with cpprof would) and allocates 16 MiB in allocate_after.
#   - preloaded without CPPROF_HTTP: the heap profile (google/pprof's
#     parser, gocheck) holds samples in allocate_after and none in
#     allocate_before, and says why in a comment and once on stderr;
#   - with CPPROF_HTTP from load: samples in both, and no such comment;
#   - in a fork of a process that serves CPPROF_HTTP, which does not serve
#     itself (CPPROF_HTTP_FORKS=0) until it calls cpprof_http_start: as
#     preloaded without CPPROF_HTTP, the comment saying why (said on no
#     stderr: not a line for each of a server's workers).
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
PROGRAM=$top_builddir/test/heap_late

launch_late() {
    LD_PRELOAD=$PRELOAD "$PROGRAM" "127.0.0.1:$port" \
        >"$tmp/prog.out" 2>"$tmp/prog.err" &
}
launch_from_load() {
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port "$PROGRAM" - \
        >"$tmp/prog.out" 2>"$tmp/prog.err" &
}
launch_forked() {
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:0 CPPROF_HTTP_FORKS=0 \
        "$PROGRAM" -f "127.0.0.1:$port" >"$tmp/prog.out" 2>"$tmp/prog.err" &
}
serving() { grep -qs '^serving' "$tmp/prog.out" && answers_index; }

# samples_in FUNCTION: the heap profile's sampled objects allocated with
# FUNCTION in the stack.
samples_in() {
    "$GOCHECK" -chain "$1" "$tmp/heap.body" >"$tmp/chain" ||
        fail "gocheck -chain $1: $(cat "$tmp/chain")"
    awk '$1 == "chain" && $2 == "judged" { print $5 }' "$tmp/chain"
}

# heap_of WHO: fetches the heap profile, checked by google/pprof's parser.
heap_of() {
    code=$(fetch heap "$base/heap")
    [ "$code" = 200 ] || fail "$1: /heap answered $code: $(cat "$tmp/heap.body")"
    "$GOCHECK" "$tmp/heap.body" >/dev/null || fail "$1: pprof's parser rejects the heap profile"
    "$PPROF" -raw "$tmp/heap.body" >"$tmp/heap.raw" 2>"$tmp/pprof.err" ||
        fail "$1: pprof -raw: $(cat "$tmp/pprof.err")"
    before=$(samples_in allocate_before) after=$(samples_in allocate_after)
    echo "$1: sampled objects: allocate_before $before, allocate_after $after"
}
stop_program() {
    kill "$demo_pid" 2>/dev/null
    wait "$demo_pid" 2>/dev/null
    demo_pid=
}

serve_on_free_port heap_late "$tmp/prog.err" launch_late serving
heap_of "preloaded, serving late"
[ "$before" = 0 ] || fail "allocations before the server started were sampled: $before"
[ "$after" -gt 0 ] || fail "no allocation after the server started was sampled"
why='allocations before the server started ([0-9:]* UTC) are not in the profile: cpprof was preloaded without CPPROF_HTTP'
grep -q "^Comment: $why" "$tmp/heap.raw" ||
    fail "the heap profile does not say why it starts late: $(grep -i comment "$tmp/heap.raw")"
[ "$(grep -c "cpprof: heap profile partial: $why" "$tmp/prog.err")" = 1 ] ||
    fail "stderr does not say it once: $(cat "$tmp/prog.err")"
echo "ok: preloaded without CPPROF_HTTP, nothing was sampled until the server started, and the profile says so"
stop_program

serve_on_free_port heap_late "$tmp/prog.err" launch_from_load serving
heap_of "CPPROF_HTTP from load"
[ "$before" -gt 0 ] && [ "$after" -gt 0 ] ||
    fail "with CPPROF_HTTP from load, allocations were not sampled from the start"
grep -q "^Comment: allocations before the server started" "$tmp/heap.raw" &&
    fail "with CPPROF_HTTP from load, the profile says it started late"
echo "ok: with CPPROF_HTTP from load, allocations are sampled from the start"
stop_program

serve_on_free_port heap_late "$tmp/prog.err" launch_forked serving
heap_of "forked by a serving process"
[ "$before" = 0 ] || fail "a fork of a serving process sampled before it served: $before"
[ "$after" -gt 0 ] || fail "no allocation after the fork's server started was sampled"
why='allocations before the server started ([0-9:]* UTC) are not in the profile, but for those its parent sampled before the fork: this process was forked by a serving one'
grep -q "^Comment: $why" "$tmp/heap.raw" ||
    fail "the fork's heap profile does not say why it starts late: $(grep -i comment "$tmp/heap.raw")"
grep -q "heap profile partial" "$tmp/prog.err" &&
    fail "the fork said its late start on stderr: $(cat "$tmp/prog.err")"
echo "ok: a fork of a serving process sampled nothing until it served, and its profile says so"
