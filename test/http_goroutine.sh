#!/bin/sh
# http_goroutine.sh -- /debug/pprof/goroutine against the demo with labelled
# threads parked in a blocking wait (--park 7: tenants acme, globex, initech
# by turn, so 3, 2 and 2, all kind "wait"):
#   debug=1  Go's text form: the total, one group per label set with its
#            count and "# labels:" line, largest group first;
#   debug=2  one block per thread (goroutine TID [..., thread "NAME"...]),
#            every thread of the process (checked against
#            /proc/PID/task), parked ones with their labels;
#   debug=0  a profile google/pprof's parser accepts (gocheck), with Go's
#            sample type, whose tenants `go tool pprof -tags` shows;
#   seconds=6 Go's goroutine delta across the moment (3 s in: --park-after)
#            the parked threads leave an unlabelled sleep for their labelled
#            wait: +7 labelled, as many fewer unlabelled, nothing else;
#   a bad debug value is a 400 in Go's error form.
set -u
. "$(dirname "$0")/http_lib.sh"

start_demo --workers 2 --rate 200 --park 7 --park-after 3 --for 120

# --- seconds=6: the delta (first, while the parked threads still sleep) ---
code=$(fetch delta "$base/goroutine?seconds=6")
[ "$code" = 200 ] || fail "seconds=6: status $code: $(cat "$tmp/delta.body")"
[ "$(header delta content-disposition)" = 'attachment; filename="goroutine-delta"' ] ||
    fail "seconds=6: content-disposition $(header delta content-disposition)"
"$GOCHECK" "$tmp/delta.body" >"$tmp/delta.check" ||
    fail "seconds=6: pprof's parser rejects it"
# (Tenant tags mix in the workers, whose job labels change all the time.)
for want in valid 'sample_types goroutine/count' 'tag kind wait 0 7'; do
    grep -qx "$want" "$tmp/delta.check" ||
        fail "seconds=6: no '$want' in: $(cat "$tmp/delta.check")"
done
# The process has as many threads at both ends (give or take the request's
# own): the labelled gain is an unlabelled loss, not new threads.
net=$(sed -n 's/^total 0 //p' "$tmp/delta.check")
[ "${net#-}" -le 2 ] || fail "seconds=6: net change of $net threads"
dur=$(sed -n 's/^duration_nanos //p' "$tmp/delta.check")
[ "$dur" -ge 6000000000 ] && [ "$dur" -lt 7000000000 ] ||
    fail "seconds=6: duration_nanos $dur"

# expect_error NAME STATUS GOT: Go's error form with STATUS, one line.
expect_error() {
    [ "$2" = "$3" ] || fail "$1: status $3, want $2"
    [ "$(header "$1" content-type)" = 'text/plain; charset=utf-8' ] ||
        fail "$1: content-type $(header "$1" content-type)"
    [ "$(header "$1" x-go-pprof)" = 1 ] || fail "$1: no X-Go-Pprof: 1"
    [ "$(wc -l <"$tmp/$1.body")" = 1 ] ||
        fail "$1: body is not one line: $(cat "$tmp/$1.body")"
}

# The parked threads take their labels as they start: wait for all seven.
for tick in $(seq 100); do
    code=$(fetch d1 "$base/goroutine?debug=1")
    [ "$code" = 200 ] || fail "debug=1: status $code: $(cat "$tmp/d1.body")"
    [ "$(grep -c '^# labels: {"kind":"wait"' "$tmp/d1.body")" -ge 3 ] && break
    sleep 0.1
done

# --- debug=1 -------------------------------------------------------------
[ "$(header d1 content-type)" = 'text/plain; charset=utf-8' ] ||
    fail "debug=1: content-type $(header d1 content-type)"
[ -z "$(header d1 content-disposition)" ] || fail "debug=1: attachment"
total=$(sed -n '1s/^goroutine profile: total \([0-9]*\)$/\1/p' "$tmp/d1.body")
[ -n "$total" ] || fail "debug=1: first line $(head -1 "$tmp/d1.body")"
# Groups: "COUNT @ 0x...", then "# labels: {...}" when labelled, then
# "#\t0xPC\tFUNC+0xOFF\tFILE:LINE" frames, then a blank line.
awk '
    /^[0-9]+ @/ { n = $1; sum += n; if (prev && n > prev) bad = "not sorted by count"; prev = n; next }
    /^# labels: / { sub(/^# labels: /, ""); count[$0] += n; next }
    END {
        if (bad) { print bad; exit 1 }
        print "sum " sum
        for (l in count) print count[l] " " l
    }' "$tmp/d1.body" >"$tmp/d1.groups" || fail "debug=1: $(cat "$tmp/d1.groups")"
grep -qx "sum $total" "$tmp/d1.groups" ||
    fail "debug=1: group counts do not add up to $total: $(cat "$tmp/d1.groups")"
for want in '3 {"kind":"wait", "tenant":"acme"}' \
            '2 {"kind":"wait", "tenant":"globex"}' \
            '2 {"kind":"wait", "tenant":"initech"}'; do
    grep -qxF "$want" "$tmp/d1.groups" ||
        fail "debug=1: no group '$want': $(cat "$tmp/d1.groups")"
done
grep -q "$(printf '^#\t0x[0-9a-f]*\t[^\t]*+0x[0-9a-f]*\t[^\t]*:[0-9]*$')" \
    "$tmp/d1.body" || fail "debug=1: no frame line in Go's form"

# --- debug=2: every thread of the process --------------------------------
ls "/proc/$demo_pid/task" | sort >"$tmp/tasks.before"
code=$(fetch d2 "$base/goroutine?debug=2")
ls "/proc/$demo_pid/task" | sort >"$tmp/tasks.after"
[ "$code" = 200 ] || fail "debug=2: status $code"
sed -n 's/^goroutine \([0-9]*\) \[.*, thread ".*\]:$/\1/p' "$tmp/d2.body" | sort >"$tmp/d2.tids"
[ "$(grep -c '^goroutine ' "$tmp/d2.body")" = "$(wc -l <"$tmp/d2.tids")" ] ||
    fail "debug=2: a header not in the form 'goroutine TID [STATE, ..., thread \"NAME\"...]:'"
# Threads there before and after the request are all in the dump; besides
# them only the connection's own thread may be.
comm -12 "$tmp/tasks.before" "$tmp/tasks.after" >"$tmp/stable"
missing=$(comm -23 "$tmp/stable" "$tmp/d2.tids")
[ -z "$missing" ] || fail "debug=2: threads missing from the dump: $missing"
extra=$(sort -u "$tmp/tasks.before" "$tmp/tasks.after" |
    comm -13 - "$tmp/d2.tids" | wc -l)
[ "$extra" -le 1 ] || fail "debug=2: $extra threads that /proc never listed"
# Labels inside the bracket, after the state, in Go 1.27's form.
[ "$(grep -c '^goroutine [0-9]* \[[^]]*, thread "[^"]*", labels:{"kind": "wait", "tenant": "acme"}\]:$' \
    "$tmp/d2.body")" = 3 ] || fail "debug=2: acme's parked threads: $(cat "$tmp/d2.body")"
grep -q "$(printf '^\t.*:[0-9]* +0x[0-9a-f]*$')" "$tmp/d2.body" ||
    fail "debug=2: no FILE:LINE +0xOFF line"

# --- debug=0: the profile -------------------------------------------------
code=$(fetch d0 "$base/goroutine")
[ "$code" = 200 ] || fail "debug=0: status $code"
[ "$(header d0 content-type)" = application/octet-stream ] ||
    fail "debug=0: content-type $(header d0 content-type)"
[ "$(header d0 content-disposition)" = 'attachment; filename="goroutine"' ] ||
    fail "debug=0: content-disposition $(header d0 content-disposition)"
"$GOCHECK" "$tmp/d0.body" >"$tmp/d0.check" ||
    fail "debug=0: pprof's parser rejects it"
for want in valid 'sample_types goroutine/count' \
            'period_type goroutine/count 1' 'tag kind wait 0 7'; do
    grep -qx "$want" "$tmp/d0.check" ||
        fail "debug=0: no '$want' in: $(cat "$tmp/d0.check")"
done
go tool pprof -tags "$tmp/d0.body" >"$tmp/tags" 2>"$tmp/tags.err" ||
    fail "go tool pprof -tags: $(cat "$tmp/tags.err")"
for tenant in acme globex initech; do
    grep -q ": $tenant\$" "$tmp/tags" ||
        fail "go tool pprof -tags shows no $tenant: $(cat "$tmp/tags")"
done

# --- bad debug values -----------------------------------------------------
i=0
for d in 3 -1 x '' 1.5 ' 1' 0x1 99999999999999999999; do
    i=$((i + 1))
    code=$(fetch bad$i "$base/goroutine" -G --data-urlencode "debug=$d")
    expect_error bad$i 400 "$code"
    grep -q '"debug"' "$tmp/bad$i.body" ||
        fail "debug=$d: message does not name the parameter"
done

stop_demo
echo "PASS: http_goroutine.sh"
