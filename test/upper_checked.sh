#!/bin/sh
# upper_checked.sh -- libcpprof-upper.so, mapped at the first call that
# needs it (src/upper.h), is checked before it is mapped
# (src/upper_check.c): a file cut short or of another build is refused,
# said once on stderr, and the program lives.
#
# libcpprof.so and its upper object are copied into a directory of their
# own (where libcpprof.so looks for it), and the copy of the upper object
# is then damaged:
#   - intact: test/upper_request (linked with libcpprof) gets its CPU
#     profile and its server (the control);
#   - cut at half of what the loader maps: in zero-code mode
#     (CPPROF_HTTP, test/fork_faults, built without cpprof) and linked
#     (test/upper_request), the program lives, its calls answer
#     CPPROF_EUPPER, stderr says once that the file is cut short.  It died
#     of SIGBUS in dlopen before;
#   - complete but recording another libcpprof.so's build ID (the note
#     the build writes into it, changed): refused the same way, naming
#     both build IDs.
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
UPPER=$top_builddir/.libs/libcpprof-upper.so
[ -f "$UPPER" ] || fail "no $UPPER"
mkdir "$tmp/lib"
cp "$LIB" "$tmp/lib/libcpprof.so"
preload_copy=${PRELOAD%"$LIB"}$tmp/lib/libcpprof.so
EUPPER=-10026

# The end of the upper object's last PT_LOAD segment in the file.
loaded_end=0
for seg in $(LC_ALL=C readelf -lW "$UPPER" |
    awk '$1 == "LOAD" { print $2 "+" $5 }'); do
    end=$(($seg))
    [ "$end" -le "$loaded_end" ] || loaded_end=$end
done
[ "$loaded_end" -gt 0 ] || fail "no loadable segment in $UPPER"

# run_linked NAME: test/upper_request with the copy; its output in
# $tmp/NAME.out and .err.
run_linked() {
    LD_PRELOAD=$preload_copy "$top_builddir/test/upper_request" \
        >"$tmp/$1.out" 2>"$tmp/$1.err"
    status=$?
    sed "s/^/$1: /" "$tmp/$1.out" "$tmp/$1.err"
    [ $status -eq 0 ] && grep -qx alive "$tmp/$1.out" ||
        fail "$1: upper_request died (status $status)"
}

# refused NAME WORDS: the linked program and the zero-code one both lived,
# each call answered CPPROF_EUPPER, and stderr said WORDS once.
refused() {
    run_linked "$1"
    for call in cpu_profile_start http_start; do
        grep -q "^$call: $EUPPER " "$tmp/$1.out" ||
            fail "$1: $call did not answer CPPROF_EUPPER"
    done
    [ "$(grep -c "libcpprof-upper\.so $2" "$tmp/$1.err")" -eq 1 ] ||
        fail "$1: stderr does not say once that the upper object $2"
    CPPROF_HTTP=127.0.0.1:0 LD_PRELOAD=$preload_copy \
        "$top_builddir/test/fork_faults" 5 >"$tmp/$1-zero.out" \
        2>"$tmp/$1-zero.err"
    status=$?
    sed "s/^/$1, zero-code: /" "$tmp/$1-zero.err"
    [ $status -eq 0 ] ||
        fail "$1: a zero-code program died (status $status)"
    [ "$(grep -c "libcpprof-upper\.so $2" "$tmp/$1-zero.err")" -eq 1 ] ||
        fail "$1, zero-code: stderr does not say once that the upper object $2"
    grep -q '^mapped: none$' "$tmp/$1-zero.out" ||
        fail "$1, zero-code: the refused upper object's libraries are mapped"
}

cp "$UPPER" "$tmp/lib/libcpprof-upper.so"
run_linked intact
grep -q '^cpu_profile_start: 0 ' "$tmp/intact.out" &&
    grep -q '^http_start: 0 ' "$tmp/intact.out" ||
    fail "intact: the copied library does not work"

truncate -s $((loaded_end / 2)) "$tmp/lib/libcpprof-upper.so"
refused cut "is cut short"

# Another build: the recorded build ID (hex text in the pair note)
# replaced by another of the same length.
id=$(sed -n 's/^#define UPPER_PAIR_BUILD_ID "\(.*\)"$/\1/p' \
    "$top_builddir/src/upper/upper_pair.h")
[ -n "$id" ] || fail "no build ID recorded in src/upper/upper_pair.h"
other=$(echo "$id" | tr 0-9a-f 1-9a-f0)
perl -0777 -pe "s/$id/$other/" "$UPPER" >"$tmp/lib/libcpprof-upper.so"
cmp -s "$UPPER" "$tmp/lib/libcpprof-upper.so" &&
    fail "the recorded build ID was not found in $UPPER"
refused other "was built with another libcpprof.so"
echo "PASS"
