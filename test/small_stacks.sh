#!/bin/sh
# small_stacks.sh -- 128 KiB default thread stacks and a compressed debug
# file.  test/small_stacks sets glibc's default thread
# stack to 128 KiB and then starts the server, whose threads used to get
# that default; the symbolizer kept 64 KiB buffers on the stack (a
# 128 KiB frame to inflate a compressed debug file), which ran past the
# stack's guard page into another thread's stack, and the process died.
# Here the program's debug information is a separate file with zlib-
# compressed sections, found by .gnu_debuglink and its CRC (the program
# has no build id), so every symbolization of its code reads, checks and
# inflates that file (CPPROF_SYMBOLIZE_MAX_KB=0: no inflated copy kept
# from one profile to the next).  While the program runs, goroutine
# profiles (symbolized on the server's threads) must name its main with
# its source line (proof that the debug file was read); then the program
# builds a CPU profile of its own code on a thread with the 128 KiB
# default and checks that each of cpprof's threads has more stack than
# that default below its stack pointer (test/small_stacks.c).  No crash
# anywhere.
set -u
. "$(dirname "$0")/http_lib.sh"
for tool in objcopy readelf; do
    command -v $tool >/dev/null || fail "$tool is missing: apt-get install binutils"
done

# The program as the script runs it: its debug information moved out.
cp "$top_builddir/test/small_stacks" "$tmp/small_stacks"
objcopy --only-keep-debug --compress-debug-sections=zlib \
    "$tmp/small_stacks" "$tmp/small_stacks.dbg" &&
    objcopy --strip-debug --add-gnu-debuglink="$tmp/small_stacks.dbg" \
        "$tmp/small_stacks" || fail "objcopy cannot split the debug file"
readelf -S -W "$tmp/small_stacks.dbg" 2>/dev/null | grep -q '\.debug_info .* C ' ||
    fail "the debug file's .debug_info is not compressed"
readelf -n "$tmp/small_stacks" | grep -q 'Build ID' &&
    fail "the program has a build id: its debug file would not be CRC-checked"

# answered NAME URL: fails unless URL answers 200, saying how the program
# ended when it died.
answered() {
    code=$(fetch "$1" "$2")
    [ "$code" = 200 ] && return 0
    if ! kill -0 "$demo_pid" 2>/dev/null; then
        wait "$demo_pid"
        fail "$2: the program died with status $?: $(cat "$tmp/demo.out" "$tmp/demo.err")"
    fi
    fail "$2: status $code: $(cat "$tmp/demo.err")"
}

export CPPROF_SYMBOLIZE_MAX_KB=0
start_program "$tmp/small_stacks" "$tmp/stop"
for round in 1 2 3; do
    answered text$round "$base/goroutine?debug=1"
    grep -Eq '	main\+0x[0-9a-f]+	.*small_stacks\.c:[0-9]+$' "$tmp/text$round.body" ||
        fail "goroutine?debug=1 does not name main at its line: $(cat "$tmp/text$round.body")"
    answered proto$round "$base/goroutine"
done
touch "$tmp/stop"
for tick in $(seq 600); do
    kill -0 "$demo_pid" 2>/dev/null || break
    sleep 0.1
done
kill -0 "$demo_pid" 2>/dev/null && fail "small_stacks did not end when told to"
wait "$demo_pid"
status=$?
demo_pid=
cat "$tmp/demo.out"
[ "$status" = 0 ] ||
    fail "small_stacks exited with status $status: $(cat "$tmp/demo.out" "$tmp/demo.err")"
# The program's own threads keep its default: the measure tells them apart.
awk '$1 == "stack" && $3 == "program" && $2 == "neighbour" && $4 >= 128 { bad = 1 }
     END { exit bad }' "$tmp/demo.out" ||
    fail "a neighbour thread has more than the 128 KiB default: $(cat "$tmp/demo.out")"
echo "small_stacks: ok"
