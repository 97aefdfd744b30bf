#!/bin/sh
# layering.sh -- cpprof's modules include and call each other one way, in
# the order docs/ARCHITECTURE.md's "Layers" section lists (test/layering.py
# says how), and no unit of libcpprof.so (the lower layers and the upper
# object's forwarders, linked to the C library alone) compiles against a
# libmicrohttpd or GnuTLS header: those are the upper object's.  It reads the source and the library's objects, so the normal
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
units=$(MAKEFLAGS= MAKELEVEL= make -s --no-print-directory -C "$top_builddir" \
    -f Makefile -f - print-units <<'MK'
print-units: ; @echo $(lower_sources) $(libcpprof_la_SOURCES)
MK
) || { echo "FAIL: cannot read libcpprof.so's units"; exit 1; }
rc=0 n=0
for f in $units; do
    case $f in *.c) ;; *) continue ;; esac
    n=$((n + 1))
    # With the upper object's include paths too: a unit must not reach
    # those headers even where the compiler would find them.
    headers=$(cd "$top_builddir" && eval gcc -std=gnu11 $flags -E -H \
        "$srcdir/$f" 2>&1 >/dev/null | grep -E 'microhttpd|gnutls')
    if [ -n "$headers" ]; then
        echo "FAIL: $f, a unit of libcpprof.so, compiles against $(echo "$headers" | head -n 3)"
        rc=1
    fi
done
[ "$n" -gt 40 ] || { echo "FAIL: only $n units of libcpprof.so found"; exit 1; }
[ "$rc" = 1 ] || echo "libcpprof.so: none of its $n units sees a libmicrohttpd or GnuTLS header"
# The lower layers' functions the upper ones call: the renames in
# object_uses.h and the aliases made where they are defined (UPPER_CALLS,
# upper_calls.h) name the same functions.  A missing alias fails the link;
# this finds one nothing calls any more.
renamed=$(sed -n 's/^#define \([a-z_0-9]*\) cpprof__\1$/\1/p' \
    "$srcdir/src/upper/object_uses.h" | sort)
aliased=$(cat "$srcdir"/src/*.c |
    sed -n 's/^UPPER_CALLS(\([a-z_0-9]*\));$/\1/p' | sort)
if [ "$renamed" != "$aliased" ]; then
    echo "FAIL: object_uses.h and the UPPER_CALLS lines differ:" \
        "renamed only: $(echo "$renamed" | grep -vxF -e "$aliased" | tr '\n' ' ')" \
        "aliased only: $(echo "$aliased" | grep -vxF -e "$renamed" | tr '\n' ' ')"
    rc=1
else
    echo "object_uses.h: $(echo "$renamed" | wc -l) functions, each with its UPPER_CALLS"
fi
exit $rc
