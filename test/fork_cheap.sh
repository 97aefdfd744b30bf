#!/bin/sh
# fork_cheap.sh -- a program that loads cpprof but does not serve, encode
# or symbolize forks about as cheaply as without it: libcpprof.so maps
# none of the upper layers' libraries (libmicrohttpd, GnuTLS, libdw,
# protobuf-c, jansson, zlib) until they are needed (src/upper.h).
#   - test/fork_faults (built without cpprof) with libcpprof.so preloaded:
#     none of them mapped, and its children's page faults per fork within
#     5 of the same program's without cpprof (medians of 5 runs each).
#     They were 73 above it (the libraries' exit-time work), then 5 or 6
#     (the page of locks, crtbegin's flag, libc's unlock, the symbol hash);
#     now 1 to 3: the page of code and symbol hash, and the check that the
#     locks' page was wiped (src/atfork.ld, src/atfork.h; bench/fork has
#     the whole picture).  Judged in the normal build only;
#   - with CPPROF_HTTP set the server starts at load: they are mapped and
#     the index answers;
#   - a libcpprof.so whose upper object is missing: stderr says so, once,
#     and the program runs on, unharmed.
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
PROG=$top_builddir/test/fork_faults
# Five runs of 200 forks each; under a sanitizer, whose counts are not
# judged (below), one of 20: the mappings are all it tells there.
ROUNDS=200 RUNS="1 2 3 4 5"
[ "${CPPROF_SANITIZER:-none}" = none ] || { ROUNDS=20 RUNS=1; }

# Under ASan its runtime, preloaded first, is part of both runs.
base_preload=
[ "${CPPROF_SANITIZER:-none}" != asan ] || base_preload=${PRELOAD% *}

# Five runs of each, alternating, judged by their medians: where the
# loader puts each library moves a fault or two between runs.
faults() { sed -n 's/^child_faults_per_fork: //p' "$1"; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
for i in $RUNS; do
    LD_PRELOAD=$base_preload "$PROG" $ROUNDS >"$tmp/none.out" ||
        fail "fork_faults without cpprof failed"
    faults "$tmp/none.out" >>"$tmp/none.counts"
    LD_PRELOAD=$PRELOAD "$PROG" $ROUNDS >"$tmp/pre.out" 2>"$tmp/pre.err" ||
        fail "fork_faults with cpprof preloaded failed: $(cat "$tmp/pre.err")"
    faults "$tmp/pre.out" >>"$tmp/pre.counts"
done
none=$(median <"$tmp/none.counts")
pre=$(median <"$tmp/pre.counts")
echo "child page faults per fork+exit, medians of $(echo $RUNS | wc -w): $none without cpprof" \
    "($(tr '\n' ' ' <"$tmp/none.counts")), $pre preloaded" \
    "($(tr '\n' ' ' <"$tmp/pre.counts"))"
echo "preloaded, $(grep '^mapped:' "$tmp/pre.out")"
grep -q '^mapped: none$' "$tmp/pre.out" ||
    fail "cpprof preloaded, not serving, maps its upper layers' libraries"
# An ASan build's libcpprof.so writes shadow memory at the child's exit:
# the count says nothing of the libraries, and only the normal build's is
# judged.
[ "${CPPROF_SANITIZER:-none}" != none ] || [ "$pre" -le $((none + 5)) ] ||
    fail "a fork with cpprof preloaded costs $pre faults, $none without"

# Serving from load: the upper layers are loaded, and serve.
launch() {
    CPPROF_HTTP=127.0.0.1:$port LD_PRELOAD=$PRELOAD \
        "$top_builddir/test/zero_code_prog" 30 >/dev/null 2>"$tmp/serve.err" &
    demo_pid=$!
}
ready() { curl -sf -o /dev/null "$base/"; }
serve_on_free_port fork_cheap "$tmp/serve.err" launch ready
grep -q 'libmicrohttpd' "/proc/$demo_pid/maps" ||
    fail "serving, but libmicrohttpd is not mapped"
grep -q 'libcpprof-upper\.so' "/proc/$demo_pid/maps" ||
    fail "serving, but libcpprof-upper.so is not mapped"
echo "serving from CPPROF_HTTP: the upper object and its libraries loaded"
kill "$demo_pid"; wait "$demo_pid" 2>/dev/null; demo_pid=

# Without its upper object: said on stderr, the program unharmed.
mkdir "$tmp/lib"
cp "$LIB" "$tmp/lib/libcpprof.so"
CPPROF_HTTP=127.0.0.1:0 LD_PRELOAD=${PRELOAD%"$LIB"}$tmp/lib/libcpprof.so \
    "$PROG" 20 >"$tmp/alone.out" 2>"$tmp/alone.err" ||
    fail "fork_faults failed with cpprof's upper object missing: $(cat "$tmp/alone.err")"
cat "$tmp/alone.err"
grep -q 'libcpprof-upper\.so is missing' "$tmp/alone.err" ||
    fail "no line on stderr says the upper object is missing"
[ "$(grep -c 'is missing' "$tmp/alone.err")" -eq 1 ] ||
    fail "the missing upper object was reported more than once"
grep -q '^mapped: none$' "$tmp/alone.out" ||
    fail "upper libraries mapped without the upper object"
echo "PASS"
