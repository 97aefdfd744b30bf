#!/bin/sh
# dist.sh -- the release tarball's tree is complete, builds and installs:
#   - `make distdir` holds every file git tracks but .gitignore (a file the
#     build, the tests or the demo need and Makefile.am does not name is
#     missing from the tarball; checked where the source is a git tree);
#   - README's "From git" command is `autoreconf -fi && ` and the tarball's
#     command: the files git tracks, alone, autoreconf'd, give every file
#     of the tarball (one that neither git nor autoreconf has, a file never
#     added, builds here and fails in a clone), so that the tarball's build
#     below stands for the clone's too, and the suite builds cpprof from
#     its sources once, not twice (where the source is a git tree);
#   - that tree, read-only as `make distcheck` leaves it, configures in a
#     directory of its own, builds (the libraries and the demo) and
#     installs with README's command for a prefix outside the loader's
#     path ("Install", block 3: configure is run from the build directory,
#     and HOME is a temporary directory);
#   - test/install_consumers.sh builds and runs consumers against that
#     install.
# `make distdir` rather than `make dist`: the same files, without
# compressing them and unpacking them again.  configure starts from the
# answers of this build's (config.cache, where there is one, without the
# variables given to it): the same machine's answers, and configure from
# nothing is configure_deps.sh's to test; and under dash where there is
# one, which spares it a third of its CPU time.
set -u
: "${top_builddir:=.}" "${srcdir:=.}"
top_builddir=$(cd "$top_builddir" && pwd)
srcdir=$(cd "$srcdir" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-dist.XXXXXX")
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$srcdir/test/readme_lib.sh"

# Sanitizer builds: the tarball builds without the sanitizer, as the normal
# build's run of this test already shows, and a consumer built without it
# could not load an instrumented libcpprof.so.
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER" >&2; exit 77 ;;
esac

# The parent make's jobserver is closed to tests: this make has its own.
unset MAKEFLAGS MFLAGS
jobs=$(nproc)

# from_git: the tracked files, copied out of the tarball, and README's
# "From git" command up to the tarball's: every file of the tarball there.
from_git() {
    tarball_cmd=$(readme_block "$srcdir/README" Install 1) &&
        git_cmd=$(readme_block "$srcdir/README" Install 2) || exit 1
    [ "$git_cmd" = "autoreconf -fi && $tarball_cmd" ] ||
        fail "README's \"From git\" command is no longer autoreconf -fi and the tarball's ($tarball_cmd): $git_cmd"
    mkdir "$tmp/git" &&
        (cd "$dist" && tar -cf - -T "$tmp/tracked") | (cd "$tmp/git" && tar -xf -) ||
        fail "cannot copy the tracked files"
    (cd "$tmp/git" && autoreconf -fi) >"$tmp/autoreconf.out" 2>&1 ||
        { cat "$tmp/autoreconf.out" >&2; fail "autoreconf -fi fails on the tracked files"; }
    (cd "$tmp/git" && find . -type f | sed 's|^\./||' | sort) >"$tmp/from_git"
    comm -23 "$tmp/shipped" "$tmp/from_git" >"$tmp/not_from_git"
    [ -s "$tmp/not_from_git" ] && {
        sed 's/^/  /' "$tmp/not_from_git" >&2
        fail "the tarball holds $(wc -l <"$tmp/not_from_git") files that neither git tracks nor autoreconf -fi makes (listed above): a clone lacks them"
    }
    echo "autoreconf -fi on the tracked files gives every file of the tarball"
}

dist=$tmp/cpprof
make -s -C "$top_builddir" distdir distdir="$dist" >"$tmp/distdir.out" 2>&1 ||
    { cat "$tmp/distdir.out" >&2; fail "make distdir failed"; }

if git -C "$srcdir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$srcdir" ls-files | grep -Fvx .gitignore | sort >"$tmp/tracked"
    (cd "$dist" && find . -type f | sed 's|^\./||' | sort) >"$tmp/shipped"
    comm -23 "$tmp/tracked" "$tmp/shipped" >"$tmp/missing"
    [ -s "$tmp/missing" ] && {
        sed 's/^/  /' "$tmp/missing" >&2
        fail "make distdir leaves out $(wc -l <"$tmp/missing") tracked files (listed above): name them in Makefile.am"
    }
    echo "the tarball holds all $(wc -l <"$tmp/tracked") tracked files"
    from_git
else
    echo "not a git tree: the tarball's list is not compared"
fi
chmod -R a-w "$dist"

export HOME=$tmp/home
mkdir -p "$HOME" "$tmp/build"
install=$(readme_block "$srcdir/README" Install 3) || exit 1
case $install in
./configure\ *) ;;
*) fail "README's install command for a prefix no longer starts with ./configure: $install" ;;
esac
[ -f "$top_builddir/config.cache" ] &&
    grep -v '^ac_cv_env_' "$top_builddir/config.cache" >"$tmp/config.site"
shell=$(command -v dash || echo /bin/sh)
(cd "$tmp/build" && CONFIG_SITE=$tmp/config.site CONFIG_SHELL=$shell MAKEFLAGS=-j$jobs \
    sh -ec "$dist/${install#./}") >"$tmp/build.out" 2>&1 ||
    { tail -40 "$tmp/build.out" >&2; fail "the tarball's tree does not build and install: $install"; }
prefix=$(sed -n 's/^prefix=//p' "$tmp/build/cpprof.pc")
[ -f "$prefix/lib/libcpprof.so" ] && [ -f "$prefix/lib/cpprof/libcpprof-upper.so" ] ||
    fail "$install did not install libcpprof.so and libcpprof-upper.so in $prefix"
[ -x "$tmp/build/examples/jobrunner" ] || fail "the tarball's tree does not build the demo"
echo "the tarball's tree builds out of its tree and installs: $install"

export top_builddir srcdir
sh "$srcdir/test/install_consumers.sh" "$prefix"
