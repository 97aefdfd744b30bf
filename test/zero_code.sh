#!/bin/sh
# zero_code.sh -- zero-code mode: LD_PRELOAD=libcpprof.so CPPROF_HTTP=ADDR
# serves /debug/pprof/ from programs that never heard of cpprof:
#   - test/zero_code_prog (built without cpprof): CPU, goroutine, heap,
#     allocs, block, mutex and threadcreate profiles, each accepted by
#     google/pprof's parser (gocheck), the CPU one naming its hot function;
#   - Debian's gzip compressing a stream of 8 MiB random chunks: a CPU
#     profile of gzip itself, and gzip's output still right;
#   - Debian's xz -T2 -9, whose two workers block every signal: the CPU
#     profile and the index say those 2 threads and their CPU time went
#     unsampled;
#   - a bad CPPROF_HTTP is reported once on stderr and the program runs on,
#     also when stderr is a pipe nobody reads any more (no SIGPIPE);
#   - a refused CPPROF_HTTP_TOKEN (a trailing \r) keeps the server from
#     starting, says so on stderr without showing the token, and the
#     program runs on;
#   - a bad TLS file (missing, key not matching the certificate, an empty
#     CA file) is named on stderr with its setting and the reason, once,
#     and the program runs on without a server;
#   - the token and CPPROF_HTTP are not in the environment of the
#     program's children, bash's (whose own unsetenv cpprof must not use)
#     as well as sh's;
#   - a wrapper script (sh or bash) that execs the program: the program
#     serves (/cmdline names it);
#   - a daemon that closes every inherited descriptor and then appends and
#     reads back a file 1,000 times loses no read-back, and the server,
#     having lost its socket, stops and says so on stderr.
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
PROG=$top_builddir/test/zero_code_prog
# ASan's malloc comes before cpprof's: the heap profiles are declined,
# and a 501 that says why is the right answer (as in scrape.sh).
[ "${CPPROF_SANITIZER:-none}" != asan ] || heap_declined=1

# serve_preloaded CMD...: runs CMD with the library preloaded serving on a
# free port (in the background, stdin from $PROG_IN or /dev/null, stdout to
# $PROG_OUT or $tmp/prog.out), waits until the
# index answers, and sets $port, $base, $demo_pid (killed at exit).
serve_preloaded() {
    preloaded=$*
    serve_on_free_port "preloaded $*" "$tmp/prog.err" launch_preloaded \
        answers_index
}
launch_preloaded() {
    [ -z "${FEED:-}" ] || start_feeder
    # shellcheck disable=SC2086 # the command is words, as given
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port $preloaded \
        <"${PROG_IN:-/dev/null}" >"${PROG_OUT:-$tmp/prog.out}" \
        2>"$tmp/prog.err" &
}

# start_feeder: with FEED set, each launch reads a fifo of its own that a
# loop writes $tmp/chunk into until $tmp/stop exists: a program that a
# retry on another port killed took part of the last one's stream, and
# the output would not start with the input.
start_feeder() {
    feeds=$((${feeds:-0} + 1))
    PROG_IN=$tmp/stream.$feeds
    mkfifo "$PROG_IN"
    (while [ ! -e "$tmp/stop" ]; do cat "$tmp/chunk" || break; done) \
        >"$PROG_IN" &
    feeder=$!
}

# check_profile NAME [GOCHECK ARGS]: fetches NAME (a path with its query)
# into $tmp/NAME.pb and has gocheck parse it into $tmp/NAME.check.
check_profile() {
    name=$1
    shift
    file=$tmp/$(echo "$name" | tr -c 'a-z0-9\n' _)
    code=$(curl -s -o "$file.pb" -w '%{http_code}' --max-time 30 "$base/$name")
    [ "$code" = 200 ] || fail "$name: status $code: $(head -c 200 "$file.pb")"
    "$GOCHECK" "$@" "$file.pb" >"$file.check" ||
        fail "$name: google/pprof rejects the profile"
}

# --- A program built without cpprof -----------------------------------------
CPPROF_BLOCK_PROFILE_RATE=1 CPPROF_MUTEX_PROFILE_FRACTION=1 \
    serve_preloaded "$PROG" 60
check_profile 'profile?seconds=2' -frames
grep -q '^frame zero_code_burn .*zero_code_prog.c:' "$tmp/profile_seconds_2.check" ||
    fail "CPU profile: no zero_code_burn frame: $(cat "$tmp/profile_seconds_2.check")"
# declined NAME: under ASan, NAME (heap or allocs) answers 501 saying why.
declined() {
    code=$(curl -s -o "$tmp/$1.txt" -w '%{http_code}' --max-time 30 "$base/$1")
    [ "$code" = 501 ] && grep -q '^no heap profile: ' "$tmp/$1.txt" ||
        fail "$1 under ASan: status $code: $(head -c 200 "$tmp/$1.txt")"
}
heap_profiles="heap allocs"
[ -z "${heap_declined:-}" ] || { declined heap; declined allocs; heap_profiles=; }
for p in goroutine $heap_profiles block mutex threadcreate; do
    check_profile $p
done
# Its three threads (main and two workers) plus the server's.
[ "$(awk '$1 == "total" && $2 == 0 { print $3 }' "$tmp/goroutine.check")" -ge 3 ] ||
    fail "goroutine: $(cat "$tmp/goroutine.check")"
[ "$(awk '$1 == "total" && $2 == 0 { print $3 }' "$tmp/threadcreate.check")" -ge 2 ] ||
    fail "threadcreate: $(cat "$tmp/threadcreate.check")"
# The workers allocate and contend all the time.
for p in ${heap_profiles:+allocs} mutex block; do
    [ "$(awk '$1 == "samples" { print $2 }' "$tmp/$p.check")" -ge 1 ] ||
        fail "$p: no samples: $(cat "$tmp/$p.check")"
done
kill "$demo_pid"
wait "$demo_pid" 2>/dev/null
demo_pid=

# --- Debian's gzip ------------------------------------------------------------
# gzip reads a stream we end when the profile is in, so it is busy for the
# whole window however fast the machine.
head -c 8388608 /dev/urandom >"$tmp/chunk"
FEED=1 PROG_OUT=$tmp/out.gz serve_preloaded gzip -6
check_profile 'profile?seconds=2' -mappings
grep -q '^mapping /usr/bin/gzip ' "$tmp/profile_seconds_2.check" ||
    fail "gzip: no gzip mapping: $(cat "$tmp/profile_seconds_2.check")"
[ "$(awk '$1 == "samples" { print $2 }' "$tmp/profile_seconds_2.check")" -ge 10 ] ||
    fail "gzip: few samples: $(cat "$tmp/profile_seconds_2.check")"
check_profile goroutine
touch "$tmp/stop"
wait "$feeder"
wait "$demo_pid" || fail "gzip exited with status $?"
demo_pid=
gzip -t "$tmp/out.gz" || fail "gzip's output is corrupt"
gunzip -c "$tmp/out.gz" | head -c 8388608 | cmp -s - "$tmp/chunk" ||
    fail "gzip's output does not start with the input"

# --- Debian's xz, whose workers block every signal ------------------------------
# The same endless stream, in 4 MiB blocks so that both workers have one.
if command -v xz >/dev/null; then
    rm -f "$tmp/stop"
    FEED=1 serve_preloaded xz -T2 -9 --block-size=4MiB -c
    # xz's CPU time in clock ticks (utime + stime), around the profile.
    cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$demo_pid/stat"; }
    before=$(cpu_ticks) start=$(date +%s.%N)
    check_profile 'profile?seconds=2' -frames
    after=$(cpu_ticks) end=$(date +%s.%N)
    elapsed=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    grep -q '^frame "cpprof.unsampled.signalBlocked (2 threads)" ' \
        "$tmp/profile_seconds_2.check" ||
        fail "xz: no unsampled frame: $(cat "$tmp/profile_seconds_2.check")"
    curl -s --max-time 10 "$base/?format=json" | tr -d ' \n' >"$tmp/index.json"
    unsampled=$(sed -n 's/.*"frame":"cpprof.unsampled.signalBlocked","reason":"theyblocktheprofilingsignal","threads":2,"cpu_seconds":\([0-9.e-]*\).*/\1/p' "$tmp/index.json")
    [ -n "$unsampled" ] ||
        fail "xz: the index does not show 2 unsampled threads: $(cat "$tmp/index.json")"
    # The workers do nearly all of xz's work: most of its CPU time in the
    # 2 s window went unsampled, whatever the machine's load.  xz's CPU rate
    # is read around the whole request, which also builds the profile (a
    # sanitized build takes seconds more): the window's share is that rate
    # times its 2 s.
    awk -v u="$unsampled" -v d="$((after - before))" -v hz="$(getconf CLK_TCK)" \
        -v e="$elapsed" \
        'BEGIN { exit !(d > 0 && e >= 2 && u >= 0.5 * (d / hz) * 2 / e) }' ||
        fail "xz: $unsampled s unsampled of $((after - before)) ticks of CPU in $elapsed s"
    echo "ok: xz: $unsampled s unsampled; $((after - before)) ticks of CPU in $elapsed s around the 2 s window"
    touch "$tmp/stop"
    wait "$feeder"
    wait "$demo_pid"
    demo_pid=
fi

# --- A bad CPPROF_HTTP --------------------------------------------------------
# (/bin/echo, not a shell, which is a wrapper that leaves CPPROF_HTTP to
# the programs it runs; see test/wrappers.sh.)
LD_PRELOAD=$PRELOAD CPPROF_HTTP=nonsense /bin/echo ran >"$tmp/bad.out" \
    2>"$tmp/bad.err" || fail "bad CPPROF_HTTP: the program failed"
[ "$(cat "$tmp/bad.out")" = ran ] || fail "bad CPPROF_HTTP: the program did not run"
[ "$(grep -c 'CPPROF_HTTP="nonsense" is not valid' "$tmp/bad.err")" = 1 ] ||
    fail "bad CPPROF_HTTP not reported once: $(cat "$tmp/bad.err")"

# --- The same, with stderr a pipe whose reader is gone -------------------------
# cpprof's line must not raise SIGPIPE in a program that never writes to
# stderr itself (it ended such a program with status -13 before src/warn.c).
status=$(python3 - "$PRELOAD" <<'EOF'
import os, subprocess, sys
r, w = os.pipe()
os.close(r)
env = dict(os.environ, LD_PRELOAD=sys.argv[1], CPPROF_HTTP="nonsense")
print(subprocess.run(["/bin/echo", "ran"], stderr=w, env=env,
                     stdout=subprocess.DEVNULL).returncode)
EOF
)
[ "$status" = 0 ] ||
    fail "bad CPPROF_HTTP with stderr a closed pipe: the program ended with status $status"

# --- A refused token: no server, and said why ---------------------------------
secret=leak-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
random_port
cr=$(printf '\r')
LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port CPPROF_HTTP_TOKEN="$secret$cr" \
    sh -c 'if curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$1/debug/pprof/";
           then echo served; else echo closed; fi' sh "$port" \
    >"$tmp/cr.out" 2>"$tmp/cr.err" || fail "refused token: the program failed"
[ "$(cat "$tmp/cr.out")" = closed ] ||
    fail "refused token: the server answered: $(cat "$tmp/cr.err")"
grep -q 'CPPROF_HTTP_TOKEN was refused' "$tmp/cr.err" ||
    fail "refused token: stderr does not say why: $(cat "$tmp/cr.err")"
grep -qF "$secret" "$tmp/cr.err" && fail "refused token: stderr shows it"

# --- Bad TLS files: said once, and the program runs on --------------------------
make_pki "$tmp/pki"
: >"$pki/empty.pem"
# tls_refused WANT VAR=VALUE: a program with the library preloaded and VAR
# spoiling otherwise good TLS settings runs, and stderr says WANT once.
tls_refused() {
    want=$1
    random_port
    env CPPROF_HTTP_TLS_CERT="$pki/server.pem" CPPROF_HTTP_TLS_KEY="$pki/server.key" \
        "$2" LD_PRELOAD="$PRELOAD" CPPROF_HTTP=127.0.0.1:$port \
        sh -c 'if curl -sk -o /dev/null --max-time 5 "https://127.0.0.1:$1/debug/pprof/";
               then echo served; else echo closed; fi' sh "$port" \
        >"$tmp/tls.out" 2>"$tmp/tls.err" || fail "bad TLS ($2): the program failed"
    [ "$(cat "$tmp/tls.out")" = closed ] ||
        fail "bad TLS ($2): the server answered: $(cat "$tmp/tls.err")"
    [ "$(grep -cF "$want" "$tmp/tls.err")" = 1 ] ||
        fail "bad TLS ($2): stderr does not say '$want' once: $(cat "$tmp/tls.err")"
    grep -q "cpprof: cannot serve CPPROF_HTTP=127.0.0.1:$port: a TLS file" "$tmp/tls.err" ||
        fail "bad TLS ($2): stderr does not say the server is off: $(cat "$tmp/tls.err")"
}
tls_refused "CPPROF_HTTP_TLS_CERT=\"$pki/missing.pem\": No such file or directory" \
    CPPROF_HTTP_TLS_CERT="$pki/missing.pem"
tls_refused "CPPROF_HTTP_TLS_KEY=\"$pki/client.key\": The certificate and the given key do not match" \
    CPPROF_HTTP_TLS_KEY="$pki/client.key"
tls_refused "CPPROF_HTTP_TLS_CA=\"$pki/empty.pem\": the file is empty" \
    CPPROF_HTTP_TLS_CA="$pki/empty.pem"

# --- The token stays out of children's environment -------------------------------
# A program that serves (python3 here; a shell is a wrapper, which leaves
# both to the programs it runs) starts a shell that prints, without cpprof
# (LD_PRELOAD emptied), the environment it was given.
LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:0 CPPROF_HTTP_TOKEN="$secret" \
    python3 -c 'import os, sys; sys.exit(os.system("LD_PRELOAD= env"))' \
    >"$tmp/env.out" 2>"$tmp/env.err" || fail "python3: env under zero-code failed"
grep -q '^PATH=' "$tmp/env.out" || fail "python3: the child printed no environment"
grep -qF "$secret" "$tmp/env.out" && fail "python3: a child inherits CPPROF_HTTP_TOKEN"
grep -q '^CPPROF_HTTP=' "$tmp/env.out" && fail "python3: a child inherits CPPROF_HTTP"

# --- A wrapper that execs the program: the program serves ---------------------
# The wrapper (sh or bash) loads cpprof first and takes the variables out of
# its environment; its exec of the program gives them back (same process),
# so the program, not the wrapper, is what /cmdline names.  Before
# execinterpose.c the program started without them and nothing served.
wrapper_launch() {
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port \
        $shell -c 'echo wrapper; exec "$0" 20' "$PROG" \
        >"$tmp/wrap.out" 2>"$tmp/wrap.err" &
}
program_names_itself() {
    curl -s --max-time 2 -o "$tmp/wrap.cmdline" "$base/cmdline" &&
        [ "$(tr '\0' ' ' <"$tmp/wrap.cmdline")" = "$PROG 20" ]
}
for shell in sh bash; do
    serve_on_free_port "the program exec'd by a $shell wrapper" "$tmp/wrap.err" \
        wrapper_launch program_names_itself
    kill "$demo_pid" 2>/dev/null
    wait "$demo_pid" 2>/dev/null
    demo_pid=
done

# --- A daemon that closes every inherited descriptor --------------------------
# It closes the server's descriptors at once, so it is not waited on to
# serve: the library starts the server before main in any case.  A port
# another test holds makes the server say so: then another port.
launch_daemon() {
    : >"$tmp/daemon.out"
    : >"$tmp/prog.err"
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port "$top_builddir/test/daemon_prog" \
        "$tmp/db" </dev/null >>"$tmp/daemon.out" 2>>"$tmp/prog.err" &
}
daemon_done() {
    if grep -qs 'Address already in use' "$tmp/prog.err"; then
        kill "$demo_pid" 2>/dev/null
        return 1
    fi
    grep -qs '^lost ' "$tmp/daemon.out" && grep -qs 'server has stopped' "$tmp/prog.err"
}
serve_on_free_port daemon_prog "$tmp/prog.err" launch_daemon daemon_done
kill -0 "$demo_pid" 2>/dev/null ||
    fail "daemon died: $(cat "$tmp/daemon.out" "$tmp/prog.err")"
[ "$(cat "$tmp/daemon.out")" = "lost 0 of 1000" ] ||
    fail "daemon: $(cat "$tmp/daemon.out") read-backs"
grep -q 'listening socket (descriptor [0-9]*) was closed by the program; the server has stopped' \
    "$tmp/prog.err" || fail "daemon: the server did not say it stopped: $(cat "$tmp/prog.err")"
curl -s -o /dev/null --max-time 2 "$base/" && fail "daemon: the server still answers"
kill "$demo_pid"
wait "$demo_pid" 2>/dev/null
demo_pid=
echo "zero_code: ok"
