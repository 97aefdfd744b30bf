#!/bin/sh
# chroot_noproc.sh -- a daemon that jails itself where there is no /proc
# after starting the server (test/chroot_noproc; unbound as Debian
# configures it).  No frame can be named there, nor can code loaded since be
# walked, so every endpoint of stacks either gives true data or declines
# with the reason; none answers 200 with nameless one-frame stacks:
#   - goroutine, profile, heap, allocs, block, mutex, threadcreate (whole,
#     as text and as a delta): a 200 must name the program's frames,
#     anything else must say "a chroot without /proc";
#   - the index (JSON) marks each of them unavailable with that reason;
#   - stderr says so once over all the requests.
# As root it chroots itself; otherwise in a user namespace of its own
# (unshare -r), where it may.
set -u
. "$(dirname "$0")/http_lib.sh"

PROG=$top_builddir/test/chroot_noproc
mkdir "$tmp/jail"
if [ "$(id -u)" = 0 ]; then
    start_program "$PROG" "$tmp/jail"
elif unshare -r true 2>/dev/null; then
    printf '#!/bin/sh\nexec unshare -r "%s" "$@"\n' "$PROG" >"$tmp/jailed"
    chmod +x "$tmp/jailed"
    start_program "$tmp/jailed" "$tmp/jail"
else
    echo "SKIP: neither root nor allowed a user namespace: cannot chroot" >&2
    exit 77
fi

reason='a chroot without /proc'
n=0
for p in goroutine 'profile?seconds=1' heap allocs block mutex threadcreate \
    'heap?debug=1' 'allocs?seconds=1' 'threadcreate?debug=1'; do
    n=$((n + 1))
    code=$(fetch "e$n" "$base/$p")
    if [ "$code" = 200 ]; then
        case $p in
        *debug=*) grep -q 'keep_live\|contender\|main' "$tmp/e$n.body" ;;
        *) "$GOCHECK" -frames "$tmp/e$n.body" | grep -q '^frame \(keep_live\|contender\|main\) ' ;;
        esac || fail "/$p answered 200 without the program's frames: $(head -c 400 "$tmp/e$n.body")"
    else
        # Under ASan the heap profiles decline first for the sanitizer's
        # allocator: a stated decline all the same.
        grep -qF "$reason" "$tmp/e$n.body" ||
            { [ "$code" = 501 ] && grep -q '^no heap profile: ' "$tmp/e$n.body"; } ||
            fail "/$p answered $code without the reason: $(cat "$tmp/e$n.body")"
    fi
    echo "ok: /$p: $code"
done
fetch index "$base/?format=json" >/dev/null
for p in goroutine profile heap allocs block mutex threadcreate; do
    jq -e --arg p "$p" --arg why "$reason" '.profiles[] | select(.name == $p) |
        (.unavailable // "" | contains($why))' "$tmp/index.body" >/dev/null ||
        fail "the index does not mark $p unavailable: $(jq -c --arg p "$p" '.profiles[] | select(.name == $p)' "$tmp/index.body")"
done
echo "ok: the index marks every profile of stacks unavailable"
said=$(grep -c "$reason" "$tmp/demo.err")
[ "$said" = 1 ] || fail "stderr says it $said times, not once: $(cat "$tmp/demo.err")"
kill -TERM "$demo_pid"
wait "$demo_pid" || fail "the program exited with status $?: $(cat "$tmp/demo.err")"
demo_pid=
echo "chroot_noproc: ok"
