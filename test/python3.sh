#!/bin/sh
# python3.sh -- Debian's python3 (/usr/bin/python3, not a pyenv shim) with
# cpprof preloaded.  Debian builds python3.11 as a non-PIE executable that
# takes malloc's address, so the global malloc symbol is the executable's
# own PLT stub; cpprof once forwarded its malloc to that stub, which jumped
# back into cpprof's malloc until the stack overflowed: every preloaded
# python3 died at load with SIGSEGV.  Checked:
#   - `python3 -c 'print(1)'` preloaded prints 1 and exits 0;
#   - in zero-code mode, two threads hashing while a 2-second CPU profile
#     is taken: google/pprof's parser accepts it, at least 99% of the
#     program's samples (those not labelled pprof_internal) run from a
#     thread's start (start_thread, or __libc_start_call_main for the main
#     thread, which takes the GIL back now and then) through
#     _PyEval_EvalFrameDefault, the interpreter and libcrypto (CI saw 2 of
#     196 in the main thread), or through PyEval_AcquireThread: a new
#     thread waiting for the GIL before its first Python frame (CI, loaded,
#     saw 3 of 203 there, each complete to start_thread through the
#     interpreter's stripped frames), and the heap profile is served (not declined: the stub
#     reaches cpprof's malloc) with the interpreter's frames in it;
#   - the script ends normally once told to.
set -u
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER (python3 is not instrumented; zero_code.sh covers preloading a sanitizer build)" >&2; exit 77 ;;
esac
. "$(dirname "$0")/http_lib.sh"
PRELOAD=$top_builddir/.libs/libcpprof.so
PY=/usr/bin/python3
[ -f "$PRELOAD" ] || fail "no $PRELOAD"
[ -x "$PY" ] || fail "no $PY: apt-get install python3"

# What makes this python3 the case: an executable (not PIE) whose
# dynamic symbol malloc is undefined with a value (its PLT stub).
real=$(readlink -f "$PY")
echo "python3 is $real: ELF type $(od -An -j16 -N2 -tu2 "$real" | tr -d ' ') (2: executable, 3: PIE)"

out=$(LD_PRELOAD=$PRELOAD "$PY" -c 'print(1)' 2>"$tmp/print.err")
status=$?
[ "$status" = 0 ] && [ "$out" = 1 ] ||
    fail "python3 -c 'print(1)' preloaded: status $status, output '$out': $(head -c 300 "$tmp/print.err")"
echo "ok: python3 -c 'print(1)' preloaded prints 1"

cat >"$tmp/busy.py" <<'EOF'
import hashlib, os, sys, threading
stop = sys.argv[1]
# A size the compiler cannot fold into a constant: every chunk is a new
# object past pymalloc's 512 bytes, so from malloc, and the heap profile
# samples the interpreter's allocations, not only start-up's handful.
size = 1000 + len(stop) % 1
def work():
    h = hashlib.sha256()
    while not os.path.exists(stop):
        for _ in range(1000):
            h.update(b"x" * size)
threads = [threading.Thread(target=work) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done")
EOF
launch_python() {
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port "$PY" "$tmp/busy.py" \
        "$tmp/stop" >"$tmp/py.out" 2>"$tmp/py.err" &
}
serve_on_free_port python3 "$tmp/py.err" launch_python answers_index

code=$(fetch profile "$base/profile?seconds=2")
[ "$code" = 200 ] || fail "/profile answered $code: $(cat "$tmp/profile.body")"
"$GOCHECK" -chain 'start_thread|__libc_start_call_main;_PyEval_EvalFrameDefault|PyEval_AcquireThread' \
    -where '!pprof_internal' \
    "$tmp/profile.body" >"$tmp/profile.check" ||
    fail "google/pprof rejects python3's CPU profile"
judge_chain python3 "$tmp/profile.check" \
    'start_thread or __libc_start_call_main, then _PyEval_EvalFrameDefault or PyEval_AcquireThread'

code=$(fetch heap "$base/heap")
[ "$code" = 200 ] || fail "/heap answered $code: $(cat "$tmp/heap.body")"
"$GOCHECK" -frames "$tmp/heap.body" >"$tmp/heap.check" ||
    fail "google/pprof rejects python3's heap profile"
grep -q '^frame _PyEval_EvalFrameDefault ' "$tmp/heap.check" ||
    fail "the heap profile holds no allocation by the interpreter: $(grep -v '^frame' "$tmp/heap.check")"
echo "ok: the heap profile holds the interpreter's allocations ($(grep '^samples' "$tmp/heap.check"))"

: >"$tmp/stop"
await_exit python3 "$tmp/py.err"
[ "$(cat "$tmp/py.out")" = done ] || fail "python3 printed '$(cat "$tmp/py.out")'"
echo "ok: python3 ended normally"
