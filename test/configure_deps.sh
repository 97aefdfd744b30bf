#!/bin/sh
# configure_deps.sh -- ./configure needs only what the library needs.
# configure runs in a fresh directory where pkg-config sees
# only libmicrohttpd, libprotobuf-c, zlib, jansson and libdw (with what
# their own .pc files require), so check.pc is hidden, and where PATH has
# no go, curl, jq, chromium, cmake, meson, ninja, protoc or C++ compiler.  It must
# succeed and its notice name each test-only package; `make check` there
# must stop before building anything, naming them.  And the list is not too long either:
# libcpprof-upper.so (the upper layers, src/upper.h) needs each of those
# libraries and no other; libcpprof.so needs none of them.
set -u
: "${top_builddir:=.}" "${srcdir:=.}"
srcdir=$(cd "$srcdir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-configure.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

library_deps="libmicrohttpd libprotobuf-c zlib jansson libdw gnutls"
test_only="check golang-go curl jq chromium cmake meson ninja-build
  libjemalloc-dev libgoogle-perftools-dev libmimalloc-dev libuv1-dev
  libboost-dev libboost-fiber-dev protobuf-compiler
  golang-github-google-pprof-dev"

# The library's .pc files and everything they require, transitively.
mkdir "$tmp/pc" "$tmp/bin" "$tmp/build" "$tmp/listed"
todo=$library_deps
while [ -n "$todo" ]; do
    next=
    for m in $todo; do
        [ -f "$tmp/pc/$m.pc" ] && continue
        pc=$(pkg-config --path "$m") || fail "pkg-config cannot find $m"
        cp "$pc" "$tmp/pc/"
        next="$next $(pkg-config --print-requires --print-requires-private "$m" |
            awk '{print $1}')"
    done
    todo=$next
done
[ -f "$tmp/pc/check.pc" ] && fail "check.pc is among the library's .pc files"

# PATH: every command of /usr/bin and /bin but the test tools.  go, curl
# and the rest are hidden by name; the Go sources gocheck needs are found
# by a fixed path, which configure reports on its own line.
# One ln for them all: a ln per command was 1,500 forks, 8 s of CPU.
for d in /usr/bin /bin; do
    for f in "$d"/*; do
        name=${f##*/}
        case " go curl jq chromium cmake meson ninja protoc g++ c++ clang++ clang++-14 " in
        *" $name "*) continue ;;
        esac
        [ -e "$tmp/bin/$name" ] || [ -e "$tmp/listed/$name" ] || {
            printf '%s\0' "$f"
            : >"$tmp/listed/$name"
        }
    done
done >"$tmp/commands"
xargs -0 -r ln -s -t "$tmp/bin" <"$tmp/commands" || fail "cannot link the commands"

(cd "$tmp/build" && PATH=$tmp/bin PKG_CONFIG_LIBDIR=$tmp/pc PKG_CONFIG_PATH= \
    "$srcdir/configure" >configure.out 2>&1) ||
    { tail -n 20 "$tmp/build/configure.out" >&2; fail "configure failed"; }
notice=$(grep 'make check also needs' "$tmp/build/configure.out") ||
    fail "configure gave no notice of what make check needs"
for p in check g++ golang-go curl jq chromium cmake meson ninja-build \
    protobuf-compiler; do
    echo "$notice" | grep -qw -- "$p" || fail "the notice leaves out $p: $notice"
done
echo "configure without test tools: $notice"

(cd "$tmp/build" && make check >check.out 2>&1) &&
    fail "make check succeeded without check and the test tools"
grep -q 'make check needs the Debian packages: check ' "$tmp/build/check.out" ||
    { cat "$tmp/build/check.out" >&2; fail "make check did not name check"; }
grep -q '^  CC' "$tmp/build/check.out" &&
    fail "make check compiled something before stopping"
echo "make check there: $(grep 'make check needs' "$tmp/build/check.out")"

# Every required library (each .pc file's own Libs) is one
# libcpprof-upper.so needs, and nothing else is but libcpprof.so.
needs() {
    [ -f "$1" ] || fail "no $1"
    readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(lib[^.]*\)\.so.*/\1/p' |
        sort | tr '\n' ' '
}
needed=$(needs "$top_builddir/.libs/libcpprof-upper.so")
expected=$(for m in $library_deps; do
    sed -n 's/^Libs:.*-l\([^ ]*\).*/lib\1/p' "$tmp/pc/$m.pc"
done | tr ' ' '\n' | grep . | sort | tr '\n' ' ')
for lib in $expected; do
    echo " $needed" | grep -q " $lib " || fail "configure requires $lib, libcpprof-upper.so does not need it"
done
# What a required library's own pkg-config --libs adds (libdw's libelf),
# which a link without --as-needed keeps.
pulled=$(pkg-config --libs $library_deps | tr ' ' '\n' |
    sed -n 's/^-l\(.*\)/lib\1/p' | tr '\n' ' ')
# A sanitized build links its runtimes too (--enable-asan-ubsan, --enable-tsan).
case ${CPPROF_SANITIZER:-none} in
asan) sanitizer_runtimes="libasan libubsan" ;;
tsan) sanitizer_runtimes="libtsan" ;;
*) sanitizer_runtimes= ;;
esac
for lib in $needed; do
    case " $expected $pulled libcpprof libc libm libgcc_s $sanitizer_runtimes " in
    *" $lib "*) ;;
    *) fail "libcpprof-upper.so needs $lib, which configure does not check for" ;;
    esac
done
echo "libcpprof-upper.so needs: $needed"
for lib in $(needs "$top_builddir/.libs/libcpprof.so"); do
    case " libc libm libgcc_s $sanitizer_runtimes " in
    *" $lib "*) ;;
    *) fail "libcpprof.so needs $lib: every fork of a program that loads it pays for it" ;;
    esac
done
