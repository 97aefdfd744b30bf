#!/bin/sh
# install_consumers.sh PREFIX -- cpprof installed in PREFIX, used as a user
# would.  test/dist.sh runs it on the install of the release tarball; by
# hand, on any install outside the loader's path:
# `top_builddir=build srcdir=. test/install_consumers.sh PREFIX`.
# README's "Install" section names that prefix $HOME/opt/cpprof: HOME is a
# temporary directory here, where that name leads to PREFIX.
# Consumers built against that install only, each run, and each profile
# read by google/pprof's parser (gocheck) with its labels:
#   - C with pkg-config and README's run path (serving /debug/pprof/ on
#     ":PORT", profiled over HTTP with curl, run without LD_LIBRARY_PATH),
#     and static (libcpprof.a: the program needs no libcpprof.so);
#   - C++17 with CMake's find_package(cpprof), cpprof::cpprof and
#     cpprof.hpp (a scope, a capturing lambda in do_, a cpprof::thread);
#   - C with Meson's dependency('cpprof');
# and README's two API examples (C and C++) built without a run path, and
# run with README's LD_LIBRARY_PATH line (and shown to fail without it).
# Every build command and build-file line comes from README's "Install"
# and "Use it in your build" sections as written (test/readme_lib.sh reads
# them): the consumers are named app.c/app, as there.
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

[ $# -eq 1 ] && [ -f "$1/lib/pkgconfig/cpprof.pc" ] ||
    fail "usage: install_consumers.sh PREFIX (cpprof installed in PREFIX)"
prefix=$(cd "$1" && pwd)
libdir=$prefix/lib
for f in "$libdir/libcpprof.so" "$libdir/libcpprof.a" \
    "$libdir/cmake/cpprof/cpprofConfig.cmake" \
    "$libdir/cmake/cpprof/cpprofConfigVersion.cmake" \
    "$prefix/include/cpprof.h" "$prefix/include/cpprof.hpp" \
    "$prefix/include/cpprof_fiber.hpp" "$prefix/include/cpprof_asio.hpp"; do
    [ -f "$f" ] || fail "not installed: $f"
done
# cmake and meson keep state under HOME; README's prefix is under it.
export HOME=$tmp/home
mkdir -p "$HOME/opt" && ln -s "$prefix" "$HOME/opt/cpprof" || fail "cannot make $HOME"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
unset LD_LIBRARY_PATH

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

# readme_run DIR SECTION N: runs README's command block number N of SECTION
# in DIR.
readme_run() {
    cmd=$(readme_block "$README" "$2" "$3") || exit 1
    (cd "$1" && sh -ec "$cmd") >"$1/run.out" 2>&1 ||
        { cat "$1/run.out" >&2; fail "README's command fails: $cmd"; }
}

# readme_build DIR BLOCK SOURCE: in a new DIR holding SOURCE as app.c, runs
# README's build command number BLOCK of "Use it in your build" (it makes
# ./app).
readme_build() {
    mkdir -p "$1" && cp "$3" "$1/app.c" || fail "cannot stage $3"
    readme_run "$1" "Use it in your build" "$2"
}

# --- C, pkg-config with a run path, shared: serving on ":PORT" ----------------
# README's commands for a prefix outside the loader's path; the program
# finds libcpprof.so by its run path alone.
mkdir -p "$tmp/c_shared" && cp "$src/consumer.c" "$tmp/c_shared/app.c" ||
    fail "cannot stage consumer.c"
readme_run "$tmp/c_shared" Install 4
mv "$tmp/c_shared/app" "$tmp/consumer_shared"
ldd "$tmp/consumer_shared" | grep -q "libcpprof.so.* => $libdir/" ||
    fail "the consumer built with a run path does not find the installed libcpprof.so"
for attempt in 1 2 3 4 5 6 7 8; do
    random_port
    rm -f "$tmp/serve.out" "$tmp/stop"
    CONSUMER_NAME=shared "$tmp/consumer_shared" serve ":$port" "$tmp/stop" >"$tmp/serve.out" 2>&1 &
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
check_profile "$tmp/shared.pb.gz" "C, pkg-config with a run path, served on :$port" \
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
"$tmp/cmake/app" "$tmp/cxx.pb.gz" ||
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
CONSUMER_NAME=meson "$tmp/meson/app" write "$tmp/meson.pb.gz" ||
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
# Built without a run path: the loader does not find libcpprof.so (the
# prefix is outside its path, or this test would prove nothing), and
# README's LD_LIBRARY_PATH line runs it.
readme_build "$tmp/c_example" 1 "$tmp/example.c"
"$tmp/c_example/app" >"$tmp/c_example/norpath.out" 2>&1 &&
    fail "a program built without a run path finds libcpprof.so: $prefix is in the loader's path"
grep -q "libcpprof.so.*cannot open shared object file" "$tmp/c_example/norpath.out" ||
    { cat "$tmp/c_example/norpath.out" >&2; fail "README's C example fails otherwise than by not finding libcpprof.so"; }
readme_run "$tmp/c_example" Install 5
cxx_example=$(readme_block "$README" "C++" 1) || exit 1
cat >"$tmp/example.cc" <<EOF || fail "cannot stage README's C++ example"
struct Job { const char *tenant = "acme"; int run() { return 1; } void flush() {} };
$cxx_example
int main() { Job j; handle(j); return 0; }
EOF
mkdir -p "$tmp/cxx_example" || fail "cannot make $tmp/cxx_example"
# shellcheck disable=SC2046
${CXX:-c++} -std=c++17 -o "$tmp/cxx_example/app" "$tmp/example.cc" \
    $(pkg-config --cflags --libs cpprof) >"$tmp/cxx_example/build.out" 2>&1 ||
    { cat "$tmp/cxx_example/build.out" >&2; fail "README's C++ example does not build"; }
readme_run "$tmp/cxx_example" Install 5
echo "README's C and C++ examples build, and run with README's LD_LIBRARY_PATH line"
