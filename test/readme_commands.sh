#!/bin/sh
# readme_commands.sh -- README's quick start and install commands, run as
# written.  `./setup.sh test` runs it last, outside `make check`
# (the quick start builds in ./build itself, which make check must not
# race):
#   - the quick start's demo command in this source tree (its build exists
#     by then, so it runs the demo): go tool pprof's table by tenant must
#     name the three tenants, and its goroutine table parked tasks;
#   - the "From git" install command in a fresh `git clone` of this tree,
#     with one substitution, said here: `sudo` is a stand-in that runs
#     `make install DESTDIR=<temporary directory>`, so that a test never
#     installs into the machine; then a program is built against that
#     install with README's first "Use it in your build" command and run.
#     Its configure starts from the answers of ./build's (a CONFIG_SITE
#     reading build/config.cache, where there is one): the same machine's
#     answers, and configure from nothing is the normal build's and
#     configure_deps.sh's to test, so that the clone saves libtool's
#     hundred probes (30-50 s of CPU).
# (The "Use it in your build" commands, the CMake and Meson lines and the
# API examples are run against an install of the release tarball by
# test/dist.sh and test/install_consumers.sh.)
# The tarball form of the install command is the git form's tail
# (./configure && make && sudo make install) and is not run separately.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/test/readme_lib.sh"
README=$src/README
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --- Quick start -------------------------------------------------------------
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

# --- Install from git, in a fresh clone -----------------------------------------
install=$(readme_block "$README" "Install" 2)
git clone -q "$src" "$tmp/clone" || fail "cannot clone $src"
mkdir "$tmp/shim"
cat >"$tmp/shim/sudo" <<'SHIM'
#!/bin/sh
# README's `sudo make install`, staged into $STAGE instead of the machine.
[ "$#" -ge 2 ] && [ "$1" = make ] && [ "$2" = install ] ||
    { echo "sudo stand-in: expected 'make install', got: $*" >&2; exit 1; }
shift 2
exec make install DESTDIR="$STAGE" "$@"
SHIM
chmod +x "$tmp/shim/sudo"
site=
[ -f "$src/build/config.cache" ] && {
    site=$tmp/config.site
    echo ". '$src/build/config.cache'" >"$site"
}
(cd "$tmp/clone" && PATH=$tmp/shim:$PATH STAGE=$tmp/stage CONFIG_SITE=${site:-} \
    MAKEFLAGS=-j"$(nproc)" sh -ec "$install") >"$tmp/install.out" 2>&1 ||
    { tail -30 "$tmp/install.out" >&2; fail "README's install fails: $install"; }
lib=$tmp/stage/usr/local/lib
for f in "$lib/libcpprof.so" "$lib/pkgconfig/cpprof.pc" \
    "$tmp/stage/usr/local/include/cpprof.h"; do
    [ -f "$f" ] || fail "$install did not install ${f#$tmp/stage}"
done
echo "ok: $install (from a fresh clone, staged)"

use=$(readme_block "$README" "Use it in your build" 1)
mkdir "$tmp/app"
cat >"$tmp/app/app.c" <<'APP'
#include <cpprof.h>
#include <stdio.h>
int main(void)
{
    const char *kv[] = {"tenant", "acme"};
    cpprof_labelset *set;
    int rc = cpprof_labels(&set, 2, kv);
    if (rc != 0) {
        fprintf(stderr, "%s\n", cpprof_strerror(rc));
        return 1;
    }
    cpprof_labelset_release(set);
    puts("linked");
    return 0;
}
APP
(cd "$tmp/app" && PKG_CONFIG_PATH=$lib/pkgconfig \
    PKG_CONFIG_SYSROOT_DIR=$tmp/stage sh -ec "$use") >"$tmp/use.out" 2>&1 ||
    { cat "$tmp/use.out" >&2; fail "README's build command fails: $use"; }
[ "$(LD_LIBRARY_PATH=$lib "$tmp/app/app")" = linked ] ||
    fail "a program built with '$use' does not run"
echo "ok: $use builds and runs against that install"
