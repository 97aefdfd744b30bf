#!/bin/sh
# http_profile.sh -- /debug/pprof/profile's HTTP contract, checked with curl
# against the demo: Go's headers on success, Go's error form (400 for every
# kind of bad `seconds`, 404, 405, 500 when a profile is already running),
# and a client that hangs up mid-profile freeing the profiler at once.
set -u
. "$(dirname "$0")/http_lib.sh"

start_demo --workers 1 --rate 200 --for 120

# --- a good profile: Go's headers -------------------------------------------
code=$(fetch ok "$base/profile?seconds=1&unknown=ignored")
[ "$code" = 200 ] || fail "profile: status $code: $(cat "$tmp/ok.body")"
[ "$(header ok content-type)" = application/octet-stream ] ||
    fail "profile: content-type $(header ok content-type)"
[ "$(header ok content-disposition)" = 'attachment; filename="profile"' ] ||
    fail "profile: content-disposition $(header ok content-disposition)"
[ "$(header ok x-content-type-options)" = nosniff ] || fail "profile: no nosniff"
[ -z "$(header ok x-go-pprof)" ] || fail "profile: X-Go-Pprof on a success"
# A gzip stream starts 1f 8b.
[ "$(od -An -N2 -tx1 "$tmp/ok.body" | tr -d ' ')" = 1f8b ] ||
    fail "profile: body is not gzip"

# expect_error NAME STATUS: the response NAME is Go's error form with STATUS
# and a one-line body; prints the body.
expect_error() {
    [ "$2" = "$3" ] || fail "$1: status $3, want $2"
    [ "$(header "$1" content-type)" = 'text/plain; charset=utf-8' ] ||
        fail "$1: content-type $(header "$1" content-type)"
    [ "$(header "$1" x-go-pprof)" = 1 ] || fail "$1: no X-Go-Pprof: 1"
    [ "$(header "$1" x-content-type-options)" = nosniff ] ||
        fail "$1: no nosniff"
    [ -z "$(header "$1" content-disposition)" ] ||
        fail "$1: Content-Disposition on an error"
    [ "$(wc -l <"$tmp/$1.body")" = 1 ] &&
        [ "$(tail -c1 "$tmp/$1.body" | od -An -tx1 | tr -d ' ')" = 0a ] ||
        fail "$1: body is not one line ending in a newline"
}

# --- bad seconds: 400 naming the parameter -----------------------------------
i=0
for s in abc 0 -1 99999999999999999999 3601 '' 1.5 ' 1' 0x10; do
    i=$((i + 1))
    code=$(fetch bad$i "$base/profile" -G --data-urlencode "seconds=$s")
    expect_error bad$i 400 "$code"
    grep -q '"seconds"' "$tmp/bad$i.body" ||
        fail "seconds=$s: message does not name the parameter: $(cat "$tmp/bad$i.body")"
done
code=$(fetch bare "$base/profile?seconds")
expect_error bare 400 "$code"

# --- unknown profile, outside /debug/pprof/, wrong method -------------------
code=$(fetch unknown "$base/no-such-profile")
expect_error unknown 404 "$code"
[ "$(cat "$tmp/unknown.body")" = "Unknown profile" ] ||
    fail "unknown: body $(cat "$tmp/unknown.body")"
code=$(fetch outside "http://127.0.0.1:$port/elsewhere")
expect_error outside 404 "$code"
code=$(fetch post "$base/profile?seconds=1" -X POST)
expect_error post 405 "$code"
[ "$(header post allow)" = GET ] || fail "405 without Allow: GET"

# --- two profiles at once: exactly one is refused with Go's message ---------
# Both ask for 3 s and are sent together, so they overlap whichever the
# server takes first.
fetch c1 "$base/profile?seconds=3" >"$tmp/c1.code" &
c1=$!
fetch c2 "$base/profile?seconds=3" >"$tmp/c2.code"
wait $c1
codes=$(cat "$tmp/c1.code" "$tmp/c2.code" | sort | tr '\n' ' ')
[ "$codes" = "200 500 " ] || fail "concurrent profiles: statuses $codes"
for c in c1 c2; do
    if [ "$(cat "$tmp/$c.code")" = 500 ]; then
        expect_error $c 500 500
        [ "$(cat "$tmp/$c.body")" = \
            "Could not enable CPU profiling: cpu profiling already in use" ] ||
            fail "concurrent: message $(cat "$tmp/$c.body")"
    fi
done

# --- a client that hangs up stops its profile --------------------------------
# The abandoned profile asked for 5 s; after curl gives up at 1 s, a new
# profile must be accepted well before those 5 s are over.  The server
# notices within its 100 ms poll, so we retry a refused request for up to
# 2 s, then require success.
curl -s --max-time 1 -o /dev/null "$base/profile?seconds=5"
[ $? = 28 ] || fail "disconnect: curl did not time out"
deadline=$(($(date +%s%N) + 2000000000))
while :; do
    code=$(fetch after "$base/profile?seconds=1")
    [ "$code" = 500 ] && [ "$(date +%s%N)" -lt $deadline ] || break
    sleep 0.1
done
[ "$code" = 200 ] ||
    fail "after disconnect: status $code: $(cat "$tmp/after.body")"

echo "PASS: http_profile"
