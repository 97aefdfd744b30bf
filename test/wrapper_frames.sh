#!/bin/sh
# wrapper_frames.sh -- cpprof's interposers never show as the program's
# frames.  test/wrapper_frames spends its time in pthread_mutex_lock/unlock,
# pthread_cond_wait, malloc and free, all of which cpprof interposes; its
# CPU, heap, allocs, block and mutex profiles (go tool pprof -traces, the
# pprof_internal samples left out) must hold no frame in cpprof's src/*.c or src/upper/*.c
# but the public cpprof_* functions a program calls, and the CPU profile
# must still show the program's time in libc's locks and malloc.  The
# same holds for the demo (examples/jobrunner), which also labels its work
# (cpprof_do) and so makes cpprof register its threads.
set -u
. "$(dirname "$0")/http_lib.sh"
PROGRAM=$top_builddir/test/wrapper_frames
command -v go >/dev/null || fail "go not found (Debian package golang-go)"

launch_program_zerocode() {
    CPPROF_HTTP=127.0.0.1:$port CPPROF_BLOCK_PROFILE_RATE=1000 \
        CPPROF_MUTEX_PROFILE_FRACTION=5 CPPROF_MEM_PROFILE_RATE=4096 \
        "$PROGRAM" >"$tmp/prog.out" 2>"$tmp/prog.err" &
}
serve_on_free_port wrapper_frames "$tmp/prog.err" launch_program_zerocode \
    answers_index

# check_profiles WHO: fetches the five profiles from $base and fails
# when any has cpprof's frames in the program's samples.
check_profiles() {
    code=$(fetch cpu "$base/profile?seconds=4")
    [ "$code" = 200 ] || fail "/profile answered $code: $(cat "$tmp/cpu.body")"
    names=cpu
    for name in heap allocs block mutex; do
        code=$(fetch "$name" "$base/$name")
        case $code in
        200) names="$names $name" ;;
        # Under ASan, whose malloc comes before cpprof's: declined, and why.
        501) grep -q '^no heap profile: ' "$tmp/$name.body" ||
                fail "/$name 501 without a reason: $(cat "$tmp/$name.body")"
            echo "ok: $1: $name declined: $(cat "$tmp/$name.body")" ;;
        *) fail "/$name answered $code: $(cat "$tmp/$name.body")" ;;
        esac
    done
    bad=0
    for name in $names; do
        frames=$(cpprof_frames "$name")
        if [ -n "$frames" ]; then
            echo "FAIL: $1: $name has samples with cpprof's frames:" >&2
            echo "$frames" | head -8 >&2
            bad=1
        else
            echo "ok: $1: $name: no cpprof frame in the program's samples"
        fi
    done
    [ "$bad" = 0 ] || exit 1
}

check_profiles wrapper_frames

# The interposed calls still show, as the libc functions the program
# called.
go tool pprof -top -nodecount=500 -nodefraction=0 -tagignore='pprof_internal=.' "$tmp/cpu.body" \
    >"$tmp/cpu.top" 2>"$tmp/pprof.err" || fail "pprof -top: $(cat "$tmp/pprof.err")"
for fn in 'pthread_mutex_(un)?lock' 'malloc' 'free'; do
    grep -Eq "$fn" "$tmp/cpu.top" ||
        fail "no $fn in the CPU profile: $(head -20 "$tmp/cpu.top")"
done
echo "ok: the program's time in libc's locks and allocator shows as libc's"

kill "$demo_pid" 2>/dev/null
wait "$demo_pid" 2>/dev/null
demo_pid=
# Every allocation sampled: cpprof's own on the demo's threads too.
CPPROF_BLOCK_PROFILE_RATE=1000 CPPROF_MUTEX_PROFILE_FRACTION=5 \
    CPPROF_MEM_PROFILE_RATE=1 start_demo --for 60
check_profiles jobrunner
