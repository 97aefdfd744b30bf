#!/bin/sh
# allocators.sh -- cpprof beside the program's own allocator.
# For jemalloc, tcmalloc and mimalloc (and glibc's malloc), test/alloc_mix
# checks every entry point's block against the allocator's own counts,
# mixes the allocator's API with the standard one and runs the demo's
# pattern:
#   - preloaded after cpprof: it runs clean, the allocator still serves
#     every block, and the heap profile has the program's allocations
#     (keep_live's 16 MiB);
#   - preloaded before cpprof: it runs clean, stderr, /heap, /allocs and the
#     index say why there is no heap profile;
#   - linked -lcpprof before the allocator: it runs clean, on that
#     allocator;
#   - a program that calls only malloc and free, linked -lcpprof then the
#     allocator with gcc's --as-needed: as cpprof.pc's Libs line writes it
#     and in README's hand-written form, the allocator stays in the
#     executable's NEEDED (without either it is dropped, checked too: cpprof
#     defines malloc, so the allocator looks unneeded);
#   - CPPROF_HEAP_INTERPOSE=0: nothing tracked, and the heap endpoint says
#     so.
set -u
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER (the sanitizer's allocator owns the heap)" >&2
    exit 77 ;;
esac
. "$(dirname "$0")/http_lib.sh"
PRELOAD=$top_builddir/.libs/libcpprof.so
MIX=$top_builddir/test/alloc_mix
libdir=$(dirname "$(gcc -print-file-name=libc.so.6)")
[ -f "$PRELOAD" ] || fail "no $PRELOAD"

lib_of() {
    case $1 in
    glibc) echo "" ;;
    jemalloc) echo "$libdir/libjemalloc.so.2" ;;
    tcmalloc) echo "$libdir/libtcmalloc_minimal.so.4" ;;
    mimalloc) echo "$libdir/libmimalloc.so.2" ;;
    esac
}

# run_mix LD_PRELOAD ALLOCATOR [HOLD]: runs alloc_mix in the foreground.
run_mix() {
    LD_PRELOAD=$1 "$MIX" "$2" ${3:-} >"$tmp/mix.out" 2>"$tmp/mix.err" ||
        fail "alloc_mix $2 with LD_PRELOAD=$1: status $?: $(cat "$tmp/mix.err")"
    grep -qx "ok $2" "$tmp/mix.out" || fail "alloc_mix $2: no ok line"
}

# serve_mix LD_PRELOAD ALLOCATOR: runs alloc_mix holding for 8 s with the
# server on a free port, and waits until it holds keep_live's blocks; sets
# $base and $demo_pid.
serve_mix() {
    mix_preload=$1 mix_allocator=$2
    serve_on_free_port "alloc_mix $2" "$tmp/mix.err" launch_mix mix_holding
}
launch_mix() {
    LD_PRELOAD=$mix_preload CPPROF_HTTP=127.0.0.1:$port \
        "$MIX" "$mix_allocator" 8 >"$tmp/mix.out" 2>"$tmp/mix.err" &
}
mix_holding() {
    grep -qx holding "$tmp/mix.out" && answers_index
}

# stop_mix ALLOCATOR: the run must end by itself, clean.
stop_mix() {
    wait "$demo_pid" || fail "alloc_mix $1 (served): status $?: $(cat "$tmp/mix.err")"
    demo_pid=
    grep -qx "ok $1" "$tmp/mix.out" || fail "alloc_mix $1 (served): no ok line"
}

# expect_declined ALLOCATOR WHY: stderr once, /heap and /allocs 501 and the
# index (JSON and HTML) with the reason WHY (a fixed string).
expect_declined() {
    [ "$(grep -c 'cpprof: no heap profile' "$tmp/mix.err")" = 1 ] ||
        fail "$1: stderr does not say once why there is no heap profile: $(cat "$tmp/mix.err")"
    grep -qF "$2" "$tmp/mix.err" || fail "$1: stderr lacks \"$2\""
    for p in heap allocs; do
        code=$(fetch "$p" "$base/$p")
        [ "$code" = 501 ] || fail "$1: /$p answered $code, not 501"
        grep -qF "$2" "$tmp/$p.body" || fail "$1: /$p says $(cat "$tmp/$p.body")"
    done
    fetch index "$base/?format=json" >/dev/null
    jq -e --arg why "$2" '.profiles[] | select(.name == "heap") |
        (.unavailable | contains($why)) and .count == null' \
        "$tmp/index.body" >/dev/null || fail "$1: index JSON: $(cat "$tmp/index.body")"
    fetch page "$base/" >/dev/null
    grep -qF "Not available: " "$tmp/page.body" ||
        fail "$1: the index page does not say why"
}

# link_plain ALLOCATOR: the program that calls only malloc and free,
# linked three ways after an explicit --as-needed (gcc's default on
# Debian, explicit so that the control holds under any gcc).
printf '#include <stdlib.h>\nint main(void) { free(malloc(64)); return 0; }\n' \
    >"$tmp/plain.c"
pc_libs=$(sed -n 's/^Libs: //p' "$top_builddir/cpprof.pc" |
    sed "s|\${libdir}|$top_builddir/.libs|")
[ -n "$pc_libs" ] || fail "no Libs line in $top_builddir/cpprof.pc"
link_plain() {
    soname=$(basename "$(lib_of "$1")")
    name=$(echo "$soname" | sed 's/^lib//; s/\.so.*//')
    for form in control pc hand; do
        case $form in
        control) flags="-L$top_builddir/.libs -lcpprof -l$name" ;;
        pc) flags="$pc_libs -l$name" ;;
        hand) flags="-L$top_builddir/.libs -lcpprof -Wl,--push-state,--no-as-needed -l$name -Wl,--pop-state" ;;
        esac
        # shellcheck disable=SC2086
        ${CC:-gcc} -o "$tmp/plain_$form" "$tmp/plain.c" -Wl,--as-needed $flags ||
            fail "$1: cannot link $flags"
        needed=$(readelf -d "$tmp/plain_$form" | grep -c "NEEDED.*\[$soname\]")
        case $form/$needed in
        control/0 | pc/1 | hand/1) ;;
        control/*) fail "$1: $soname kept without --no-as-needed: the check cannot see a drop" ;;
        *) fail "$1: $soname dropped from a program linked $flags" ;;
        esac
        LD_LIBRARY_PATH=$top_builddir/.libs "$tmp/plain_$form" ||
            fail "$1: the program linked $flags exits $?"
    done
    echo "ok: $1 stays linked after cpprof ($pc_libs -l$name; README's form)"
}

for a in glibc jemalloc tcmalloc mimalloc; do
    lib=$(lib_of $a)
    [ -z "$lib" ] || [ -f "$lib" ] || fail "no $lib"
    # Without cpprof: the baseline the other runs must match.
    run_mix "$lib" $a
    # cpprof first, the allocator behind it: every call reaches it, and
    # the heap profile holds keep_live's blocks.
    run_mix "$PRELOAD${lib:+:$lib}" $a
    serve_mix "$PRELOAD${lib:+:$lib}" $a
    code=$(fetch heap "$base/heap")
    [ "$code" = 200 ] || fail "$a: /heap answered $code: $(cat "$tmp/heap.body")"
    "$GOCHECK" -frames "$tmp/heap.body" >"$tmp/heap.check" ||
        fail "$a: google/pprof rejects the heap profile"
    grep -q '^frame keep_live ' "$tmp/heap.check" ||
        fail "$a: the heap profile lacks keep_live: $(cat "$tmp/heap.check")"
    grep -q 'no heap profile' "$tmp/mix.err" && fail "$a: declined: $(cat "$tmp/mix.err")"
    stop_mix $a
    echo "ok: $a behind cpprof, heap profile with keep_live"
    [ -n "$lib" ] || continue
    # The allocator first: cpprof stays out of the way and says so.
    serve_mix "$lib:$PRELOAD" $a
    expect_declined $a "defined in $lib, which comes before cpprof"
    stop_mix $a
    echo "ok: $a before cpprof, declined with the reason"
    # Linked -lcpprof before the allocator.
    "$top_builddir/test/alloc_mix_$a" $a >"$tmp/mix.out" 2>"$tmp/mix.err" ||
        fail "alloc_mix_$a (linked): status $?: $(cat "$tmp/mix.err")"
    grep -qx "ok $a" "$tmp/mix.out" || fail "alloc_mix_$a: no ok line"
    echo "ok: linked -lcpprof -l$a"
    link_plain $a
done

# The setting turns the interposer off: nothing tracked, and the reason.
export CPPROF_HEAP_INTERPOSE=0
serve_mix "$PRELOAD" glibc
unset CPPROF_HEAP_INTERPOSE
expect_declined off "turned off by CPPROF_HEAP_INTERPOSE=0"
stop_mix glibc
echo "ok: CPPROF_HEAP_INTERPOSE=0"
