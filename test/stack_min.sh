#!/bin/sh
# stack_min.sh -- cpprof's public calls and the program's calls it
# interposes, on a thread of PTHREAD_STACK_MIN (16 KiB) stack
# (test/stack_min.c).  cpprof_cpu_profile_start read the queued-signal
# budget into an 8 KiB buffer on its caller's stack and such a thread died
# of SIGSEGV; the interposed execve kept an 8 KiB array there, the profile
# and trace builders 4 KiB ones (DWARF line formats, debug file paths),
# and every warning a 2 KiB line.
#   - Run as programs run (symbols bound lazily): every call returns what
#     it should and the program ends normally, not by a signal.
#   - Run with LD_BIND_NOW=1, so that glibc's lazy-binding resolver (which
#     saves the CPU's vector registers on the stack at each first call of
#     a function, 3 KiB with AVX-512, whatever the function) is not
#     counted: no call takes more than half the thread's stack, signal
#     handlers and the kernel's signal frames under them included.  The
#     first call loads cpprof's upper object there, and glibc's dlopen takes
#     6 KiB of that stack by itself; before, that call took 12.5 KiB.
# Not under a sanitizer, whose instrumentation grows every frame.
set -u
: "${top_builddir:=.}"
prog=$top_builddir/test/stack_min
case ${CPPROF_SANITIZER:-none} in
none) ;;
*)
    echo "SKIP: under ${CPPROF_SANITIZER}, whose instrumentation grows every frame past a 16 KiB stack"
    exit 77
    ;;
esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-stack-min.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# run NAME [ENV...]: the program under ENV, its output in $tmp/NAME.out;
# fails unless it exits 0.
run() {
    name=$1
    shift
    env CPPROF_TRACE_FLIGHT_SECONDS=2 "$@" "$prog" "$tmp/$name.flight" \
        >"$tmp/$name.out" 2>"$tmp/$name.err"
    status=$?
    cat "$tmp/$name.out"
    [ $status = 0 ] && grep -qx done "$tmp/$name.out" && return 0
    [ $status -gt 128 ] &&
        fail "$name: the program died of signal $((status - 128)) after: $(tail -n 1 "$tmp/$name.out")"
    fail "$name: status $status: $(cat "$tmp/$name.err")"
}

run lazy
run bound LD_BIND_NOW=1
awk '$1 == "stack" { half = $2 / 2 }
     $1 == "call" && $3 > half { print $2, $3; over = 1 }
     END { exit over }' "$tmp/bound.out" >"$tmp/over" ||
    fail "calls that take more than half of the thread's stack: $(cat "$tmp/over")"
echo "stack_min: ok"
