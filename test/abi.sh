#!/bin/sh
# abi.sh -- what cpprof's libraries export is what docs/abi.md says:
#   - libcpprof.so (nm -D): cpprof.h's CPPROF_API declarations, each
#     versioned CPPROF_0; unversioned, the functions it interposes
#     (src/upper/object.map's, which libcpprof-upper.so forwards) and the symbols
#     fleet profilers read (otel_thread_ctx_v1, custom_labels_*); in the
#     node CPPROF_PRIVATE, the cpprof__ names of src/upper/object_uses.h; nothing
#     else;
#   - libcpprof.a: the same global names but the private ones, every other
#     name local: a program defining each of cpprof's internal names (those
#     of the build's libcpprof_internal.a, the tests' library) links with it;
#   - test/abi.c, compiled against include/ and linked with libcpprof.so
#     and with libcpprof.a, reads CPPROF_VERSION_STRING, CPPROF_VERSION_HEX
#     and cpprof_version(), which agree with configure's version; its
#     malloc, and a preloaded program's malloc@GLIBC_*, bind to cpprof's.
# A check of the build's symbol tables: the sanitized builds skip it (their
# consumers would need the sanitizer's runtime).
set -u
: "${top_builddir:=.}" "${srcdir:=.}"
[ "${CPPROF_SANITIZER:-none}" = none ] || {
    echo "SKIP: a check of the normal build's symbol tables"; exit 77; }
top_builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$srcdir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-abi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }
LIB=$top_builddir/.libs/libcpprof.so
ARCHIVE=$top_builddir/libcpprof.a
for f in "$LIB" "$ARCHIVE" "$top_builddir/.libs/libcpprof_internal.a"; do
    [ -f "$f" ] || fail "no $f"
done
# make_var NAME: a variable of the build's Makefile.
make_var() { sed -n "s/^$1 = //p" "$top_builddir/Makefile"; }

# ---- What docs/abi.md names -------------------------------------------------
sed -n 's/^CPPROF_API .*\b\(cpprof_[a-z0-9_]*\)[[(].*/\1/p' \
    "$srcdir/include/cpprof.h" | sort -u >"$tmp/public"
[ "$(wc -l <"$tmp/public")" -gt 30 ] || fail "cpprof.h: no CPPROF_API declarations"
sed -n '/global:/,/local:/p' "$srcdir/src/upper/object.map" | tr ' ;' '\n\n' |
    grep -x '[a-z_][a-z0-9_]*' | grep -vx 'cpprof_upper_entry' | sort -u >"$tmp/interposed"
printf '%s\n' otel_thread_ctx_v1 custom_labels_current_set \
    custom_labels_abi_version | sort >"$tmp/abi_symbols"
sed -n 's/^#define \([a-z_0-9]*\) \(cpprof__\1\)$/\2/p' \
    "$srcdir/src/upper/object_uses.h" | sort -u >"$tmp/private"
sort -u "$tmp/interposed" "$tmp/abi_symbols" >"$tmp/unversioned"
sort -u "$tmp/public" "$tmp/unversioned" >"$tmp/global"

# same WHAT EXPECTED ACTUAL: the two lists are equal.
same() {
    cmp -s "$2" "$3" ||
        fail "$1: $(diff "$2" "$3" | sed -n 's/^</ missing/p; s/^>/ unexpected/p' |
            tr '\n' ' ')"
}

# ---- libcpprof.so -------------------------------------------------------------
nm -D --defined-only --with-symbol-versions "$LIB" | awk '$2 != "A" { print $3 }' \
    >"$tmp/so"
grep '@@CPPROF_0$' "$tmp/so" | sed 's/@.*//' | sort >"$tmp/so_public"
grep '@@CPPROF_PRIVATE$' "$tmp/so" | sed 's/@.*//' | sort >"$tmp/so_private"
grep -v '@' "$tmp/so" | sort >"$tmp/so_unversioned"
grep '@' "$tmp/so" | grep -v '@@CPPROF_0$\|@@CPPROF_PRIVATE$' >"$tmp/so_other"
same "libcpprof.so's CPPROF_0 node against cpprof.h's CPPROF_API" \
    "$tmp/public" "$tmp/so_public"
same "libcpprof.so's unversioned exports against the interposed and ABI symbols" \
    "$tmp/unversioned" "$tmp/so_unversioned"
same "libcpprof.so's CPPROF_PRIVATE node against object_uses.h" \
    "$tmp/private" "$tmp/so_private"
[ -s "$tmp/so_other" ] && fail "libcpprof.so: other versions: $(tr '\n' ' ' <"$tmp/so_other")"
echo "libcpprof.so: $(wc -l <"$tmp/so_public") public (CPPROF_0)," \
    "$(wc -l <"$tmp/interposed") interposed and $(wc -l <"$tmp/abi_symbols")" \
    "ABI symbols (unversioned), $(wc -l <"$tmp/so_private") private (CPPROF_PRIVATE)"

# ---- libcpprof.a --------------------------------------------------------------
# globals ARCHIVE: the names it defines with global binding.
globals() { nm --defined-only "$1" | awk 'NF == 3 && $2 ~ /^[A-Z]$/ { print $3 }' | sort -u; }
globals "$ARCHIVE" >"$tmp/a_global"
same "libcpprof.a's global names against libcpprof.so's but the private ones" \
    "$tmp/global" "$tmp/a_global"
globals "$top_builddir/.libs/libcpprof_internal.a" | comm -23 - "$tmp/global" |
    grep -x '[A-Za-z_][A-Za-z0-9_]*' >"$tmp/internal"
[ "$(wc -l <"$tmp/internal")" -gt 100 ] ||
    fail "only $(wc -l <"$tmp/internal") internal names in libcpprof_internal.a"
echo "libcpprof.a: $(wc -l <"$tmp/a_global") global names;" \
    "$(wc -l <"$tmp/internal") internal ones local"

# ---- Consumers ----------------------------------------------------------------
version=$(make_var PACKAGE_VERSION)
major=${version%%.*} minor=${version#*.} patch=${version##*.}
minor=${minor%.*}
expected=$(printf '%s %#x %#x' "$version" $(((major << 16) | (minor << 8) | patch)) \
    $(((major << 16) | (minor << 8) | patch)))
CC=$(make_var CC)
cflags="-std=c11 -Wall -Wextra -Werror -I$srcdir/include -I$top_builddir/include"

# shellcheck disable=SC2086 # flag lists
$CC $cflags -o "$tmp/abi_shared" "$srcdir/test/abi.c" -L"$top_builddir/.libs" -lcpprof \
    >"$tmp/cc.out" 2>&1 || { cat "$tmp/cc.out" >&2; fail "cannot build test/abi.c against libcpprof.so"; }
nm -D "$tmp/abi_shared" | grep -q ' U cpprof_version@CPPROF_0$' ||
    fail "the consumer does not ask for cpprof_version@CPPROF_0: $(nm -D "$tmp/abi_shared" | grep cpprof_)"
out=$(LD_LIBRARY_PATH=$top_builddir/.libs LD_DEBUG=bindings LD_DEBUG_OUTPUT=$tmp/bind \
    "$tmp/abi_shared") || fail "the shared consumer failed"
[ "$out" = "$expected" ] || fail "the shared consumer says '$out', configure '$expected'"
grep -q "binding file $tmp/abi_shared .* to .*/libcpprof\.so\.[0-9]* .*normal symbol \`malloc'" \
    "$tmp"/bind.* || fail "the consumer's malloc is not cpprof's: $(grep "\`malloc'" "$tmp"/bind.* | head -n 2)"
echo "shared consumer: $out, its malloc cpprof's"

# A program that never linked cpprof asks for malloc@GLIBC_*: preloaded,
# libcpprof.so's unversioned malloc takes it.
rm -f "$tmp"/bind.*
echo '#include <stdlib.h>
int main(void) { void *volatile p = malloc(64); free(p); return 0; }' >"$tmp/plain.c"
$CC -o "$tmp/plain" "$tmp/plain.c" || fail "cannot build a plain program"
LD_PRELOAD=$LIB LD_DEBUG=bindings LD_DEBUG_OUTPUT=$tmp/bind "$tmp/plain" ||
    fail "the preloaded plain program failed"
grep -q "binding file $tmp/plain .* to .*/libcpprof\.so .*normal symbol \`malloc' \[GLIBC_" \
    "$tmp"/bind.* || fail "a preloaded program's malloc@GLIBC is not cpprof's: $(grep "\`malloc'" "$tmp"/bind.* | head -n 2)"
echo "preloaded program: its malloc@GLIBC is cpprof's"

# Beside a definition of each internal name of cpprof's.
sed 's/.*/char &;/' "$tmp/internal" >"$tmp/names.c"
# shellcheck disable=SC2086 # flag lists
$CC $cflags -o "$tmp/abi_static" "$srcdir/test/abi.c" "$tmp/names.c" "$ARCHIVE" \
    $(make_var CPPROF_STATIC_LIBS) >"$tmp/cc.out" 2>&1 ||
    { head -n 20 "$tmp/cc.out" >&2; fail "a program defining cpprof's internal names does not link with libcpprof.a"; }
nm "$tmp/abi_static" | grep -q ' T malloc$' || fail "libcpprof.a's malloc is not in the static consumer"
out=$("$tmp/abi_static") || fail "the static consumer failed"
[ "$out" = "$expected" ] || fail "the static consumer says '$out', configure '$expected'"
echo "static consumer, beside $(wc -l <"$tmp/internal") of cpprof's internal names: $out"
echo PASS
