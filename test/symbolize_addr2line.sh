#!/bin/sh
# symbolize_addr2line.sh -- cpprof's symbolizer says what `addr2line -f -i`
# says: function, file, line and the whole inline chain, on 200
# addresses drawn over the code of each of the two generated programs of
# bench/gen_symbolize.sh (a C file with inlined helpers, a template-heavy
# C++ file; small versions, compiled -g -O2 as shared objects), through
# test/symbolize_dump.  Also with DWARF 4, with the debug sections
# compressed (zlib), which cpprof inflates into a memfd for libdw, with
# the debug information in a separate file named by .gnu_debuglink
# (compressed too; without a build id, found by the link's CRC), and without
# debug information (the symbol table's names, no file or line); the line
# tables of the same objects against libdw's (test/check_symlines); the
# inflated copy kept from one session to the next; and the release of
# everything after symbolize_idle_seconds.
set -u
: "${top_builddir:=.}"
srcdir=$(dirname "$0")/..
DUMP=$top_builddir/test/symbolize_dump
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-sym.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# 200 distinct offsets drawn uniformly over the bytes of so's functions,
# each function's last byte left out: the memfd check below looks up each
# offset again one byte on, which must stay in the same function (and
# unit), whatever sequence this awk's rand() gives (mawk's and gawk's
# differ).
sample_addresses() {
    nm --defined-only -S -t d "$1" | awk '
        BEGIN { n = 0 }
        $3 ~ /^[TtWw]$/ && $2 + 0 > 1 {
            start[n] = $1 + 0; size[n] = $2 - 1
            total += size[n]; n++
        }
        END {
            srand(19)
            while (got < 200) {
                at = int(rand() * total)
                for (i = 0; i < n - 1 && at >= size[i]; i++) at -= size[i]
                a = start[i] + at
                if (!(a in seen)) { seen[a] = 1; printf "0x%x\n", a; got++ }
            }
        }'
}

# One line per address of an `-a -f -i` style listing: the function names,
# then the file:line pairs, innermost first ("(discriminator N)" dropped).
per_address() {
    sed -e 's/ (discriminator [0-9]*)$//' | awk '
        function put() { if (started) print names "\t" locs }
        /^0x/ { put(); started = 1; names = locs = ""; odd = 1; next }
        { if (odd) names = names "|" $0; else locs = locs "|" $0; odd = !odd }
        END { put() }'
}

# Compares cpprof's answers with addr2line's.  Where they differ, the
# names must still be addr2line's and file:line llvm-symbolizer's: binutils
# 2.40 gives some rows of a DWARF 5 line table the wrong file (the main
# source at a header's line number, a line the file does not have), which
# libdw and llvm-symbolizer read right.
compare() { # name (tmp/name.so, compiled)
    name=$1
    sample_addresses "$tmp/$name.so" >"$tmp/$name.addrs"
    [ "$(wc -l <"$tmp/$name.addrs")" -eq 200 ] || fail "$name: no addresses"
    addr2line -a -f -i -e "$tmp/$name.so" <"$tmp/$name.addrs" |
        per_address >"$tmp/$name.a2l"
    "$DUMP" "$tmp/$name.so" <"$tmp/$name.addrs" | per_address >"$tmp/$name.got" ||
        fail "$name: symbolize_dump failed"
    if command -v llvm-symbolizer >/dev/null; then
        llvm-symbolizer --obj="$tmp/$name.so" --output-style=GNU \
            --functions=linkage --no-demangle -a -i <"$tmp/$name.addrs" |
            per_address >"$tmp/$name.llvm"
    else
        cp "$tmp/$name.a2l" "$tmp/$name.llvm"
    fi
    [ "$(wc -l <"$tmp/$name.got")" -eq 200 ] || fail "$name: answers missing"
    case $name in *-symtab) min_inlined=0 ;; *) min_inlined=20 ;; esac
    paste "$tmp/$name.addrs" "$tmp/$name.got" "$tmp/$name.a2l" \
        "$tmp/$name.llvm" | awk -F '\t' -v name="$name" -v min="$min_inlined" '
        { if (split($2, f, "|") > 2) inl++ } # names start with "|"
        $2 == $4 && $3 == $5 { same++; next }
        $2 == $4 && $3 == $7 { by_llvm++; next }
        { bad++; print name ": " $1 ": cpprof " $2 " " $3 "; addr2line " \
              $4 " " $5 "; llvm-symbolizer " $7 > "/dev/stderr" }
        END {
            printf "%s: %d addresses as addr2line says, %d with " \
                   "llvm-symbolizer'"'"'s file:line, %d wrong; %d inlined\n",
                name, same, by_llvm, bad, inl
            exit bad > 0 || inl < min
        }' || fail "$name: cpprof differs from addr2line -f -i"
}

# Variants of a compiled object, made with objcopy.
variant() { # from to how
    case $3 in
    compressed) objcopy --compress-debug-sections=zlib "$tmp/$1.so" "$tmp/$2.so" ;;
    debuglink) # the debug information in a file of its own
        objcopy --only-keep-debug "$tmp/$1.so" "$tmp/$2.debug" &&
            objcopy --strip-debug --add-gnu-debuglink="$tmp/$2.debug" \
                "$tmp/$1.so" "$tmp/$2.so" ;;
    debuglink-compressed) # the debug file's sections compressed
        objcopy --only-keep-debug --compress-debug-sections=zlib \
            "$tmp/$1.so" "$tmp/$2.debug" &&
            objcopy --strip-debug --add-gnu-debuglink="$tmp/$2.debug" \
                "$tmp/$1.so" "$tmp/$2.so" ;;
    debuglink-crc) # the same, the object without a build id: the link's
        # CRC is what ties the debug file to it
        objcopy --remove-section=.note.gnu.build-id "$tmp/$1.so" \
            "$tmp/$2.nobid.so" &&
            objcopy --only-keep-debug "$tmp/$2.nobid.so" "$tmp/$2.debug" &&
            objcopy --strip-debug --add-gnu-debuglink="$tmp/$2.debug" \
                "$tmp/$2.nobid.so" "$tmp/$2.so" ;;
    symtab) objcopy --strip-debug "$tmp/$1.so" "$tmp/$2.so" ;;
    esac || fail "$2: objcopy failed"
    case $3 in
    compressed) readelf -S "$tmp/$2.so" | grep -A1 debug_info | grep -q ' C ' ;;
    *) ! readelf -S "$tmp/$2.so" | grep -q debug_info ;;
    esac || fail "$2: not made as meant"
}

sh "$srcdir/bench/gen_symbolize.sh" c 400 >"$tmp/c.c"
sh "$srcdir/bench/gen_symbolize.sh" cxx 3 >"$tmp/cxx.cc"
gcc -g -O2 -shared -fPIC -o "$tmp/c.so" "$tmp/c.c" || fail "c: could not compile"
g++ -g -O2 -shared -fPIC -o "$tmp/cxx.so" "$tmp/cxx.cc" || fail "cxx: could not compile"
g++ -gdwarf-4 -O2 -shared -fPIC -o "$tmp/cxx-dwarf4.so" "$tmp/cxx.cc" ||
    fail "cxx-dwarf4: could not compile"
variant c c-compressed compressed
variant cxx cxx-debuglink debuglink
variant c c-debuglink-crc debuglink-crc
variant cxx cxx-debuglink-compressed debuglink-compressed
readelf -S "$tmp/cxx-debuglink-compressed.debug" | grep -A1 debug_info |
    grep -q ' C ' || fail "cxx-debuglink-compressed: not compressed"
variant c c-symtab symtab
for name in c cxx cxx-dwarf4 c-compressed cxx-debuglink \
    cxx-debuglink-compressed c-debuglink-crc c-symtab; do
    compare $name
done

# A compressed debug file reaches libdw inflated in a memfd (not in the
# heap), which is gone once the session ends; an uncompressed one is read
# as it is.
"$DUMP" "$tmp/cxx-debuglink-compressed.so" memfd <"$tmp/cxx.addrs" \
    2>"$tmp/memfd" >/dev/null || fail "memfd: symbolize_dump failed"
head -n 1 "$tmp/memfd" | grep -q '^memfd: during [1-9][0-9]*, after 0$' ||
    fail "memfd: $(cat "$tmp/memfd") (want an inflated copy, closed after)"
# New addresses in the units decoded: answered without opening libdw.
tail -n 1 "$tmp/memfd" | grep -q '^memfd: during 0, after 0$' ||
    fail "memfd: $(cat "$tmp/memfd") (libdw opened again for decoded units)"
"$DUMP" "$tmp/cxx-debuglink.so" memfd <"$tmp/cxx.addrs" 2>"$tmp/memfd" \
    >/dev/null || fail "memfd: symbolize_dump failed"
[ "$(grep -c '^memfd: during 0, after 0$' "$tmp/memfd")" -eq 2 ] ||
    fail "memfd: $(cat "$tmp/memfd") for an uncompressed debug file"
echo "memfd: a compressed debug file inflated in a memfd, closed after the session, not opened again for decoded units"

# An inflated copy is kept for the next session that needs libdw on the
# same file (inflating glibc's debug file again was most of what
# scrapes cost), and a descriptor the program took over meanwhile (a
# daemon closing every descriptor) is never read or closed: an object of
# two units, compressed, one unit per session.
cat >"$tmp/unit_a.c" <<'EOF2'
int unit_a(int x) { return x * 3 + 1; }
EOF2
cat >"$tmp/unit_b.c" <<'EOF2'
int unit_b(int x) { return x * 5 + 2; }
EOF2
cc -g -O2 -shared -fPIC -o "$tmp/two-units.so" "$tmp/unit_a.c" "$tmp/unit_b.c" &&
    objcopy --compress-debug-sections=zlib "$tmp/two-units.so" ||
    fail "reuse: cannot build the two-unit object"
nm "$tmp/two-units.so" | awk '$3 == "unit_a" { print $1 } $3 == "unit_b" { print "next"; print $1 }' \
    >"$tmp/two-units.addrs"
"$DUMP" "$tmp/two-units.so" reuse <"$tmp/two-units.addrs" 2>"$tmp/reuse" \
    >/dev/null || fail "reuse: symbolize_dump failed: $(cat "$tmp/reuse")"
grep -q '^reuse: 1 kept; the second session read the kept copy$' "$tmp/reuse" ||
    fail "reuse: $(cat "$tmp/reuse")"
"$DUMP" "$tmp/two-units.so" reuse-closed <"$tmp/two-units.addrs" \
    2>"$tmp/reuse" >/dev/null || fail "reuse-closed: symbolize_dump failed: $(cat "$tmp/reuse")"
grep -q '^closed: the second session inflated another copy (1 mapped); the program.s descriptors untouched$' \
    "$tmp/reuse" || fail "reuse-closed: $(cat "$tmp/reuse")"
echo "reuse: the inflated copy kept for the next session; a descriptor taken over by the program left alone"

# A debug file whose CRC is not the link's is not the object's: unused.
printf x >>"$tmp/c-debuglink-crc.debug"
"$DUMP" "$tmp/c-debuglink-crc.so" <"$tmp/c.addrs" >"$tmp/stale" ||
    fail "stale: symbolize_dump failed"
! grep -v '^??:0$' "$tmp/stale" | grep -q ':[0-9]*$' ||
    fail "stale: lines from a debug file whose CRC differs"
echo "stale: a debug file with another CRC is not read"

# An object without debug information anywhere: the symbolizer looks on
# disk only, never through debuginfod (whose client would load libcurl
# into the host and fetch from the network).
DEBUGINFOD_URLS=http://127.0.0.1:9 LD_DEBUG=files "$DUMP" "$tmp/c-symtab.so" \
    <"$tmp/c-symtab.addrs" 2>"$tmp/loaded" >/dev/null ||
    fail "debuginfod: symbolize_dump failed"
grep -q 'c-symtab.so' "$tmp/loaded" ||
    fail "debuginfod: LD_DEBUG shows no objects loaded"
! grep -q libdebuginfod "$tmp/loaded" ||
    fail "debuginfod: the debuginfod client was loaded"
echo "debuginfod: not loaded for an object without debug files"

# cpprof's line tables are libdw's, on each kind of object.
"$top_builddir/test/check_symlines" "$tmp/c.so" "$tmp/cxx.so" \
    "$tmp/cxx-dwarf4.so" "$tmp/c-compressed.so" "$tmp/cxx-debuglink.debug" ||
    fail "line tables differ from libdw's"

# Left idle, the symbolizer lets go of everything, and answers the same
# when asked again (the object opened anew).
CPPROF_SYMBOLIZE_IDLE_SECONDS=1 "$DUMP" "$tmp/cxx.so" release \
    <"$tmp/cxx.addrs" >"$tmp/twice" || fail "release: symbolize_dump failed"
half=$(($(wc -l <"$tmp/twice") / 2))
head -n $half "$tmp/twice" >"$tmp/first"
tail -n $half "$tmp/twice" >"$tmp/second"
[ $half -gt 200 ] && cmp -s "$tmp/first" "$tmp/second" ||
    fail "release: the answers after the release differ"
echo "release: after an idle second, all let go and the same answers again"
