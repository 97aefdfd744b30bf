#!/bin/sh
# setuid_env.sh -- a setuid-root program linked with cpprof (never calling
# it) run by another user must not take CPPROF_* from that user:
# CPPROF_HTTP would otherwise start the server at load and show
# nobody the stacks, command line and memory map of a root process.
#   - control: the same program, not setuid, run as nobody, serves from
#     CPPROF_HTTP (so the user, the library's path and the check work);
#   - a setuid-root copy run as nobody (AT_SECURE) with CPPROF_HTTP and
#     CPPROF_CPU_HZ: nothing answers on the port, and stderr has exactly
#     one line, saying the variables were ignored and why;
#   - that copy may still start the server through the API;
#   - the same for a copy with a file capability (setcap), when setcap is
#     installed.
# Needs root (to make the copies and switch users) and a filesystem not
# mounted nosuid; skips (77) saying why otherwise.
set -u
. "$(dirname "$0")/http_lib.sh"

skip() {
    echo "SKIP: $*"
    exit 77
}

[ "$(id -u)" = 0 ] || skip "not root: cannot make a setuid-root copy or switch users"
command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
id nobody >/dev/null 2>&1 || skip "there is no user nobody"
nobody_group=$(id -gn nobody)
as_nobody() {
    setpriv --reuid=nobody --regid="$nobody_group" --clear-groups "$@"
}

prog=$top_builddir/test/setuid_prog
# The copies' directory: on a filesystem that honours the setuid bit, and
# one nobody can enter.
copies=
for dir in "${TMPDIR:-/tmp}" /var/tmp "$top_builddir/test"; do
    [ -d "$dir" ] || continue
    if findmnt -n -o OPTIONS -T "$dir" | tr , '\n' | grep -qx nosuid; then
        echo "note: $dir is mounted nosuid"
        continue
    fi
    copies=$(mktemp -d "$dir/cpprof-setuid.XXXXXX") || continue
    chmod 755 "$copies"
    break
done
[ -n "$copies" ] || skip "every candidate directory is mounted nosuid"

run_pid=
stop_run() {
    exec 3>&-
    if [ -n "$run_pid" ]; then
        wait "$run_pid" 2>/dev/null
        run_pid=
    fi
}
trap 'stop_run; rm -rf "$copies"; cleanup' EXIT

# pick_port: a random loopback port nothing answers on, in $port and $url.
pick_port() {
    for attempt in 1 2 3 4 5 6 7 8; do
        random_port
        url=http://127.0.0.1:$port/debug/pprof/
        curl -s -o /dev/null --max-time 2 "$url" || return 0
    done
    fail "no free port found"
}

# launch NAME PROGRAM [ARGS...]: runs PROGRAM as nobody with CPPROF_HTTP on
# $port, its stdin a fifo held open on descriptor 3 (stop_run closes it),
# and waits (at most 10 s) for its "ready" line (and for "serving" too
# when asked to serve); output in $tmp/NAME.out and $tmp/NAME.err.
launch() {
    name=$1
    shift
    rm -f "$tmp/in"
    mkfifo "$tmp/in"
    : >"$tmp/$name.out"
    CPPROF_HTTP=127.0.0.1:$port CPPROF_CPU_HZ=50 as_nobody "$@" \
        <"$tmp/in" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    run_pid=$!
    exec 3>"$tmp/in"
    want=ready
    case "$*" in *--serve*) want=serving ;; esac
    for tick in $(seq 100); do
        grep -q "^$want" "$tmp/$name.out" && return 0
        kill -0 "$run_pid" 2>/dev/null || break
        sleep 0.1
    done
    # A sanitizer's runtime may refuse a setuid or setcap process (TSan
    # re-executes itself without ASLR, which the kernel does not allow
    # across a setuid exec): nothing of cpprof's to judge then.
    if [ -n "${CPPROF_SANITIZER:-}" ] && ! kill -0 "$run_pid" 2>/dev/null; then
        echo "SKIP: under $CPPROF_SANITIZER, $name did not start: $(head -c 300 "$tmp/$name.err")"
        exit 77
    fi
    fail "$name never said $want: $(cat "$tmp/$name.out" "$tmp/$name.err")"
}

# expect_secure NAME: the run was AT_SECURE, as nobody.
expect_secure() {
    grep -q "^ready at_secure=1 ruid=$(id -u nobody) " "$tmp/$1.out" ||
        fail "$1 did not run AT_SECURE as nobody: $(cat "$tmp/$1.out")"
}

# expect_refused NAME: nothing served CPPROF_HTTP, stderr is one line
# saying the variables were ignored.
expect_refused() {
    code=$(curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$url")
    [ "$code" = 000 ] ||
        fail "$1 served CPPROF_HTTP from nobody's environment (status $code)"
    lines=$(wc -l <"$tmp/$1.err")
    [ "$lines" = 1 ] ||
        fail "$1: $lines lines on stderr, want 1: $(cat "$tmp/$1.err")"
    grep -q '^cpprof: ignoring CPPROF_CPU_HZ, CPPROF_HTTP: .*AT_SECURE' \
        "$tmp/$1.err" ||
        fail "$1: stderr does not say the variables were ignored: $(cat "$tmp/$1.err")"
    echo "ok: $1: nothing served; stderr: $(cat "$tmp/$1.err")"
}

# Control: not setuid, so the environment is nobody's own to use.
cp "$prog" "$copies/plain"
chmod 755 "$copies/plain"
pick_port
launch plain "$copies/plain"
grep -q "^ready at_secure=0 ruid=$(id -u nobody) euid=$(id -u nobody)" "$tmp/plain.out" ||
    fail "the control did not run as nobody: $(cat "$tmp/plain.out")"
code=$(curl -s -o /dev/null --max-time 10 -w '%{http_code}' "$url")
[ "$code" = 200 ] ||
    fail "control: CPPROF_HTTP did not serve a plain program run as nobody (status $code): $(cat "$tmp/plain.err")"
stop_run
echo "ok: control: a plain program run as nobody serves CPPROF_HTTP"

cp "$prog" "$copies/setuid"
chown root:root "$copies/setuid"
chmod 4755 "$copies/setuid"
pick_port
launch setuid "$copies/setuid"
expect_secure setuid
expect_refused setuid
stop_run

# The program may still serve through the API.
pick_port
launch setuid_api "$copies/setuid" --serve "127.0.0.1:$port"
code=$(curl -s -o /dev/null --max-time 10 -w '%{http_code}' "$url")
[ "$code" = 200 ] ||
    fail "the setuid program could not serve through the API (status $code): $(cat "$tmp/setuid_api.err")"
stop_run
echo "ok: the setuid program serves when it calls cpprof_http_start"

if ! command -v setcap >/dev/null; then
    echo "note: the capabilities case is skipped: setcap (libcap2-bin) is not installed"
    exit 0
fi
cp "$prog" "$copies/caps"
chmod 755 "$copies/caps"
if ! setcap cap_net_bind_service+ep "$copies/caps" 2>"$tmp/setcap.err"; then
    echo "note: the capabilities case is skipped: setcap failed on $copies: $(cat "$tmp/setcap.err")"
    exit 0
fi
pick_port
launch caps "$copies/caps"
expect_secure caps
expect_refused caps
stop_run
echo "setuid_env: ok"
