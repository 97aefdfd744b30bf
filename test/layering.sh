#!/bin/sh
# layering.sh -- cpprof's modules include and call each other one way, in
# the order docs/ARCHITECTURE.md's "Layers" section lists (test/layering.py
# says how), and the collectors that run inside the program's malloc,
# pthread_mutex_lock and pthread_create compile against no HTTP or TLS
# header.  It reads the source and the library's objects, so the normal
# build runs it and the sanitized builds skip it (the same source).
set -u
: "${top_builddir:=.}" "${srcdir:=.}"
[ "${CPPROF_SANITIZER:-none}" = none ] || {
    echo "SKIP: a check of the source, made by the normal build"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
python3 "$srcdir/test/layering.py" "$srcdir/src" \
    "$srcdir/docs/ARCHITECTURE.md" "$top_builddir/src" || exit 1

flags=$(MAKEFLAGS= MAKELEVEL= make -s --no-print-directory -C "$top_builddir" \
    -f Makefile -f - print-flags <<'MK'
print-flags: ; @echo $(DEFS) $(AM_CPPFLAGS) $(CPPFLAGS) $(DEP_CFLAGS)
MK
) || { echo "FAIL: cannot read the build's flags"; exit 1; }
rc=0
for f in heap contention threadcreate; do
    headers=$(cd "$top_builddir" && eval gcc -std=gnu11 $flags -E -H \
        "$srcdir/src/$f.c" 2>&1 >/dev/null | grep -E 'microhttpd|gnutls')
    if [ -n "$headers" ]; then
        echo "FAIL: src/$f.c compiles against $(echo "$headers" | head -n 3)"
        rc=1
    else
        echo "src/$f.c: no libmicrohttpd or GnuTLS header"
    fi
done
# The lower layers' functions the upper ones call: the renames in
# upper_uses.h and the aliases made where they are defined (UPPER_CALLS,
# upper_calls.h) name the same functions.  A missing alias fails the link;
# this finds one nothing calls any more.
renamed=$(sed -n 's/^#define \([a-z_0-9]*\) cpprof__\1$/\1/p' \
    "$srcdir/src/upper_uses.h" | sort)
aliased=$(cat "$srcdir"/src/*.c |
    sed -n 's/^UPPER_CALLS(\([a-z_0-9]*\));$/\1/p' | sort)
if [ "$renamed" != "$aliased" ]; then
    echo "FAIL: upper_uses.h and the UPPER_CALLS lines differ:" \
        "renamed only: $(echo "$renamed" | grep -vxF -e "$aliased" | tr '\n' ' ')" \
        "aliased only: $(echo "$aliased" | grep -vxF -e "$renamed" | tr '\n' ' ')"
    rc=1
else
    echo "upper_uses.h: $(echo "$renamed" | wc -l) functions, each with its UPPER_CALLS"
fi
exit $rc
