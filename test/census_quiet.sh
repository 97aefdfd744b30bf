#!/bin/sh
# census_quiet.sh -- a census interrupts no blocking call:
# test/census_quiet's threads wait 5 s at a time in nanosleep, sleep, poll,
# epoll_wait, select, sigtimedwait, read on an idle pipe and a futex, with
# the accounting tick armed, while this script takes 50 censuses
# (goroutine debug=1, debug=2 and /labels in turn) and headless chromium
# shows the index page, which fetches /labels every 5 s and runs a CPU
# profile (the sampler's timers on every thread); curl asks for that
# profile under a sanitizer.  No call may return
# early, with EINTR or any other wrong result, and every waiting thread's
# stack must show its call's libc wrapper, then wait_in_CALL, run_rounds
# and blocker_main (the thread's start routine), in that order.  A 5 s
# wall profile at 100 censuses a second runs meanwhile, and its own
# censuses must interrupt nothing either.
set -u
. "$(dirname "$0")/http_lib.sh"
BROWSERCHECK=$top_builddir/test/browsercheck/browsercheck
CPPROF_WALL_HZ=100 CPPROF_WALL_CPU_PERCENT=50
export CPPROF_WALL_HZ CPPROF_WALL_CPU_PERCENT

# The page's requests reach the program as any client's do.  Under a
# sanitizer, where chromium would cost 20-30 s of CPU and show the server
# nothing new, curl asks for the page's CPU profile instead.
start_program "$top_builddir/test/census_quiet"
case ${CPPROF_SANITIZER:-none} in
asan | tsan)
    client=curl
    curl -s -o "$tmp/cpu.pb" -w '%{http_code}\n' "$base/profile?seconds=2" \
        >"$tmp/page" 2>"$tmp/page.err" & ;;
*)
    client=browser
    command -v chromium >/dev/null || fail "chromium is missing: apt-get install chromium"
    "$BROWSERCHECK" -url "$base/" -shots "$tmp" -cpu 2 >"$tmp/page" 2>"$tmp/page.err" & ;;
esac
browser=$!
curl -s -o "$tmp/wall.pb" -w '%{http_code}\n' --max-time 60 \
    "$base/wall?seconds=5" >"$tmp/wall.code" 2>&1 &
wall=$!

i=0
while [ $i -lt 50 ]; do
    case $((i % 3)) in
    0) url="$base/goroutine?debug=1" ;;
    1) url="$base/goroutine?debug=2" ;;
    *) url="$base/labels" ;;
    esac
    code=$(fetch census$i "$url")
    [ "$code" = 200 ] || fail "census $i ($url): status $code"
    i=$((i + 1))
    sleep 0.2
done
wait "$browser" || fail "the $client failed: $(cat "$tmp/page.err")"
wait "$wall"
[ "$(cat "$tmp/wall.code")" = 200 ] || fail "wall profile: status $(cat "$tmp/wall.code")"
"$PPROF" -raw "$tmp/wall.pb" >"$tmp/wall.raw" 2>&1 || fail "pprof -raw of the wall profile: $(cat "$tmp/wall.raw")"
sed -n 's/^Comment: \(wall profile: [0-9]* censuses.*\)/\1/p' "$tmp/wall.raw"
case $client in
curl) [ "$(cat "$tmp/page")" = 200 ] || fail "CPU profile: status $(cat "$tmp/page")" ;;
*) grep -q '^profile goroutine' "$tmp/page" || fail "the page has no profile table" ;;
esac

# Stacks: in the last debug=2 dump, each q-CALL thread's frames (function
# names only) must hold the wrapper and the test's callers in order.  Under
# a sanitizer most of these calls go through its interceptor, a
# frame-pointer frame which a thread read from outside must be walked
# through without knowing its frame pointer (docs/limits.md):
# there a stack that misses is printed, not judged; the calls' own
# results still are.
awk '
    /^goroutine / { name = ""; if (match($0, /, thread "[^"]*"/)) name = substr($0, RSTART + 10, RLENGTH - 11); next }
    /^[^\t ].*\(\.\.\.\)$/ { f = $0; sub(/\(\.\.\.\)$/, "", f); stack[name] = stack[name] " " f }
    END { for (n in stack) if (n ~ /^q-/) print n stack[n] }
' "$tmp/census49.body" >"$tmp/stacks"
for call in nanosleep:clock_nanosleep sleep:clock_nanosleep poll:poll \
            epoll_wait:epoll_wait select:select sigtimedwait:sigtimedwait \
            read:read futex:futex_abstimed_wait; do
    name=${call%%:*} wrapper=${call#*:}
    line=$(grep "^q-$name " "$tmp/stacks") ||
        fail "no thread q-$name in the census: $(cat "$tmp/census49.body")"
    echo "$line" | grep -Eq " [^ ]*$wrapper[^ ]* .*wait_in_$name .*run_rounds blocker_main( |\$)" && continue
    case ${CPPROF_SANITIZER:-none} in
    asan | tsan) echo "not judged under $CPPROF_SANITIZER: q-$name's stack: $line" ;;
    *) fail "q-$name's stack lacks $wrapper, wait_in_$name, run_rounds, blocker_main: $line" ;;
    esac
done

kill -TERM "$demo_pid"
wait "$demo_pid"
status=$?
demo_pid=
cat "$tmp/demo.out" | grep '^call ' >"$tmp/calls"
[ "$(wc -l <"$tmp/calls")" = 8 ] || fail "the program did not report: $(cat "$tmp/demo.out" "$tmp/demo.err")"
[ "$status" = 0 ] || fail "a call was cut short: $(cat "$tmp/calls")"
cat "$tmp/calls"
echo "PASS: census_quiet.sh (50 censuses, a wall profile and a $client; no call early or EINTR)"
