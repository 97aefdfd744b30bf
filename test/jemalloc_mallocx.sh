#!/bin/sh
# jemalloc_mallocx.sh -- a program on jemalloc that allocates through
# mallocx and frees through sdallocx (test/jemalloc_mallocx; BIND 9's named
# does), which never reach cpprof's malloc.  heap and allocs must either
# show those allocations (keep_live_x) or say they are not seen: in the
# proto's comments (pprof -comments), in the debug=1 text, in the index
# (JSON "partial", the page) and once on stderr.  Never a 200 that is
# silently empty.
set -u
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER (the sanitizer's allocator owns the heap)" >&2
    exit 77 ;;
esac
. "$(dirname "$0")/http_lib.sh"

start_program "$top_builddir/test/jemalloc_mallocx"
reason='mallocx, rallocx, xallocx, sdallocx and dallocx'
for p in heap allocs; do
    code=$(fetch "$p" "$base/$p")
    [ "$code" = 200 ] || fail "/$p answered $code: $(cat "$tmp/$p.body")"
    if "$GOCHECK" -frames "$tmp/$p.body" | grep -q '^frame keep_live_x '; then
        echo "ok: /$p shows keep_live_x"
        continue
    fi
    "$PPROF" -raw "$tmp/$p.body" 2>/dev/null | grep -qF "$reason" ||
        fail "/$p: no keep_live_x and no word of mallocx: $("$PPROF" -raw "$tmp/$p.body" 2>&1 | head -20)"
    code=$(fetch "$p.txt" "$base/$p?debug=1")
    grep -qF "$reason" "$tmp/$p.txt.body" ||
        fail "/$p?debug=1 does not say mallocx is unseen: $(tail -12 "$tmp/$p.txt.body")"
    echo "ok: /$p says mallocx is not seen"
done
fetch index "$base/?format=json" >/dev/null
jq -e --arg why "$reason" '.profiles[] | select(.name == "heap") |
    (.partial // "" | contains($why))' "$tmp/index.body" >/dev/null ||
    fail "the index does not say heap is partial: $(jq -c '.profiles[] | select(.name == "heap")' "$tmp/index.body")"
fetch page "$base/" >/dev/null
grep -qF "Partial: " "$tmp/page.body" || fail "the index page does not say heap is partial"
said=$(grep -c "$reason" "$tmp/demo.err")
[ "$said" = 1 ] || fail "stderr says it $said times, not once: $(cat "$tmp/demo.err")"
echo "ok: the index and stderr (once) say so"
kill -TERM "$demo_pid"
wait "$demo_pid" || fail "the program exited with status $?: $(cat "$tmp/demo.err")"
demo_pid=
echo "jemalloc_mallocx: ok"
