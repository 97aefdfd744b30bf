#!/bin/sh
# install_consumers.sh -- cpprof installed and used as a user would
# (issue 16).  `make install DESTDIR=` into a temporary directory, then
# three consumers built against that install only, each run, and each
# profile read by google/pprof's parser (gocheck) with its labels:
#   - C with pkg-config, shared (serving /debug/pprof/ on ":PORT", profiled
#     over HTTP with curl) and static (libcpprof.a: the program needs no
#     libcpprof.so);
#   - C++17 with CMake's find_package(cpprof), cpprof::cpprof and
#     cpprof.hpp (a scope, a capturing lambda in do_, a cpprof::thread);
#   - C with Meson's dependency('cpprof').
# The staged tree is used in place: pkg-config through
# PKG_CONFIG_SYSROOT_DIR, CMake through the package's own location.
set -u
: "${top_builddir:=.}" "${srcdir:=.}"
top_builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$srcdir" && pwd)
GOCHECK=$top_builddir/test/gocheck/gocheck
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-install.XXXXXX")
server_pid=
cleanup() {
    [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

# Sanitizer builds: a consumer built without the sanitizer cannot load an
# instrumented libcpprof.so.
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER" >&2; exit 77 ;;
esac

stage=$tmp/stage
make -s -C "$top_builddir" install DESTDIR="$stage" >"$tmp/install.out" 2>&1 ||
    { cat "$tmp/install.out" >&2; fail "make install DESTDIR failed"; }
pc=$(find "$stage" -name cpprof.pc) && [ -n "$pc" ] || fail "no cpprof.pc installed"
libdir=$(dirname "$(dirname "$pc")")
prefix=${libdir%/lib*}
for f in "$libdir/libcpprof.so" "$libdir/libcpprof.a" \
    "$libdir/cmake/cpprof/cpprofConfig.cmake" \
    "$libdir/cmake/cpprof/cpprofConfigVersion.cmake" \
    "$prefix/include/cpprof.h" "$prefix/include/cpprof.hpp"; do
    [ -f "$f" ] || fail "not installed: ${f#$stage}"
done
export PKG_CONFIG_PATH="$libdir/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
export HOME=$tmp # cmake and meson keep state under HOME

# check_profile FILE CONSUMER KEY=VALUE...: gocheck accepts FILE, and each
# label carries some of its samples.
check_profile() {
    file=$1 who=$2
    shift 2
    "$GOCHECK" "$file" >"$file.check" 2>&1 ||
        { cat "$file.check" >&2; fail "$who: gocheck rejects its profile"; }
    for kv in "$@"; do
        grep -q "^tag ${kv%%=*} ${kv#*=} 0 [1-9]" "$file.check" ||
            { cat "$file.check" >&2; fail "$who: no samples labelled $kv"; }
    done
    echo "$who: $(grep -c '^tag ' "$file.check") labels, $(grep '^samples' "$file.check")"
}

cc=${CC:-cc}
src=$srcdir/test/install

# --- C, pkg-config, shared: serving on ":PORT" --------------------------------
# shellcheck disable=SC2046
$cc -o "$tmp/consumer_shared" "$src/consumer.c" $(pkg-config --cflags --libs cpprof) ||
    fail "C consumer (pkg-config, shared) does not build"
LD_LIBRARY_PATH=$libdir ldd "$tmp/consumer_shared" | grep -q "libcpprof.so.* => $libdir/" ||
    fail "the shared consumer does not load the installed libcpprof.so"
for attempt in 1 2 3 4 5 6 7 8; do
    port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000))
    rm -f "$tmp/serve.out" "$tmp/stop"
    CONSUMER_NAME=shared LD_LIBRARY_PATH=$libdir \
        "$tmp/consumer_shared" serve ":$port" "$tmp/stop" >"$tmp/serve.out" 2>&1 &
    server_pid=$!
    for _ in $(seq 100); do
        grep -q serving "$tmp/serve.out" 2>/dev/null && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    grep -q serving "$tmp/serve.out" && break
    wait "$server_pid"
    server_pid=
    grep -q "Address already in use" "$tmp/serve.out" ||
        { cat "$tmp/serve.out" >&2; fail "the shared consumer did not serve"; }
done
[ -n "$server_pid" ] || fail "no free port in 8 attempts"
curl -sf -o "$tmp/shared.pb.gz" "http://127.0.0.1:$port/debug/pprof/profile?seconds=1" ||
    fail "no profile from the shared consumer on :$port"
touch "$tmp/stop"
wait "$server_pid" || { cat "$tmp/serve.out" >&2; fail "the shared consumer failed"; }
server_pid=
check_profile "$tmp/shared.pb.gz" "C, pkg-config, shared, served on :$port" \
    consumer=shared tenant=acme

# --- C, pkg-config --static: libcpprof.a --------------------------------------
# GNU ld takes libcpprof.so over libcpprof.a when both are installed, so
# the archive is named (README, "Static linking").
# shellcheck disable=SC2046
$cc -o "$tmp/consumer_static" "$src/consumer.c" $(pkg-config --cflags cpprof) \
    $(pkg-config --static --libs cpprof | sed 's/-lcpprof /-l:libcpprof.a /') ||
    fail "C consumer (pkg-config --static) does not build"
ldd "$tmp/consumer_static" | grep -q libcpprof &&
    fail "the static consumer still needs libcpprof.so"
CONSUMER_NAME=static "$tmp/consumer_static" write "$tmp/static.pb.gz" ||
    fail "the static consumer failed"
check_profile "$tmp/static.pb.gz" "C, pkg-config --static" consumer=static tenant=acme

# --- C++17, CMake find_package(cpprof) ------------------------------------------
cmake -S "$src" -B "$tmp/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    >"$tmp/cmake.out" 2>&1 && cmake --build "$tmp/cmake" >>"$tmp/cmake.out" 2>&1 ||
    { cat "$tmp/cmake.out" >&2; fail "C++ consumer (CMake) does not build"; }
LD_LIBRARY_PATH=$libdir "$tmp/cmake/consumer_cxx" "$tmp/cxx.pb.gz" ||
    fail "the C++ consumer failed"
check_profile "$tmp/cxx.pb.gz" "C++17, CMake find_package" consumer=cxx \
    kind=lambda kind=thread

# --- C, Meson dependency('cpprof') ---------------------------------------------
meson setup "$tmp/meson" "$src" >"$tmp/meson.out" 2>&1 &&
    meson compile -C "$tmp/meson" >>"$tmp/meson.out" 2>&1 ||
    { cat "$tmp/meson.out" >&2; fail "C consumer (Meson) does not build"; }
CONSUMER_NAME=meson LD_LIBRARY_PATH=$libdir "$tmp/meson/consumer" write "$tmp/meson.pb.gz" ||
    fail "the Meson consumer failed"
check_profile "$tmp/meson.pb.gz" "C, Meson dependency" consumer=meson tenant=acme
