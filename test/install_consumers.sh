#!/bin/sh
# install_consumers.sh -- cpprof installed and used as a user would.
# `make install DESTDIR=` into a temporary directory, then
# three consumers built against that install only, each run, and each
# profile read by google/pprof's parser (gocheck) with its labels:
#   - C with pkg-config, shared (serving /debug/pprof/ on ":PORT", profiled
#     over HTTP with curl) and static (libcpprof.a: the program needs no
#     libcpprof.so);
#   - C++17 with CMake's find_package(cpprof), cpprof::cpprof and
#     cpprof.hpp (a scope, a capturing lambda in do_, a cpprof::thread);
#   - C with Meson's dependency('cpprof');
# and README's two API examples (C and C++) built and run with a small
# harness around them.  Every build command and build-file line comes from
# README's "Use it in your build" section as written (test/readme_lib.sh
# reads it): the consumers are named app.c/app, as there.  The staged tree
# is used in place: pkg-config through PKG_CONFIG_SYSROOT_DIR, CMake
# through the package's own location.
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
. "$srcdir/test/readme_lib.sh"
. "$srcdir/test/ports.sh"
README=$srcdir/README
use_block() { readme_block "$README" "Use it in your build" "$1"; }

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
    "$prefix/include/cpprof.h" "$prefix/include/cpprof.hpp" \
    "$prefix/include/cpprof_fiber.hpp"; do
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

src=$srcdir/test/install

# readme_build DIR BLOCK SOURCE: in a new DIR holding SOURCE as app.c, runs
# README's build command number BLOCK (it makes ./app).
readme_build() {
    mkdir -p "$1" && cp "$3" "$1/app.c" || fail "cannot stage $3"
    cmd=$(use_block "$2") || exit 1
    (cd "$1" && sh -ec "$cmd") >"$1/build.out" 2>&1 ||
        { cat "$1/build.out" >&2; fail "README's command fails: $cmd"; }
}

# --- C, pkg-config, shared: serving on ":PORT" --------------------------------
readme_build "$tmp/c_shared" 1 "$src/consumer.c"
mv "$tmp/c_shared/app" "$tmp/consumer_shared"
LD_LIBRARY_PATH=$libdir ldd "$tmp/consumer_shared" | grep -q "libcpprof.so.* => $libdir/" ||
    fail "the shared consumer does not load the installed libcpprof.so"
for attempt in 1 2 3 4 5 6 7 8; do
    random_port
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
readme_build "$tmp/c_static" 4 "$src/consumer.c"
mv "$tmp/c_static/app" "$tmp/consumer_static"
ldd "$tmp/consumer_static" | grep -q libcpprof &&
    fail "the static consumer still needs libcpprof.so"
CONSUMER_NAME=static "$tmp/consumer_static" write "$tmp/static.pb.gz" ||
    fail "the static consumer failed"
check_profile "$tmp/static.pb.gz" "C, pkg-config --static" consumer=static tenant=acme

# --- C++17, CMake find_package(cpprof) ------------------------------------------
# The project's frame, then README's two lines as written.
cmake_lines=$(use_block 2) || exit 1
mkdir -p "$tmp/cmake_src" && cp "$src/consumer.cc" "$tmp/cmake_src/" &&
    cat >"$tmp/cmake_src/CMakeLists.txt" <<EOF || fail "cannot stage CMakeLists.txt"
cmake_minimum_required(VERSION 3.13)
project(cpprof_consumer_cxx LANGUAGES CXX)
add_executable(app consumer.cc)
target_compile_features(app PRIVATE cxx_std_17)
target_compile_options(app PRIVATE -Wall -Wextra -Werror)
$cmake_lines
EOF
cmake -S "$tmp/cmake_src" -B "$tmp/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
    >"$tmp/cmake.out" 2>&1 && cmake --build "$tmp/cmake" >>"$tmp/cmake.out" 2>&1 ||
    { cat "$tmp/cmake.out" >&2; fail "C++ consumer (CMake) does not build"; }
LD_LIBRARY_PATH=$libdir "$tmp/cmake/app" "$tmp/cxx.pb.gz" ||
    fail "the C++ consumer failed"
check_profile "$tmp/cxx.pb.gz" "C++17, CMake find_package" consumer=cxx \
    kind=lambda kind=thread

# --- C, Meson dependency('cpprof') ---------------------------------------------
meson_line=$(use_block 3) || exit 1
mkdir -p "$tmp/meson_src" && cp "$src/consumer.c" "$tmp/meson_src/app.c" &&
    cat >"$tmp/meson_src/meson.build" <<EOF || fail "cannot stage meson.build"
project('cpprof_consumer', 'c', default_options: ['warning_level=2'])
$meson_line
EOF
meson setup "$tmp/meson" "$tmp/meson_src" >"$tmp/meson.out" 2>&1 &&
    meson compile -C "$tmp/meson" >>"$tmp/meson.out" 2>&1 ||
    { cat "$tmp/meson.out" >&2; fail "C consumer (Meson) does not build"; }
CONSUMER_NAME=meson LD_LIBRARY_PATH=$libdir "$tmp/meson/app" write "$tmp/meson.pb.gz" ||
    fail "the Meson consumer failed"
check_profile "$tmp/meson.pb.gz" "C, Meson dependency" consumer=meson tenant=acme

# --- README's API examples, built and run ---------------------------------------
# Each example with the little it leaves out (the job type, execute, main)
# around it: a snippet that no longer compiles against the installed
# headers fails here.
c_example=$(readme_block "$README" "The label API in ten lines" 1) || exit 1
cat >"$tmp/example.c" <<EOF || fail "cannot stage README's C example"
struct job { const char *tenant, *kind; };
static void execute(void *job) { (void)job; }
$c_example
int main(void) { struct job j = {"acme", "decode"}; handle(&j); return 0; }
EOF
readme_build "$tmp/c_example" 1 "$tmp/example.c"
LD_LIBRARY_PATH=$libdir "$tmp/c_example/app" || fail "README's C example fails"
cxx_example=$(readme_block "$README" "C++" 1) || exit 1
cat >"$tmp/example.cc" <<EOF || fail "cannot stage README's C++ example"
struct Job { const char *tenant = "acme"; int run() { return 1; } void flush() {} };
$cxx_example
int main() { Job j; handle(j); return 0; }
EOF
# shellcheck disable=SC2046
${CXX:-c++} -std=c++17 -o "$tmp/example_cxx" "$tmp/example.cc" \
    $(pkg-config --cflags --libs cpprof) >"$tmp/example_cxx.out" 2>&1 ||
    { cat "$tmp/example_cxx.out" >&2; fail "README's C++ example does not build"; }
LD_LIBRARY_PATH=$libdir "$tmp/example_cxx" || fail "README's C++ example fails"
echo "README's C and C++ examples build and run"
