#!/usr/bin/env bash
# setup.sh -- the one command that sets cpprof up on a fresh Debian 12
# machine and then runs the demo or the whole test suite.
#
#   ./setup.sh demo    install what is missing, build, run the job runner
#                      serving /debug/pprof/ and show a labelled profile
#   ./setup.sh test    install what is missing, build, run every test
#
# Missing Debian packages are installed with apt-get when run as root;
# otherwise the script prints the exact sudo line and stops.  The build goes
# to ./build (out of tree), so the source tree stays clean.
set -euo pipefail
cd "$(dirname "$0")"
top=$PWD

packages=(autoconf automake libtool pkg-config make gcc g++ curl
  libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler zlib1g-dev
  libjansson-dev check libunwind-dev libdw-dev
  golang-go golang-github-google-pprof-dev chromium jq)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$p")
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

build() {
  [ -x configure ] && [ configure -nt configure.ac ] && [ configure -nt Makefile.am ] \
    || autoreconf -fi >/dev/null
  mkdir -p build
  cd build
  [ -f Makefile ] || ../configure -q
  make -j"$(nproc)" >/dev/null
  cd "$top"
}

# Prints every Check summary and ends with one line in Check's format that
# counts all tests: each Check test case, and each other test as one check.
summarize_tests() {
  local checks=0 fails=0 errors=0
  for f in build/test/*.log; do
    local line
    line=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$f" | tail -n 1 || true)
    if [ -n "$line" ]; then
      echo "$(basename "$f" .log): $line"
      checks=$((checks + $(sed -E 's/.*Checks: ([0-9]+).*/\1/' <<<"$line")))
      fails=$((fails + $(sed -E 's/.*Failures: ([0-9]+).*/\1/' <<<"$line")))
      errors=$((errors + $(sed -E 's/.*Errors: ([0-9]+).*/\1/' <<<"$line")))
    elif [ -f "${f%.log}.trs" ]; then
      checks=$((checks + 1))
      grep -q ':test-result: PASS\|:test-result: SKIP' "${f%.log}.trs" \
        || fails=$((fails + 1))
    fi
  done
  local passed=$((checks - fails - errors))
  echo "$(( checks ? passed * 100 / checks : 0 ))%: Checks: $checks, Failures: $fails, Errors: $errors"
}

run_tests() {
  local rc=0
  (cd build && make -j"$(nproc)" check) || rc=$?
  [ $rc -eq 0 ] || cat build/test-suite.log >&2 || true
  summarize_tests
  return $rc
}

demo_pid= demo_dir=
run_demo() {
  local addr=127.0.0.1:6060
  demo_dir=$(mktemp -d)
  trap '[ -z "$demo_pid" ] || kill "$demo_pid" 2>/dev/null; rm -rf "$demo_dir"' EXIT
  ./build/examples/jobrunner --workers 4 --for 15 --addr "$addr" &
  demo_pid=$!
  sleep 1
  echo "demo: fetching a 5-second CPU profile from http://$addr/debug/pprof/profile"
  curl -sf -o "$demo_dir/profile" "http://$addr/debug/pprof/profile?seconds=5"
  echo "demo: go tool pprof -tags (CPU time by tenant and kind):"
  HOME=$demo_dir GOCACHE=$demo_dir/go PPROF_TMPDIR=$demo_dir go tool pprof -tags "$demo_dir/profile" 2>/dev/null
  echo "demo: go tool pprof -top -tagfocus=tenant=initech:"
  HOME=$demo_dir GOCACHE=$demo_dir/go PPROF_TMPDIR=$demo_dir \
    go tool pprof -top -nodecount=5 -tagfocus=tenant=initech "$demo_dir/profile" 2>/dev/null
  echo "demo: the job runner's own measurement of each tenant's CPU time:"
  wait "$demo_pid"
  demo_pid=
}

case "${1:-}" in
  demo) install_missing; build; run_demo ;;
  test) install_missing; build; run_tests ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac
