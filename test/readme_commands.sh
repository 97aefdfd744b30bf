#!/bin/sh
# readme_commands.sh -- README's quick start, run as written: its demo
# command in this source tree, whose build exists by then, so that it runs
# the demo; go tool pprof's table by tenant must name the three tenants,
# and its goroutine table parked tasks.  test/suite.sh runs it after make
# check, outside it: the quick start builds in ./build itself, which make
# check must not race.
# (README's install commands are test/dist.sh's: the "From git" one is
# autoreconf -fi and the tarball's, which it builds and installs, and
# test/install_consumers.sh runs the "Use it in your build" commands, the
# CMake and Meson lines and the API examples against that install.)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/test/readme_lib.sh"
README=$src/README
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

demo=$(readme_block "$README" "Quick start (Debian 12)" 1)
(cd "$src" && sh -ec "$demo") >"$tmp/demo.out" 2>&1 ||
    { cat "$tmp/demo.out" >&2; fail "README's quick start fails: $demo"; }
for tenant in acme globex initech; do
    grep -Eq "[0-9]%\): $tenant\$" "$tmp/demo.out" ||
        { cat "$tmp/demo.out" >&2; fail "$demo: no CPU share for $tenant"; }
done
grep -Eq "[0-9]%\): parked\$" "$tmp/demo.out" ||
    { cat "$tmp/demo.out" >&2; fail "$demo: no parked tasks in the goroutine profile"; }
echo "ok: $demo shows the CPU time of acme, globex and initech, and parked tasks"
