#!/usr/bin/env bash
# setup.sh -- the one command that sets cpprof up on a fresh Debian 12
# machine and then builds it, runs the demo or runs every test.
#
#   ./setup.sh build   install what is missing, build in ./build
#   ./setup.sh demo    install what is missing, build, run the job runner
#                      serving /debug/pprof/ and show a labelled profile
#   ./setup.sh test    install what is missing, then test/suite.sh: the
#                      build, `make check`, and every other build's tests
#                      (ASan+UBSan, TSan, libFuzzer, arm64 under qemu-user;
#                      SANITIZERS=0 and AARCH64=0 skip them)
#
# Missing Debian packages are installed with apt-get when run as root;
# otherwise the script prints the exact sudo line and stops.  The build goes
# to ./build (out of tree), so the source tree stays clean.
set -euo pipefail
cd "$(dirname "$0")"
top=$PWD
# Every configure run here or by test/suite.sh makes libtool and
# make's recipes dash scripts rather than bash ones: the build of the
# library and the check programs took 140 s of CPU instead of 185 (fresh
# build trees side by side on 2 cores, 2026-12-06), most of a build's
# time being libtool's shell, not the compiler.
[ ! -x /bin/dash ] || export CONFIG_SHELL=/bin/dash

# The library's own (configure.ac requires these); then what only the tests
# need: cmake, meson and ninja-build build test/install_consumers.sh's
# consumers against cpprof installed from its tarball (test/dist.sh); nginx-light and postgresql-15,
# the pre-forking servers test/nginx.sh and test/postgres.sh serve from;
# protobuf-compiler, whose protoc reads test/timeline_protoc.sh's traces;
# panicparse, Go's dump parser, which test/goroutine_panicparse.sh feeds;
# the arm64 cross toolchain and
# qemu-user-static for test/cross/aarch64.sh (which fetches the arm64
# libraries into its own sysroot, never through this list).
packages=(autoconf automake libtool pkg-config make gcc g++
  libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
  libjansson-dev libdw-dev libgnutls28-dev openssl
  check curl golang-go golang-github-google-pprof-dev chromium jq python3
  cmake meson ninja-build
  clang libclang-rt-14-dev libgoogle-perftools-dev
  libjemalloc-dev libtcmalloc-minimal4 libmimalloc-dev libuv1-dev libboost-dev
  libboost-fiber-dev protobuf-compiler panicparse
  redis-server redis-tools sqlite3 nodejs
  nginx-light postgresql-15
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static)

# install_missing: apt-get installs what is missing of $packages, asked of
# dpkg in one call (a call for each package took 2.6 s, and ./setup.sh test
# asks twice: here and in test/suite.sh's build).
install_missing() {
  local missing=() installed p
  # dpkg-query fails for a package it has never known (never installed).
  installed=" $({ dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' \
    "${packages[@]}" 2>/dev/null || true; } |
    awk 'substr($1, 2, 1) == "i" { printf "%s ", $2 }') "
  for p in "${packages[@]}"; do
    [[ $installed == *" $p "* ]] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "cpprof needs these Debian packages; run:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# build DIR [CONFIGURE ARGS...]: configures (once) and builds in DIR.
build() {
  local dir=${1:-build}
  shift || true
  [ -x configure ] && [ configure -nt configure.ac ] && [ configure -nt Makefile.am ] \
    || autoreconf -fi >/dev/null
  mkdir -p "$dir"
  cd "$dir"
  [ -f Makefile ] || ../configure -q -C "$@"
  make -j"$(nproc)" >/dev/null
  cd "$top"
}

demo_pid= demo_dir=
run_demo() {
  local addr=127.0.0.1:6060
  demo_dir=$(mktemp -d)
  trap '[ -z "$demo_pid" ] || kill "$demo_pid" 2>/dev/null; rm -rf "$demo_dir"' EXIT
  ./build/examples/jobrunner --workers 4 --tasks --for 10 --addr "$addr" &
  demo_pid=$!
  sleep 1
  echo "demo: fetching a 5-second CPU profile from http://$addr/debug/pprof/profile"
  curl -sf -o "$demo_dir/profile" "http://$addr/debug/pprof/profile?seconds=5"
  # The goroutine profile at once too, while the demo still runs: reading
  # the two with pprof takes a few seconds on a loaded machine.
  curl -sf -o "$demo_dir/goroutine" "http://$addr/debug/pprof/goroutine"
  echo "demo: go tool pprof -tags (CPU time by tenant and kind):"
  HOME=$demo_dir GOCACHE=$demo_dir/go PPROF_TMPDIR=$demo_dir go tool pprof -tags "$demo_dir/profile" 2>/dev/null
  echo "demo: go tool pprof -top -tagfocus=tenant=initech:"
  HOME=$demo_dir GOCACHE=$demo_dir/go PPROF_TMPDIR=$demo_dir \
    go tool pprof -top -nodecount=5 -tagfocus=tenant=initech "$demo_dir/profile" 2>/dev/null
  echo "demo: go tool pprof -tags on the goroutine profile (threads, and the"
  echo "      jobs parked on I/O as tasks, by tenant):"
  HOME=$demo_dir GOCACHE=$demo_dir/go PPROF_TMPDIR=$demo_dir go tool pprof -tags "$demo_dir/goroutine" 2>/dev/null
  echo "demo: the job runner's own measurement of each tenant's CPU time:"
  wait "$demo_pid"
  demo_pid=
}

case "${1:-}" in
  build) install_missing; build build ;;
  demo) install_missing; build build; run_demo ;;
  test) install_missing; exec test/suite.sh ;;
  *) echo "usage: $0 build|demo|test" >&2; exit 2 ;;
esac
