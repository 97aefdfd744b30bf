#!/bin/sh
# wrappers.sh -- zero-code mode through a wrapper: the program the wrapper
# runs serves, not the wrapper, and the wrapper says once on stderr which
# pid does.  For each of timeout, sh -c 'a; b', setsid -f, env, nice,
# chrt, taskset, ionice and stdbuf running test/wrapped_prog:
#   - /debug/pprof/cmdline names the program, not the wrapper (before,
#     timeout and sh served themselves and setsid -f left nothing serving);
#   - the wrapper's one line names the program and a pid whose cmdline is
#     the program's (for sh, the first program, which has exited).
# Also: two programs a shell runs at once, where the one that cannot bind
# says so once, naming itself, and runs on; and a shell that runs no
# program says that nothing served.
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
PROG=$top_builddir/test/wrapped_prog
[ -x "$PROG" ] || fail "no $PROG"

failures=
# failed NAME WHY: records a failure and goes on with the next wrapper, so
# that one run shows every wrapper's outcome.
failed() {
    echo "FAIL: $1: $2" >&2
    failures="$failures $1"
}

# launch NAME CMD...: runs CMD preloaded, serving on a random port, in the
# background (stderr to $tmp/NAME.err); sets $port, $base, $launcher.
launch() {
    name=$1
    shift
    random_port
    base=http://127.0.0.1:$port/debug/pprof
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port "$@" \
        </dev/null >"$tmp/$name.out" 2>"$tmp/$name.err" &
    launcher=$!
}

# served_cmdline: /cmdline of whoever serves $base, arguments space-separated.
served_cmdline() {
    curl -s --max-time 2 "$base/cmdline" | tr '\0' ' '
}

# await_cmdline WANT...: waits up to 10 s until /cmdline is one of WANT;
# sets $got to the last answer.
await_cmdline() {
    got=
    for tick in $(seq 100); do
        got=$(served_cmdline)
        for want in "$@"; do
            [ "$got" = "$want" ] && return 0
        done
        sleep 0.1
    done
    return 1
}

# pid_cmdline PID: the cmdline of PID, arguments space-separated.
pid_cmdline() {
    tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | sed 's/ $//'
}

# stop_all: ends the launcher and every process named in pids (its
# programs), by pid.
stop_all() {
    for p in $pids $launcher; do
        kill "$p" 2>/dev/null
    done
    wait "$launcher" 2>/dev/null
    pids=
}

# check NAME CMD...: CMD is a wrapper running "$PROG 30 NAME"; that
# program serves, and the wrapper's one line names its pid.  A port taken
# by someone else is tried again on another.
check() {
    name=$1
    want="$PROG 30 $name"
    shift
    for attempt in 1 2 3; do
        launch "$name" "$@"
        pids=
        await_cmdline "$want" && break
        grep -q 'Address already in use' "$tmp/$name.err" || break
        stop_all
    done
    line=$(grep 'is a wrapper' "$tmp/$name.err")
    pids=$(echo "$line" | sed -n "s|.* which serve in its place: .*pid \\([0-9]*\\) ($PROG[;)].*|\\1|p")
    if [ "$got" != "$want" ]; then
        failed "$name" "/cmdline named [$got], not [$want]; stderr: $(cat "$tmp/$name.err")"
    elif [ "$(echo "$line" | grep -c .)" != 1 ] || [ -z "$pids" ]; then
        failed "$name" "not one line naming the pid that serves: $(cat "$tmp/$name.err")"
    elif [ -e "/proc/$pids" ] && [ "$(pid_cmdline "$pids")" != "$want" ]; then
        failed "$name" "the line names pid $pids, whose cmdline is [$(pid_cmdline "$pids")]: $line"
    else
        echo "ok: $name: $line"
    fi
    stop_all
}

check timeout timeout 60 "$PROG" 30 timeout
# The first program exits at once; the shell forks the second, which
# serves (the trailing command keeps the shell from exec'ing it).
check sh sh -c "$PROG 0 first; $PROG 30 sh; true"
check setsid setsid -f "$PROG" 30 setsid
check env env "$PROG" 30 env
check nice nice -n 1 "$PROG" 30 nice
check chrt chrt -o 0 "$PROG" 30 chrt
check taskset taskset -c 0 "$PROG" 30 taskset
check ionice ionice -c 2 -n 7 "$PROG" 30 ionice
check stdbuf stdbuf -oL "$PROG" 30 stdbuf

# --- Two programs at once -------------------------------------------------
# One serves; the other cannot bind the address, says so once naming its
# own pid, and runs on.
launch twice sh -c "$PROG 30 a & $PROG 30 b; wait"
pids=
if ! await_cmdline "$PROG 30 a" "$PROG 30 b"; then
    failed twice "/cmdline named [$got]; stderr: $(cat "$tmp/twice.err")"
else
    for tick in $(seq 100); do
        grep -q 'cannot serve' "$tmp/twice.err" && break
        sleep 0.1
    done
    refused=$(grep "cpprof: cannot serve CPPROF_HTTP=127.0.0.1:$port: .* (pid [0-9]*, wrapped_prog)\$" \
        "$tmp/twice.err")
    other=$(echo "$refused" | sed -n 's/.*(pid \([0-9]*\), wrapped_prog)$/\1/p')
    pids="$other $(cat "/proc/$launcher/task/$launcher/children" 2>/dev/null)"
    if [ "$(grep -c 'cannot serve' "$tmp/twice.err")" != 1 ] || [ -z "$other" ]; then
        failed twice "not one line from the program that cannot serve: $(cat "$tmp/twice.err")"
    elif [ "$(pid_cmdline "$other")" = "$got" ] || [ -z "$(pid_cmdline "$other")" ]; then
        failed twice "pid $other, which cannot serve, is not the other program running: $refused"
    else
        echo "ok: twice: [$got] serves; $refused"
    fi
fi
stop_all

# --- The libraries' isolation, declined where a sanitizer refuses it -------
# Under ASan's runtime, which kills a process that dlopens with
# RTLD_DEEPBIND, upper.c loads the server's libraries without it: stderr
# says so once, and the index's JSON too (libraries_unisolated); elsewhere
# neither says a word.
launch isolation "$PROG" 30 isolation
pids=
if ! await_cmdline "$PROG 30 isolation"; then
    failed isolation "never served; stderr: $(cat "$tmp/isolation.err")"
else
    said=$(curl -s --max-time 10 "$base/?format=json" | grep -c '"libraries_unisolated"')
    lines=$(grep -c 'refuses RTLD_DEEPBIND' "$tmp/isolation.err")
    case ${CPPROF_SANITIZER:-none} in
    asan) want="1 1" ;;
    *) want="0 0" ;;
    esac
    if [ "$said $lines" != "$want" ]; then
        failed isolation "the index said it $said times and stderr $lines (wanted $want: index, stderr)"
    else
        echo "ok: isolation: index and stderr said it $said and $lines times (${CPPROF_SANITIZER:-none})"
    fi
fi
stop_all

# --- A wrapper that runs no program ----------------------------------------
# (bash: dash ends with _exit, where nothing of the library's runs.)
launch none bash -c 'echo ran'
wait "$launcher"
grep -q "cpprof: bash (pid $launcher) is a wrapper and ran no program, so nothing served CPPROF_HTTP=127.0.0.1:$port\$" \
    "$tmp/none.err" || failed none "no line says nothing served: $(cat "$tmp/none.err")"

[ -z "$failures" ] || fail "wrappers:$failures"
echo "wrappers: ok"
