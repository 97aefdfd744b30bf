#!/bin/sh
# crash_labels.sh -- labels in crash tracebacks: a program that crashes
# inside a labelled scope (test/crash_labels) prints the signal, its thread
# with its labels, and its stack on stderr, then dies of the same signal
# (the shell's exit status 128 + N); CPPROF_TRACEBACKLABELS=0 leaves the
# labels out; CPPROF_CRASH_HANDLER=1 installs the handler without code; and
# without the handler nothing is printed.
set -u
: "${top_builddir:=.}"
CRASHER=$top_builddir/test/crash_labels
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-crash.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ulimit -c 0

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# crash NAME STATUS ARGS...: runs the crasher with ARGS (environment
# assignments first, then its two arguments); its status must be STATUS.
crash() {
    name=$1 want=$2
    shift 2
    env "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    got=$?
    [ "$got" = "$want" ] || fail "$name: exit status $got, want $want: $(cat "$tmp/$name.err")"
}

labelled='^thread [0-9]* "crasher" {"kind":"crash", "tenant":"acme"} \[crashed\]:$'

# --- SIGSEGV, handler from the API: signal, labels, stack ----------------
crash segv 139 "$CRASHER" segv api
grep -q '^cpprof: SIGSEGV: segmentation violation$' "$tmp/segv.err" ||
    fail "segv: no signal line: $(cat "$tmp/segv.err")"
grep -q '^PC=0x[0-9a-f]* addr=0x0 sigcode=1$' "$tmp/segv.err" ||
    fail "segv: no PC/addr line: $(cat "$tmp/segv.err")"
grep -q "$labelled" "$tmp/segv.err" || fail "segv: no labelled thread line: $(cat "$tmp/segv.err")"
# The stack: PCs after the thread line; the first is inside crash_now, and
# the walk goes on past it.
sed -n "/\[crashed\]:\$/,/^executable mappings:\$/p" "$tmp/segv.err" |
    sed -n "$(printf 's/^\t\(0x[0-9a-f]*\)$/\\1/p')" >"$tmp/segv.pcs"
[ "$(wc -l <"$tmp/segv.pcs")" -ge 3 ] || fail "segv: stack too short: $(cat "$tmp/segv.err")"
fn=$(sed -n 's/^crash_now \(0x[0-9a-f]*\)$/\1/p' "$tmp/segv.out")
leaf=$(head -1 "$tmp/segv.pcs")
off=$((leaf - fn))
[ "$off" -ge 0 ] && [ "$off" -lt 256 ] ||
    fail "segv: first PC $leaf is not in crash_now at $fn"
grep -q '^executable mappings:$' "$tmp/segv.err" || fail "segv: no mappings"
grep -q ' r-xp .*crash_labels$' "$tmp/segv.err" || fail "segv: the program's own mapping is missing"

# --- CPPROF_TRACEBACKLABELS=0: same report without the labels ---------------
crash nolabels 139 CPPROF_TRACEBACKLABELS=0 "$CRASHER" segv api
grep -q '^thread [0-9]* "crasher" \[crashed\]:$' "$tmp/nolabels.err" ||
    fail "nolabels: thread line: $(cat "$tmp/nolabels.err")"
! grep -q 'acme' "$tmp/nolabels.err" || fail "nolabels: labels printed"

# --- SIGABRT, handler from the environment -------------------------------
crash abort 134 CPPROF_CRASH_HANDLER=1 "$CRASHER" abort env
grep -q '^cpprof: SIGABRT: abort$' "$tmp/abort.err" ||
    fail "abort: no signal line: $(cat "$tmp/abort.err")"
grep -q "$labelled" "$tmp/abort.err" || fail "abort: no labelled thread line"

# --- no handler: the same death, nothing printed ----------------------------
crash none 139 "$CRASHER" segv none
! grep -q 'cpprof\|crashed' "$tmp/none.err" ||
    fail "none: printed $(cat "$tmp/none.err")"

echo "PASS: crash_labels.sh"
