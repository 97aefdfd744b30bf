#!/bin/sh
# signal_safe.sh -- everything a signal handler of cpprof's reaches is
# marked SIGNAL-SAFE and calls only async-signal-safe library functions
# (test/signal_safe.py says how).  It compiles src/*.c once more at -O0
# with gcc's -fcallgraph-info, with the build's own preprocessor flags, and
# hands the call graph to the checker.  It reads source, so the normal
# build runs it and the sanitized builds skip it (the same source).
set -u
: "${top_builddir:=.}" "${srcdir:=.}"
[ "${CPPROF_SANITIZER:-none}" = none ] || {
    echo "SKIP: a check of the source, made by the normal build"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-sigsafe.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
flags=$(MAKEFLAGS= MAKELEVEL= make -s --no-print-directory -C "$top_builddir" \
    -f Makefile -f - print-flags <<'MK'
print-flags: ; @echo $(DEFS) $(AM_CPPFLAGS) $(CPPFLAGS) $(DEP_CFLAGS)
MK
) || { echo "FAIL: cannot read the build's flags"; exit 1; }
for f in "$srcdir"/src/*.c; do
    b=$(basename "$f" .c)
    # Each unit as the library builds it, but with no inlining to hide a
    # call; the otel TLS-descriptor unit needs its dialect.
    (cd "$top_builddir" && eval gcc -std=gnu11 -O0 -pthread $flags \
        -fcallgraph-info -c "$f" -o "$tmp/$b.o") || {
        echo "FAIL: $f does not compile for the call graph"; exit 1; }
done
# gcc writes each unit's graph beside its object.
exec python3 "$srcdir/test/signal_safe.py" "$srcdir/src" "$tmp"/*.ci
