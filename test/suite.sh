#!/usr/bin/env bash
# test/suite.sh -- every test in every build: what `./setup.sh test` (and
# so CI) runs, and how, within CI's 15 minutes on two cores.
#
#   test/suite.sh    (SANITIZERS=0 skips the sanitized and fuzzing builds,
#                    AARCH64=0 the arm64 one)
#
# The normal build (./build, made by `./setup.sh build`) and `make check`
# in it; then README's commands (readme_commands.sh) and the arm64 cross
# build with its tests under qemu-user (./build-aarch64, cross/aarch64.sh);
# meanwhile the TSan, ASan+UBSan and fuzzing builds (./build-tsan,
# ./build-asan, ./build-fuzz), `make check` of their tests, and each
# libFuzzer target on a fixed number of inputs.  Which tests each build
# runs is test/tests.list's (test/tests_list.sh tests BUILD), with the
# reason for each left out.  It ends with one summary line in Check's
# format over every build, the 15 costliest tests and the time of each
# phase (also in build/phases.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD
# dash for libtool and configure, as setup.sh says why.
[ ! -x /bin/dash ] || export CONFIG_SHELL=/bin/dash

# The tests each build runs, on one line (pipefail: a list that does not
# parse stops the suite here).
normal_tests=$(test/tests_list.sh tests normal | tr '\n' ' ')
asan_tests=$(test/tests_list.sh tests asan | tr '\n' ' ')
tsan_tests=$(test/tests_list.sh tests tsan | tr '\n' ' ')

# build_for DIR TARGETS [CONFIGURE ARGS...]: configures (once) and builds
# only TARGETS in DIR.  No dependency tracking: each of these
# builds is made once, from clean.  Go's build cache is content-addressed,
# so gocheck, browsercheck and pprof come from the normal build's.  A build
# with the normal build's compiler starts from its configure cache
# (libtool's hundred probes cost 30-50 s of CPU each time): the sanitizer
# flags are added after those probes (configure.ac), so their answers hold.
build_for() {
  local dir=$1 targets=$2
  shift 2
  mkdir -p "$dir"
  [ -n "${CC:-}" ] || [ -f "$dir/config.cache" ] ||
    cp build/config.cache "$dir/config.cache" 2>/dev/null || true
  (cd "$dir" && { [ -f Makefile ] || ../configure -q -C --disable-dependency-tracking "$@"; } &&
   make -j"$(nproc)" $targets "${gocache[@]}" >/dev/null)
}
gocache=(GOCHECK_GOCACHE="$top/build/test/gocheck/.gocache")

# check_targets DIR TESTS: the library (with its upper layers' object,
# which serving, CPU profiles and symbolizing load) and what TESTS need
# built: each test that is a program, and every check program, library or
# Go tool whose name the test's script (with test/http_lib.sh), its C
# source or its program's sources, preprocessor flags and libraries (as
# make expands them) mention.  A name mentioned but not needed costs a
# compile; a program needed but missed fails its test, saying so.
check_targets() {
  local dir=$1 t c name text names found=(libcpprof.la libcpprof-upper.la examples/jobrunner)
  local all vars
  declare -A target=()
  all=$(make -s -C "$dir" -f Makefile -f - print-checks <<<'print-checks: ; @echo $(check_PROGRAMS) $(check_LTLIBRARIES) $(check_SCRIPTS)')
  for c in $all; do
    name=$(basename "${c%.la}")
    target[$name]="${target[$name]:-} $c"
  done
  names=$(IFS='|'; echo "${!target[*]}")
  vars=$(make -s -C "$dir" -f Makefile -f - print-vars \
    TEST_NAMES="$(for t in $2; do basename "${t%.sh}"; done | tr '\n' ' ')" <<<'print-vars: ; @: $(foreach n,$(TEST_NAMES),$(info $(n) $(foreach v,SOURCES CPPFLAGS LDADD,$(test_$(n)_$(v)))))')
  for t in $2; do
    name=$(basename "${t%.sh}")
    text=$(cat "$t" "$t.c" test/http_lib.sh 2>/dev/null
           grep "^$name " <<<"$vars" || true)
    for c in $name $(grep -owE "$names" <<<"$text" | sort -u); do
      found+=(${target[$c]:-})
    done
  done
  echo "${found[*]}" | tr ' ' '\n' | sort -u | tr '\n' ' '
}

# Prints every Check summary and ends with one line in Check's format that
# counts all tests of every build run: each Check test case, and each other
# test (a shell test, a fuzzer) as one check.  A Check program whose own
# summary is clean but that failed anyway (a sanitizer's report at exit)
# counts one error more.
summarize_tests() {
  local dir f tests=()
  for dir in build build-aarch64 build-asan build-tsan build-fuzz; do
    for f in "$dir"/test/*.log; do
      [ -f "$f" ] && [ -f "${f%.log}.trs" ] && tests+=("${f%.log}")
    done
  done
  # One grep over all the .trs files and one over all the logs, not a few
  # per test: this runs at the very end, where its 7 s of forks were wall
  # time.
  { printf 'test %s\n' "${tests[@]}"
    printf '%s.trs\n' "${tests[@]}" |
      xargs -r grep -H ':test-result: ' /dev/null | sed 's/^/result /'
    printf '%s.log\n' "${tests[@]}" |
      xargs -r grep -HE '^[0-9]+%: Checks: [0-9]+' /dev/null | sed 's/^/checks /'
  } | awk '
    function count(s, key) {
      return match(s, key ": [0-9]+") ? \
        substr(s, RSTART + length(key) + 2, RLENGTH - length(key) - 2) + 0 : 0
    }
    $1 == "test" { order[++n] = $2; next }
    $1 == "result" {
      s = substr($0, 8); name = substr(s, 1, index(s, ".trs:") - 1)
      if (s ~ /:test-result: (PASS|SKIP)/) passed[name] = 1
      next
    }
    $1 == "checks" {
      s = substr($0, 8); i = index(s, ".log:")
      line[substr(s, 1, i - 1)] = substr(s, i + 5)
      next
    }
    END {
      for (k = 1; k <= n; k++) {
        name = order[k]
        if (name in line) {
          short = name; sub(/\/test\//, "/", short)
          print short ": " line[name]
          c = count(line[name], "Checks"); f = count(line[name], "Failures")
          e = count(line[name], "Errors")
          # A suite that failed without saying so in its counts.
          if (!(name in passed) && f + e == 0) e++
          checks += c; fails += f; errors += e
        } else {
          checks++
          if (!(name in passed)) fails++
        }
      }
      ok = checks - fails - errors
      if (ok < 0) ok = 0
      printf "%d%%: Checks: %d, Failures: %d, Errors: %d\n", \
        checks ? int(ok * 100 / checks) : 0, checks, fails, errors
    }'
}

# phase NAME COMMAND...: runs COMMAND and says, on stderr and in
# build/phases.txt, the wall and CPU time it took (CPU: user and system,
# its own and its children's), so that a run shows where its time goes.
# COMMAND runs in a subshell that measures itself: the main shell's own
# count would take in, too, the background phases that ended meanwhile.
phase() {
  local name=$1 start=$SECONDS rc=0
  shift
  (
    rc=0
    "$@" || rc=$?
    cpu_so_far
    echo "setup: time: $name: $((SECONDS - start)) s, $cpu s of CPU" |
      tee -a "$top/build/phases.txt" >&2
    exit $rc
  ) || rc=$?
  return $rc
}

# cpu_so_far: sets cpu to the CPU seconds this shell and the children it
# has waited for have used.  `times` must run in this shell: in a $(...)
# subshell it would count only that subshell.  Its file is this shell's
# own (phases run at once).
cpu_so_far() {
  local f="$top/build/.times.$BASHPID"
  mkdir -p "$top/build"
  times >"$f"
  cpu=$(tr ms '  ' <"$f" |
        awk '{ t += $1 * 60 + $2 + $3 * 60 + $4 } END { printf "%d", t }')
  rm -f "$f"
}

# check_in DIR JOBS [MAKE ARGS...]: make check in DIR, JOBS tests at a
# time; shows the failures' logs.
check_in() {
  local dir=$1 jobs=$2 rc=0
  shift 2
  (cd "$dir" && make -j"$jobs" check "$@") >"$dir/check.out" 2>&1 || rc=$?
  grep -E '^(PASS|FAIL|XPASS|ERROR|SKIP):' "$dir/check.out" | sed "s|^|$dir: |"
  [ $rc -eq 0 ] || cat "$dir/test-suite.log" >&2 || true
  return $rc
}

# fuzz_one NAME RUNS LOG: one libFuzzer target on RUNS inputs from its
# seed corpus, written up as a test (build-fuzz/test/LOG.log and .trs) for
# summarize_tests.  A crash, a sanitizer report or a failed check in the
# target fails it.  A number of inputs rather than a time, so that the
# fuzzing is the same however busy the machine (it runs beside the tests:
# run_tests); 600 s caps a machine far slower than CI's.  Processes of one
# target share its corpus directory: libFuzzer reads what the others found
# every second (-reload).
fuzz_one() {
  local name=$1 runs=$2 log=build-fuzz/test/$3.log
  local corpus=build-fuzz/test/corpus_$name result=PASS extra=()
  # fuzz_http's connection threads outlive each input: libFuzzer's
  # per-input leak check would count their stacks (ASan still checks
  # every access; the leak checks are make check's).
  [ $name = http ] && extra=(-detect_leaks=0 "-dict=$top/test/fuzz/http.dict")
  (cd build-fuzz/test && ASAN_OPTIONS=halt_on_error=1:detect_leaks=0 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ../test/fuzz/fuzz_$name -runs="$runs" -max_total_time=600 -timeout=30 \
      -artifact_prefix=./$3- "${extra[@]}" \
      "corpus_$name" "$top/test/fuzz/corpus/$name") >"$log" 2>&1 || result=FAIL
  echo ":test-result: $result" >"${log%.log}.trs"
}

# run_fuzzers: every target at once, then their results.  Each target
# (NAME:RUNS:PROCESSES) takes about as many inputs as it got through in
# 30 s on CI's machine alone (56,835 and 152,163 there, 2026-12-06), at the
# tests' priority: 50 s of CPU between them.  fuzz_labels is all CPU, one
# process.  fuzz_http waits on a connection and a server thread per input,
# and on a 1 s profile window for each input that asks for one; as its
# corpus drifts towards those, the same 60,000 inputs took 47 to 157 s
# (2026-12-06), so it runs as four processes of 15,000 (as two of 30,000
# they took 72 and 87 s, and ended 29 s after every test, 2026-12-07).
fuzz_inputs=(http:15000:4 labels:150000:1)
run_fuzzers() {
  local rc=0 spec name runs n i logs=() pids=()
  mkdir -p build-fuzz/test
  for spec in "${fuzz_inputs[@]}"; do
    IFS=: read -r name runs n <<<"$spec"
    mkdir -p "build-fuzz/test/corpus_$name"
    for i in $(seq "$n"); do
      logs+=("fuzz_$name$([ "$n" = 1 ] || echo "-$i")")
      fuzz_one "$name" "$runs" "${logs[-1]}" &
      pids+=($!)
    done
  done
  wait "${pids[@]}"
  for i in "${logs[@]}"; do
    local log=build-fuzz/test/$i.log result
    result=$(sed -n 's/^:test-result: //p' "${log%.log}.trs")
    echo "build-fuzz: $result: $i ($(grep -o 'Done [0-9]* runs' "$log" || echo 'no run'))"
    [ "$result" = PASS ] || { tail -n 40 "$log" >&2; rc=1; }
  done
  return $rc
}

# README's quick start as written, after make check in ./build: its demo
# uses that build itself.
run_readme_commands() {
  local log=build/test/readme_commands.log result=PASS
  test/readme_commands.sh >"$log" 2>&1 || result=FAIL
  echo ":test-result: $result" >"${log%.log}.trs"
  echo "build: $result: test/readme_commands.sh"
  [ $result = PASS ] || { cat "$log" >&2; return 1; }
}

# build_sanitized: the TSan, ASan+UBSan and fuzzing builds, each with what
# its tests need and nothing more, one after the other in the order their
# tests run (built side by side, the first ones' tests waited for them).
# Each leaves DIR/.setup-built when it is done, for await_build.
build_sanitized() {
  rm -f build-asan/.setup-built build-tsan/.setup-built build-fuzz/.setup-built
  phase "TSan build" build_checks build-tsan "$tsan_tests" --enable-tsan &&
  touch build-tsan/.setup-built &&
  phase "ASan build" build_checks build-asan "$asan_tests" --enable-asan-ubsan &&
  touch build-asan/.setup-built &&
  CC=clang CXX=clang++ phase "fuzzing build" build_for build-fuzz \
    "test/fuzz/fuzz_http test/fuzz/fuzz_labels" \
    --enable-fuzzing --enable-asan-ubsan &&
  touch build-fuzz/.setup-built
}

# await_build DIR PID: waits until build_sanitized (PID) has built DIR;
# fails, saying so, when it ended without.
await_build() {
  while [ ! -e "$1/.setup-built" ] && kill -0 "$2" 2>/dev/null; do
    sleep 1
  done
  [ -e "$1/.setup-built" ] || { echo "setup: the $1 build failed" >&2; return 1; }
}

# build_checks DIR TESTS [CONFIGURE ARGS...]: the library in DIR, then
# what TESTS need.
build_checks() {
  local dir=$1 tests=$2
  shift 2
  build_for "$dir" "" "$@" && build_for "$dir" "$(check_targets "$dir" "$tests")"
}

# check_sanitized DIR TESTS: make check of TESTS in DIR, told to build
# nothing more than build_sanitized did.
check_sanitized() {
  check_in "$1" "$(nproc)" TESTS="$2" check_PROGRAMS= check_LTLIBRARIES= \
    check_SCRIPTS= "${gocache[@]}"
}

# costliest_tests: the 15 tests of every build that took the most CPU
# (test/timed's last line in each log), with their wall time: where a run's
# time goes, test by test.  awk, not head, takes the first 15: head would
# leave while sort still writes, and sort's SIGPIPE failed the whole run
# under pipefail (rc 141 after 550 checks passed).
costliest_tests() {
  echo "setup: the costliest tests (CPU s, wall s, build, test):"
  grep -H '^timed: ' build*/test/*.log 2>/dev/null |
    sed -E 's|^([^/]+)/test/[^:]*:timed: ([^:]+): wall ([0-9.]+) s, cpu ([0-9.]+) s$|\4 \3 \1 \2|' |
    sort -rn |
    awk 'NR <= 15 { sub(".*/", "", $4); printf "  %7.1f %7.1f  %-13s %s\n", $1, $2, $3, $4 }'
}

# renice_tree PID NICE: PID and every process below it (make and the
# compilers it runs now; those it starts later inherit make's).  Lowering
# a nice value needs root: otherwise the tree keeps the one it has.
renice_tree() {
  local p
  renice -n "$2" -p "$1" >/dev/null 2>&1 || true
  for p in $(ps -o pid= --ppid "$1"); do
    renice_tree "$p" "$2"
  done
}

run_tests() {
  local rc=0 side=() pid builds= fuzzing=
  # The sanitized builds start beside the normal build's tests at the
  # lowest priority (nice 19) while those run: they take the CPU the tests
  # leave idle (about a fifth: the tests wait on profile windows and on
  # each other), and a test's thread takes a CPU back from a compiler as
  # soon as it wakes (CFS weights 1024 to 15).  At the tests' priority,
  # tried, the tests took three times as long.  Each build's tests start
  # as soon as it is done, beside the builds still to come: a pipeline, so
  # that no CPU waits for a phase to end.  The TSan tests come first:
  # TSan's build costs two thirds of ASan's (76 against 124 s of CPU), so
  # the first sanitized tests can start soonest, and a late ASan build
  # ends while the TSan tests run (ASan first, with the normal tests three
  # at a time, the ASan tests waited 46-57 s for their build, 2026-12-06;
  # two at a time, both builds end before the normal tests).  The arm64
  # build and its qemu run wait for the normal tests: its tests have
  # timeouts that a starved emulator could miss.
  if [ "${SANITIZERS:-1}" != 0 ]; then
    (renice -n 19 -p "$BASHPID" >/dev/null && build_sanitized) &
    builds=$!
    # The fuzzers run from the end of their build (run_fuzzers).
    (await_build build-fuzz "$builds" && phase "fuzzing" run_fuzzers) &
    fuzzing=$!
  fi
  phase "normal tests" check_normal || rc=$?
  # Then the builds left get the tests' priority: left at nice 19 beside
  # the sanitized tests, README's commands and the arm64 run, the last
  # build ended after the other tests (908 s, 2026-12-06), and its tests
  # ran alone at the end.
  [ -z "$builds" ] || renice_tree "$builds" 0
  # README's commands (which wait on the demo most of their minute) and the
  # arm64 cross build and its qemu run go on beside the sanitized ones.
  phase "README commands" run_readme_commands &
  side+=($!)
  if [ "${AARCH64:-1}" != 0 ]; then
    phase "arm64 build and tests" test/cross/aarch64.sh build-aarch64 &
    side+=($!)
  fi
  if [ -n "$builds" ]; then
    if await_build build-tsan "$builds"; then
      phase "TSan tests" check_sanitized build-tsan "$tsan_tests" || rc=$?
    else
      rc=1
    fi
    if await_build build-asan "$builds"; then
      phase "ASan tests" check_sanitized build-asan "$asan_tests" || rc=$?
    else
      rc=1
    fi
    wait "$fuzzing" || rc=1
    wait "$builds" || rc=1
  fi
  for pid in "${side[@]}"; do
    wait "$pid" || rc=$?
  done
  summarize_tests
  costliest_tests
  cpu_so_far
  echo "setup: time: all: $SECONDS s, $cpu s of CPU" | tee -a build/phases.txt >&2
  return $rc
}

# The soak and the sampler stress for 20 s each (their own defaults are
# 120 and 60, for a run by hand): each checks the same things every few
# seconds.  One test more than there are CPUs at a time: two at a time on
# CI's two kept 1.4 CPUs busy (the tests wait on profile windows and
# servers), and three ended them 60-75 s sooner (2026-12-06).  The
# load-sensitive tests that three at a time showed (check_sampler,
# browser_index.sh) were mended, not given the CPU back.
check_normal() {
  (export SOAK_SECONDS=${SOAK_SECONDS:-20} STRESS_SECONDS=${STRESS_SECONDS:-20}
   check_in build $(($(nproc) + 1)) TESTS="$normal_tests")
}

rm -f build/phases.txt
phase "normal build" ./setup.sh build
run_tests
