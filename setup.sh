#!/usr/bin/env bash
# setup.sh -- the one command that sets cpprof up on a fresh Debian 12
# machine and then runs the demo or the whole test suite.
#
#   ./setup.sh demo    install what is missing, build, run the job runner
#                      serving /debug/pprof/ and show a labelled profile
#   ./setup.sh test    install what is missing, build, run every test; then
#                      `make check` again under ASan+UBSan
#                      (./build-asan) and under TSan (./build-tsan), and
#                      each libFuzzer target on a fixed number of inputs
#                      (./build-fuzz, clang); SANITIZERS=0 skips those;
#                      and a cross build for arm64 whose tests
#                      run under qemu-user (./build-aarch64,
#                      test/cross/aarch64.sh); AARCH64=0 skips it
#
# Missing Debian packages are installed with apt-get when run as root;
# otherwise the script prints the exact sudo line and stops.  The build goes
# to ./build (out of tree), so the source tree stays clean.
set -euo pipefail
cd "$(dirname "$0")"
top=$PWD
# Every configure this runs, the tests' own among them, makes libtool and
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
  libboost-fiber-dev protobuf-compiler
  redis-server redis-tools sqlite3 nodejs
  nginx-light postgresql-15
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static)

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
# built: each test
# that is a program, and every check program, library or Go tool whose name
# the test's script (with test/http_lib.sh), its C source or its lines in
# Makefile.am mention.  A name mentioned but not needed costs a compile; a
# program needed but missed fails its test, saying so.
check_targets() {
  local dir=$1 t c name text names found=(libcpprof.la libcpprof-upper.la examples/jobrunner)
  local all makefile
  declare -A target=()
  all=$(make -s -C "$dir" -f Makefile -f - print-checks <<<'print-checks: ; @echo $(check_PROGRAMS) $(check_LTLIBRARIES) $(check_SCRIPTS)')
  for c in $all; do
    name=$(basename "${c%.la}")
    target[$name]="${target[$name]:-} $c"
  done
  names=$(IFS='|'; echo "${!target[*]}")
  makefile=$(sed -e :a -e '/\\$/N; s/\\\n//; ta' Makefile.am)
  for t in $2; do
    name=$(basename "${t%.sh}")
    text=$(cat "$t" "$t.c" test/http_lib.sh 2>/dev/null
           grep -E "^test_${name}_" <<<"$makefile" || true)
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

# Tests run in the normal build only: what they check is not cpprof's
# memory or threads under a sanitizer but something a sanitizer cannot see
# better, and each costs a sanitized build 20-60 s:
#  - configure_deps.sh, dist.sh, abi.sh, docs_links.sh, signal_safe.sh,
#    layering.sh: the build, the tarball, the installed files, the symbol
#    tables, the docs and the source, not a run;
#  - browser_index.sh, browser_framing.sh, browser_trace.sh: their time is
#    chromium's; the server code they reach is the HTTP tests', which run
#    sanitized;
#  - scrape.sh: promtool's and go's time, over endpoints the HTTP tests
#    reach sanitized;
#  - otel_context.sh: the torn-read rate of an out-of-process reader (the
#    writer's memory is check_labels' and soak's, sanitized);
#  - own_threads.sh, http_surface.sh, http_pprof.sh, chains.sh: CPU shares,
#    frames and complete stacks measured on code as users build it;
#  - zero_code.sh, symbolize_addr2line.sh: real programs and compilers
#    (the real-program tests skip themselves when sanitized);
#  - census_blocked: a known chain through read(); a sanitizer's read
#    interceptor adds a frame-pointer frame called through a pointer, so
#    every stack is (rightly) marked a guess there, not the chain;
#  - fork_storm: a hang is its failure, which a sanitizer does not show
#    better, and sanitized builds turn the allocation profiler off, whose
#    lock was the deadlock's;
#  - prefork.sh, nginx.sh, postgres.sh: forks serve only where the
#    program's malloc is glibc's (http_forks.c), and ASan's is not; and
#    PostgreSQL 15 hangs in bindtextdomain with ASan's runtime preloaded,
#    cpprof loaded or not.
#  - host_symbols.sh: a sanitizer's runtime kills a process that dlopens
#    with RTLD_DEEPBIND, so there cpprof's libraries are not isolated from
#    the program's exports (src/upper.c); every sanitized HTTP test loads
#    them that way.
#  - wrapper_frames.sh: the program's time in libc's locks, as users build
#    it; under ASan its CPU goes to ASan's allocator and the locks fall
#    below pprof's node cutoff;
#  - heap_late.sh: when a preloaded process's allocations are sampled,
#    which a sanitized build cannot show (its malloc comes before
#    cpprof's, so the allocation profiler declines);
#  - stack_min.sh: cpprof's calls on a 16 KiB stack, as users build their
#    code; a sanitizer's instrumentation grows every frame past it;
#  - http_metrics.sh, http_json.sh, http_go_details.sh: half of what they
#    check is the allocation profiler's (exact bytes, heap forms), off
#    under a sanitizer; the code behind their other answers runs sanitized
#    in check_json, check_builder and the fuzzers;
#  - check_sampler, stress_sampler, census_quiet.sh, wall_states.sh and the
#    task_*.sh tests and asio_echo.sh: samples and shares judged against CPU and wall time
#    as users build their code (stress_sampler, census_quiet.sh,
#    wall_states.sh and task_pool.sh run under TSan too, for their races;
#    the task code's memory and its bad uses are check_tasks', which runs
#    sanitized).
#  - trace_label_cap.sh: label shares of CPU profiles over 100,000 label
#    sets, as users build; the recorder's copies of sets and the label
#    core's reclaiming run sanitized in check_trace and check_labels.
#  - trace_flight_clients.sh: the resident size of a server whose clients
#    do not read, which a sanitizer's allocator and shadow memory would
#    make another figure; the reply code it reaches runs sanitized in every
#    HTTP test.
normal_only="test/configure_deps.sh test/dist.sh test/abi.sh test/docs_links.sh
  test/signal_safe.sh test/layering.sh test/browser_index.sh test/browser_framing.sh
  test/browser_trace.sh
  test/scrape.sh test/otel_context.sh test/own_threads.sh test/http_surface.sh
  test/http_pprof.sh test/chains.sh test/zero_code.sh
  test/symbolize_addr2line.sh test/fork_storm test/census_blocked
  test/prefork.sh test/nginx.sh test/postgres.sh test/host_symbols.sh
  test/wrapper_frames.sh test/heap_late.sh test/http_metrics.sh test/http_json.sh
  test/http_go_details.sh test/check_sampler test/stress_sampler
  test/census_quiet.sh test/wall_states.sh test/task_pool.sh
  test/task_coro.sh test/task_coro_inline.sh test/task_asio.sh test/asio_echo.sh
  test/task_uv.sh
  test/task_fiber.sh test/stack_min.sh test/trace_label_cap.sh
  test/trace_flight_clients.sh"

# Slow HTTP tests that run sanitized only, not in the normal build too:
# what they check is the server's answers (to hostile and TLS clients
# among them), which the ASan build gives as the normal one does, with
# every access watched besides.  None of them judges a share or a CPU
# time (trace_demo.sh compares wall times the demo and the trace both
# take in-process, which ASan slows alike).
sanitized_only="test/http_security.sh test/http_exposing.sh test/http_pool.sh
  test/http_goroutine.sh test/http_profile.sh test/trace_demo.sh"

# TSan looks for races, so it runs the tests whose threads share what
# cpprof owns: the label registry and its sets across threads, the
# unwinder's tables against its walkers, the sampler's ring and collector,
# the census with its handlers and crew, the HTTP server's pool, window
# and watch threads.  The others do their work on one thread at a time
# (one request, one profile, one program), where ASan sees all there is.
# Threaded tests it leaves out, for a reason TSan itself causes:
#  - check_heap, check_accounting, http_metrics.sh: the allocation profiler
#    and allocation accounting are off in a TSan build (src/heap.c);
#  - check_census, check_http: they count the process's threads, and TSan
#    runs one of its own;
#  - soak: it ends with the dlopened library open 3 times over (seen only
#    under TSan, not yet understood; the normal and ASan soaks check it);
#  - check_sampler: TSan's own background thread blocks every signal, so
#    it is reported as an unsampled thread (a pseudo-sample whose CPU is not
#    samples x period) and its timer is missing from the counts;
#  - check_lifecycle: fork() without exec in a threaded program, which
#    TSan does not support in the child;
#  - dlclose_reuse: TSan holds back a signal that arrives inside its runtime
#    until the interceptor returns, so 13% of the plugin's samples land in
#    the test's own clock_gettime instead (CI; its check wants 90%);
#  - small_stacks.sh: TSan's pthread_create interceptor passes attributes
#    of its own making to cpprof's (src/thread.h), so under TSan cpprof's
#    threads keep the program's default stack, which the test judges.
#  - task_fiber.sh: its fibers switch stacks and resume on other threads,
#    where TSan faults in its shadow stack (as in check_tasks' swapcontext
#    case, left out under TSan for that).
# check_tasks and task_pool.sh, whose tasks move between threads while a
# census reads their records (a seqlock).  task_coro.sh and task_asio.sh
# move them through the same calls (the C++ layer is a header over them),
# so under TSan they would race nothing task_pool.sh does not; task_uv.sh's
# tasks stay on one loop thread.
tsan_tests="test/check_labels test/check_inherit test/check_unwind
  test/clone_labels test/stress_sampler test/altstack_walk test/fiber_stacks
  test/census_quiet.sh test/census_syscall test/http_profile.sh
  test/http_goroutine.sh test/http_pool.sh test/http_hostile.sh
  test/http_slowloris test/http_emfile test/check_tasks test/task_pool.sh
  test/wall_states.sh test/check_trace"

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

# README's quick start and install commands as written, after
# make check in ./build: the quick start's demo uses that build itself.
run_readme_commands() {
  local log=build/test/readme_commands.log result=PASS
  test/readme_commands.sh >"$log" 2>&1 || result=FAIL
  echo ":test-result: $result" >"${log%.log}.trs"
  echo "build: $result: test/readme_commands.sh"
  [ $result = PASS ] || { cat "$log" >&2; return 1; }
}

# tests_but DIR LIST: DIR's tests (make's TESTS) that are not in LIST.
tests_but() {
  local all t kept=()
  all=$(make -s -C "$1" -f Makefile -f - print-tests <<<'print-tests: ; @echo $(TESTS)')
  for t in $all; do
    grep -qw -- "$t" <<<"$2" || kept+=("$t")
  done
  echo "${kept[*]}"
}

# The tests each sanitized build runs.
asan_tests() { tests_but build "$normal_only"; }

# build_sanitized: the TSan, ASan+UBSan and fuzzing builds, each with what
# its tests need and nothing more, one after the other in the order their
# tests run (built side by side, the first ones' tests waited for them).
# Each leaves DIR/.setup-built when it is done, for await_build.
build_sanitized() {
  rm -f build-asan/.setup-built build-tsan/.setup-built build-fuzz/.setup-built
  phase "TSan build" build_checks build-tsan "$(echo $tsan_tests)" --enable-tsan &&
  touch build-tsan/.setup-built &&
  phase "ASan build" build_checks build-asan "$(asan_tests)" --enable-asan-ubsan &&
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
      phase "TSan tests" check_sanitized build-tsan "$(echo $tsan_tests)" || rc=$?
    else
      rc=1
    fi
    if await_build build-asan "$builds"; then
      phase "ASan tests" check_sanitized build-asan "$(asan_tests)" || rc=$?
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
# seconds.  The sanitized_only tests run in the ASan build instead.  One
# test more than there are CPUs at a time: two at a time on CI's two kept
# 1.4 CPUs busy (the tests wait on profile windows and servers), and
# three ended them 60-75 s sooner (2026-12-06).  The load-sensitive tests
# that three at a time showed (check_sampler, browser_index.sh) were
# mended, not given the CPU back.
check_normal() {
  (export SOAK_SECONDS=${SOAK_SECONDS:-20} STRESS_SECONDS=${STRESS_SECONDS:-20}
   check_in build $(($(nproc) + 1)) TESTS="$(tests_but build "$sanitized_only")")
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
  demo) install_missing; build build; run_demo ;;
  test) install_missing; rm -f build/phases.txt; phase "normal build" build build; run_tests ;;
  *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac
