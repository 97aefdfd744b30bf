#!/usr/bin/env bash
# test/cross/aarch64.sh -- cross-builds cpprof for arm64 (aarch64) Linux and
# runs the tests qemu-user can run; ./setup.sh test calls it.
#
#   test/cross/aarch64.sh [BUILD DIR]     (default ./build-aarch64)
#
# Shaped by what a developer's amd64 machine has and must keep:
#  - The arm64 libraries come from Debian's own arm64 packages, unpacked
#    into BUILD DIR/sysroot with dpkg-deb -x.  They are downloaded with a
#    private apt state (arm64 lists of the Debian sources the machine
#    already uses), so nothing on the machine changes: no
#    `dpkg --add-architecture`, and no arm64 -dev package installed through
#    apt, which would pull the amd64 libraries of the same name to the
#    arm64 version.  The sysroot is kept and only missing packages fetched.
#  - The C library, libgcc and libstdc++ are the cross toolchain's
#    (gcc-aarch64-linux-gnu, in /usr/aarch64-linux-gnu), so the package
#    walk stops there.
#  - There is no binfmt_misc here (a container) and registering one would
#    change the machine, so every arm64 program is started through
#    qemu-aarch64-static by a wrapper (BUILD DIR/qemu/run); the HTTP tests
#    take their demo as $JOBRUNNER.
#  - Tests are run one by one, not by `make check`: the cross configure
#    finds no arm64 jemalloc, tcmalloc or mimalloc (test-only packages), so
#    `make check` would refuse, and most shell tests start x86-only tools.
#    Each test writes NAME.log and NAME.trs as automake's driver does, so
#    test/suite.sh's summary counts them.
#
# Which tests run here, and why each other one is left out (seen by running
# it under qemu 7.2, where tried), is test/tests.list's: the tests it names
# arm64, and their "-arm64:" lines.  The last line printed is
#   aarch64: N tests run, N passed; M left out: NAMES
# and the exit status is 1 when a test failed or the build did.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${1:-$top/build-aarch64}" && cd "${1:-$top/build-aarch64}" && pwd)
sysroot=$out/sysroot
triplet=aarch64-linux-gnu
qemu=qemu-aarch64-static

# The library's dependencies and the unit tests' (check), by their Debian
# names; the walk adds what they depend on.
wanted=(libmicrohttpd-dev libprotobuf-c-dev zlib1g-dev libjansson-dev
  libdw-dev libgnutls28-dev check)
# What the cross toolchain already provides, and what only a Debian
# system's own installation needs: the walk does not go into these.
provided=(libc6 libc6-dev libc-dev-bin libgcc-s1 libstdc++6 gcc-12-base
  libcrypt1 libcrypt-dev linux-libc-dev "<libc-dev>" debconf mawk)

# What runs under qemu: programs of the build (Check suites and C tests),
# then HTTP tests against the demo, which start it as $JOBRUNNER; and the
# tests left out, NAME: reason.
unit_tests=() http_tests=() left_out=()
arm64=$("$top/test/tests_list.sh" tests arm64)
for t in $arm64; do
  case $t in
  *.sh) http_tests+=("${t#test/}") ;;
  *) unit_tests+=("${t#test/}") ;;
  esac
done
reasons=$("$top/test/tests_list.sh" left-out arm64)
mapfile -t left_out <<<"$reasons"
# Check test cases tagged (test/check_*.c) by what qemu-user 7.2 lacks,
# each seen failing under it for that reason alone: TAG: reason.
excluded_tags=(
  "process_vm_readv: qemu has no process_vm_readv (ENOSYS), which the unwinder reads other stacks and snapshots with"
  "vdso_sigreturn: qemu's signal trampoline is an anonymous page with no CFI, not the kernel's vDSO (whose CFI says it is a signal frame)"
  "every_thread_is_the_program: qemu runs a thread of its own, listed in /proc/self/task and blocking every signal"
  "seccomp: qemu refuses PR_SET_SECCOMP (EINVAL)"
  "shared_sigq: qemu runs a thread of its own, so unshare(CLONE_NEWUSER) fails (EINVAL) and the queued-signal count is every process's of the user: the test's limit, set just above it, failed to set while the rest of the suite ran (setrlimit -1)"
)

die() {
  echo "aarch64: $*" >&2
  exit 1
}

# apt_private ARGS...: apt-get or apt-cache (first argument) with the
# private arm64 state under $out/apt.
apt_private() {
  local tool=$1
  shift
  "$tool" -o APT::Architecture=arm64 -o APT::Architectures::=arm64 \
    -o Dir::State="$out/apt/state" -o Dir::State::status="$out/apt/status" \
    -o Dir::Cache="$out/apt/cache" \
    -o Dir::Etc::sourcelist="$out/apt/sources.list" \
    -o Dir::Etc::sourceparts="$out/apt/sources.list.d" \
    -o Debug::NoLocking=1 -o APT::Sandbox::User="$(id -un)" "$@"
}

# apt_sources: the private sources list, the machine's own Debian sources
# (as apt sees them) for arm64; its lists fetched once.
apt_sources() {
  mkdir -p "$out/apt/state/lists/partial" "$out/apt/cache/archives/partial" \
    "$out/apt/sources.list.d"
  touch "$out/apt/status"
  have_lists && return 0
  apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
    'Created-By: Packages' 'Origin: Debian' | sort -u |
    while read -r uri release component; do
      echo "deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $release $component"
    done >"$out/apt/sources.list"
  [ -s "$out/apt/sources.list" ] ||
    die "apt knows no Debian source on this machine (run apt-get update); cannot fetch the arm64 packages"
  # apt-get update only warns when a source cannot be reached.
  apt_private apt-get -qq update && have_lists ||
    die "cannot fetch Debian's arm64 package lists (network?) from: $(cat "$out/apt/sources.list")"
}

# have_lists: whether the private state holds package lists.
have_lists() {
  compgen -G "$out/apt/state/lists/*_Packages*" >/dev/null
}

# package_closure: every package in $wanted and what it depends on, short
# of $provided, one per line.
package_closure() {
  local seen=" ${provided[*]} " level=("${wanted[@]}") next p deps
  while [ ${#level[@]} -gt 0 ]; do
    for p in "${level[@]}"; do seen+="$p "; done
    printf '%s\n' "${level[@]}"
    deps=$(apt_private apt-cache depends --no-recommends --no-suggests \
      --no-conflicts --no-breaks --no-replaces --no-enhances "${level[@]}") ||
      return 1
    next=()
    # Every alternative of a dependency, but no virtual package (<name>).
    for p in $(sed -n 's/^ *|\{0,1\}\(Pre\)\{0,1\}Depends: \([^<].*\)/\2/p' \
      <<<"$deps" | sort -u); do
      [[ "$seen" == *" $p "* ]] || { next+=("$p"); seen+="$p "; }
    done
    level=("${next[@]+"${next[@]}"}")
  done
}

# make_sysroot: downloads the packages not yet unpacked and unpacks them.
make_sysroot() {
  local have=$out/sysroot.packages missing=() p deb
  touch "$have"
  for p in "${wanted[@]}"; do
    grep -qx "$p" "$have" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  apt_sources
  mkdir -p "$out/debs" "$sysroot"
  local all
  all=$(package_closure) || die "cannot resolve the arm64 packages' dependencies"
  echo "aarch64: sysroot: fetching $(wc -w <<<"$all") Debian arm64 packages"
  (cd "$out/debs" && apt_private apt-get -qq download $all) ||
    die "cannot download Debian's arm64 packages (network?)"
  for deb in "$out"/debs/*_arm64.deb "$out"/debs/*_all.deb; do
    [ -f "$deb" ] && dpkg-deb -x "$deb" "$sysroot"
  done
  # A .so symlink to an absolute path must lead into the sysroot.
  find "$sysroot" -type l -lname '/*' | while read -r link; do
    ln -sfn "$sysroot$(readlink "$link")" "$link"
  done
  printf '%s\n' $all >"$have"
}

# configure_cross: configures $out once for aarch64 against the sysroot;
# no dependency tracking: a one-shot build.
configure_cross() {
  [ -f "$out/Makefile" ] && return 0
  local libdirs="$sysroot/usr/lib/$triplet:$sysroot/lib/$triplet"
  (cd "$out" && "$top/configure" -q --host=$triplet \
    PKG_CONFIG_LIBDIR="$sysroot/usr/lib/$triplet/pkgconfig:$sysroot/usr/share/pkgconfig" \
    PKG_CONFIG_SYSROOT_DIR="$sysroot" --disable-dependency-tracking \
    LDFLAGS="-L$sysroot/usr/lib/$triplet -Wl,-rpath-link=${libdirs//:/ -Wl,-rpath-link=}") \
    >"$out/configure.log" 2>&1 ||
    { cat "$out/configure.log" >&2; die "configure failed (see $out/config.log)"; }
}

# build_cross: the library and its upper layers' object (which the
# demo's server loads), the demo, the unit tests, the plugins
# check_unwind loads, and gocheck (a host program: go builds for the
# machine it runs on).
build_cross() {
  local targets=(libcpprof.la libcpprof-upper.la examples/jobrunner test/gocheck/gocheck
    test/reuse_plugin_a.la test/reuse_plugin_b.la) t
  for t in "${unit_tests[@]}"; do targets+=("test/$t"); done
  # The generated sources first: make builds BUILT_SOURCES before `all`
  # and `check`, not before targets named on its command line, and a
  # parallel build reached builder.c before profile.pb-c.h existed (once).
  { make -C "$out" -s print-built -f Makefile -f - <<<'print-built: ; @echo $(BUILT_SOURCES)' |
      xargs make -C "$out" &&
    make -C "$out" -j"$(nproc)" "${targets[@]}"; } >"$out/build.log" 2>&1 ||
    { tail -n 30 "$out/build.log" >&2; die "build failed (see $out/build.log)"; }
}

# make_wrappers: $out/qemu/run PROGRAM ARGS runs an arm64 program of the
# build (its libtool wrapper's real binary) under qemu with the sysroot's
# libraries; $out/qemu/jobrunner is the demo so started.
make_wrappers() {
  mkdir -p "$out/qemu"
  cat >"$out/qemu/run" <<EOF
#!/bin/sh
# Generated by test/cross/aarch64.sh: runs an arm64 program under qemu.
prog=\$1
shift
# A libtool wrapper script's program is in .libs beside it.
[ "\$(head -c 4 "\$prog")" = "\$(printf '\\177ELF')" ] ||
    prog=\$(dirname "\$prog")/.libs/\$(basename "\$prog")
exec $qemu -L /usr/$triplet \\
    -E LD_LIBRARY_PATH=$out/.libs:$sysroot/usr/lib/$triplet:$sysroot/lib/$triplet \\
    "\$prog" "\$@"
EOF
  printf '#!/bin/sh\nexec %s %s "$@"\n' "$out/qemu/run" \
    "$out/examples/jobrunner" >"$out/qemu/jobrunner"
  chmod +x "$out/qemu/run" "$out/qemu/jobrunner"
}

# run_test NAME COMMAND...: runs one test from $out, writing
# test/NAME.log and test/NAME.trs; prints PASS or FAIL as make check does,
# and a failed test's last lines on stderr.
# The timeout only keeps a hung test from hanging the run.
run_test() {
  local name=$1 result=PASS
  shift
  (cd "$out" && timeout 600 "$@") >"$out/test/$name.log" 2>&1 || result=FAIL
  echo ":test-result: $result" >"$out/test/$name.trs"
  echo "aarch64: $result: $name"
  [ $result = PASS ] && return 0
  # The failure's own words, where CI's report shows them.
  tail -n 30 "$out/test/$name.log" | sed "s|^|aarch64: $name: |" >&2
  return 1
}

run_tests() {
  local t ran=0 passed=0 tags=() r names=()
  for r in "${excluded_tags[@]}"; do tags+=("${r%%:*}"); done
  # Check's timeouts are for native speed; qemu is several times slower.
  export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-10}
  export CK_EXCLUDE_TAGS="${tags[*]}"
  for t in "${unit_tests[@]}"; do
    ran=$((ran + 1))
    run_test "$t" "$out/qemu/run" "test/$t" && passed=$((passed + 1))
  done
  for t in "${http_tests[@]}"; do
    ran=$((ran + 1))
    run_test "$t" env top_builddir="$out" JOBRUNNER="$out/qemu/jobrunner" \
      "$top/test/$t" && passed=$((passed + 1))
  done
  for r in "${left_out[@]}"; do names+=("${r%%:*}"); done
  echo "aarch64: Check test cases left out by tag (CK_EXCLUDE_TAGS):"
  printf '  %s\n' "${excluded_tags[@]}"
  echo "aarch64: tests left out:"
  printf '  %s\n' "${left_out[@]}"
  echo "aarch64: $ran tests run, $passed passed; ${#left_out[@]} left out: ${names[*]}"
  [ $passed -eq $ran ]
}

command -v aarch64-linux-gnu-gcc >/dev/null ||
  die "aarch64-linux-gnu-gcc missing: apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu"
command -v $qemu >/dev/null || die "$qemu missing: apt-get install qemu-user-static"
[ -x "$top/configure" ] || die "no $top/configure: run autoreconf -fi first"
make_sysroot
configure_cross
build_cross
make_wrappers
mkdir -p "$out/test"
run_tests
