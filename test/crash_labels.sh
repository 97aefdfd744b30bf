#!/bin/sh
# crash_labels.sh -- labels in crash tracebacks: a program whose thread
# crashes inside a labelled scope (test/crash_labels) prints the signal,
# then the thread as a goroutine of Go's dumps (its header with its name
# and labels, its stack, who created it) on stderr, then dies of the same
# signal (the shell's exit status 128 + N); CPPROF_TRACEBACKLABELS=0
# leaves the labels out; CPPROF_CRASH_HANDLER=1 installs the handler
# without code; and without the handler nothing is printed.
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

labelled='^goroutine [0-9]* \[running, thread "crasher", labels:{"kind": "crash", "tenant": "acme"}\]:$'

# --- SIGSEGV, handler from the API: signal, labels, stack ----------------
crash segv 139 "$CRASHER" segv api
grep -q '^cpprof: SIGSEGV: segmentation violation$' "$tmp/segv.err" ||
    fail "segv: no signal line: $(cat "$tmp/segv.err")"
grep -q '^PC=0x[0-9a-f]* addr=0x0 sigcode=1$' "$tmp/segv.err" ||
    fail "segv: no PC/addr line: $(cat "$tmp/segv.err")"
grep -q "$labelled" "$tmp/segv.err" || fail "segv: no labelled thread line: $(cat "$tmp/segv.err")"
# The stack: a frame per PC after the header, in Go's shape
# ("OBJECT+0xADDR(...)", ADDR in the object as addr2line takes it, then
# "\t??:0"); the first is inside crash_now (its address from nm), and the
# walk goes on past it; then who created the thread.
sed -n '/^goroutine .*\]:$/,/^$/p' "$tmp/segv.err" >"$tmp/segv.block"
sed -n 's/^\([^ ]*+0x[0-9a-f]*\)(\.\.\.)$/\1/p' "$tmp/segv.block" >"$tmp/segv.frames"
# (Each frame's file line, and the created-by line's.)
[ "$(grep -c "$(printf '^\t??:0$')" "$tmp/segv.block")" = "$(($(wc -l <"$tmp/segv.frames") + 1))" ] ||
    fail "segv: a frame without its file line: $(cat "$tmp/segv.block")"
# Under a sanitizer the call that created the thread is its runtime's
# pthread_create interceptor, which then calls cpprof's.
creator=crash_labels
[ "${CPPROF_SANITIZER:-none}" = none ] || creator='\(crash_labels\|lib[at]san\.so[.0-9]*\)'
grep -q "^created by $creator+0x[0-9a-f]* in goroutine [0-9]*\$" "$tmp/segv.block" ||
    fail "segv: no created-by line naming the creating call: $(cat "$tmp/segv.block")"
[ "$(wc -l <"$tmp/segv.frames")" -ge 3 ] || fail "segv: stack too short: $(cat "$tmp/segv.err")"
fn=0x$(nm "$CRASHER" | awk '$3 == "crash_now" { print $1 }')
leaf=$(sed -n '1s/^crash_labels+//p' "$tmp/segv.frames")
[ -n "$leaf" ] || fail "segv: the first frame is not the program's: $(cat "$tmp/segv.block")"
off=$((leaf - fn))
[ "$off" -ge 0 ] && [ "$off" -lt 256 ] ||
    fail "segv: first frame at $leaf is not in crash_now at $fn"
grep -q '^executable mappings:$' "$tmp/segv.err" || fail "segv: no mappings"
grep -q ' r-xp .*crash_labels$' "$tmp/segv.err" || fail "segv: the program's own mapping is missing"

# --- CPPROF_TRACEBACKLABELS=0: same report without the labels ---------------
crash nolabels 139 CPPROF_TRACEBACKLABELS=0 "$CRASHER" segv api
grep -q '^goroutine [0-9]* \[running, thread "crasher"\]:$' "$tmp/nolabels.err" ||
    fail "nolabels: thread line: $(cat "$tmp/nolabels.err")"
! grep -q 'acme' "$tmp/nolabels.err" || fail "nolabels: labels printed"

# --- SIGABRT, handler from the environment -------------------------------
crash abort 134 CPPROF_CRASH_HANDLER=1 "$CRASHER" abort env
grep -q '^cpprof: SIGABRT: abort$' "$tmp/abort.err" ||
    fail "abort: no signal line: $(cat "$tmp/abort.err")"
grep -q "$labelled" "$tmp/abort.err" || fail "abort: no labelled thread line"

# --- no handler: the same death, nothing printed ----------------------------
crash none 139 "$CRASHER" segv none
! grep -q 'cpprof\|goroutine' "$tmp/none.err" ||
    fail "none: printed $(cat "$tmp/none.err")"

echo "PASS: crash_labels.sh"
