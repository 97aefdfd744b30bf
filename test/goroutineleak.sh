#!/bin/sh
# goroutineleak.sh -- /debug/pprof/goroutineleak against test/goroutineleak
# (its threads: goroutineleak.cc): every form lists exactly the threads
# that can never run again -- the members of the four cycles (two pthread
# mutexes, three, two std::mutex, a mutex and an rwlock held for writing)
# and the two blocked behind a cycle and behind an exited owner --, each
# labelled with its cycle, the lock word it sleeps on (the program's own
# address for it) and that lock's owner (the next member of its cycle);
# none of the healthy waits (read, poll, a condition variable, a mutex
# held by a thread that runs); the index counts them.  The healthy calls
# then end as they should: none was cut short.
set -u
. "$(dirname "$0")/http_lib.sh"

start_program "$top_builddir/test/goroutineleak"
url=$base/goroutineleak

stuck="abba-1 abba-2 ring-1 ring-2 ring-3 std-1 std-2 rw-1 rw-2 behind orphaned"

# --- debug=2: every thread, the stuck ones "(leaked)" -------------------
code=$(fetch d2 "$url?debug=2")
[ "$code" = 200 ] || fail "debug=2: status $code: $(cat "$tmp/d2.body")"
# "TID|LEAK|LOCK|OWNER" per leaked thread.
sed -n 's/^goroutine \([0-9]*\) .*(leaked), thread "[^"]*", labels:{"pprof_leak": "\([^"]*\)", "pprof_lock": "\([^"]*\)", "pprof_lock_owner": "\([0-9]*\)"}\]:$/\1|\2|\3|\4/p' \
    "$tmp/d2.body" >"$tmp/leaked"
[ "$(grep -c '(leaked)' "$tmp/d2.body")" = "$(wc -l <"$tmp/leaked")" ] ||
    fail "debug=2: a leaked header out of form: $(grep '(leaked)' "$tmp/d2.body")"
# Judged against the program's table ("thread NAME TID lock ADDR"): the
# leaked are exactly the stuck; each one's lock is the program's address
# for it, its owner the thread named (the next member of its cycle); each
# cycle's members share one mark, "cycle N", and the four marks differ;
# behind waits behind abba's cycle, orphaned behind its exited owner
# (printed for the check below).
awk -F'|' -v stuck="$stuck" '
    FNR == NR { if ($0 ~ /^thread /) { split($0, w, " "); tid[w[2]] = w[3]; lock[w[2]] = w[5]; name[w[3]] = w[2] } next }
    { if (!($1 in name)) { print "leaked thread " $1 " is none of the program'"'"'s"; bad = 1; next }
      n = name[$1]; nleaked++; mark[n] = $2; at[n] = $3; owner[n] = $4 }
    function expect(n, o) {
        if (!(n in mark)) { print n " not listed"; bad = 1; return }
        if (at[n] != lock[n]) { print n ": lock " at[n] ", want " lock[n]; bad = 1 }
        if (o != "" && owner[n] != tid[o]) { print n ": owner " owner[n] ", want " o; bad = 1 }
    }
    function cycle(members, k, m, i, first) {
        k = split(members, m, " ")
        for (i = 1; i <= k; i++) {
            expect(m[i], m[i % k + 1])
            if (mark[m[i]] !~ /^cycle [0-9]+$/ || mark[m[i]] != mark[m[1]]) { print members ": marks differ or are not cycles"; bad = 1 }
        }
        if (mark[m[1]] in seen) { print members ": shares its mark"; bad = 1 }
        seen[mark[m[1]]] = 1
    }
    END {
        cycle("abba-1 abba-2"); cycle("ring-1 ring-2 ring-3"); cycle("std-1 std-2"); cycle("rw-1 rw-2")
        expect("behind", "abba-1")
        if (mark["behind"] != "behind " mark["abba-1"]) { print "behind: marked " mark["behind"]; bad = 1 }
        expect("orphaned", "")
        if (mark["orphaned"] != "behind exited thread " owner["orphaned"]) { print "orphaned: marked " mark["orphaned"]; bad = 1 }
        k = split(stuck, s, " "); for (i = 1; i <= k; i++) listed += s[i] in mark
        if (listed != k || nleaked != k) { print "leaked " nleaked ", want " k; bad = 1 }
        if (!bad) print "gone " owner["orphaned"]
        exit bad
    }' "$tmp/demo.out" "$tmp/leaked" >"$tmp/judged" ||
    fail "debug=2: $(cat "$tmp/judged"); listed: $(cat "$tmp/leaked")"
gone=$(sed -n 's/^gone //p' "$tmp/judged")
[ ! -e "/proc/$demo_pid/task/$gone" ] || fail "orphaned: owner $gone has not exited"

# --- debug=1 and debug=0: the same eleven ---------------------------------
code=$(fetch d1 "$url?debug=1")
[ "$code" = 200 ] || fail "debug=1: status $code"
[ "$(head -1 "$tmp/d1.body")" = "goroutineleak profile: total 11" ] ||
    fail "debug=1: first line $(head -1 "$tmp/d1.body")"
[ "$(grep -c '^# labels: {"pprof_leak":' "$tmp/d1.body")" = 11 ] ||
    fail "debug=1: $(grep '^# labels' "$tmp/d1.body")"
code=$(fetch d0 "$url")
[ "$code" = 200 ] || fail "debug=0: status $code"
"$GOCHECK" "$tmp/d0.body" >"$tmp/d0.check" || fail "debug=0: pprof's parser rejects it"
for want in valid 'sample_types goroutineleak/count' 'total 0 11' \
            'tag pprof_leak "cycle 2" 0 3'; do
    grep -qxF "$want" "$tmp/d0.check" || fail "debug=0: no '$want' in: $(cat "$tmp/d0.check")"
done

# --- the index -------------------------------------------------------------
code=$(fetch index "$base/?format=json")
[ "$code" = 200 ] || fail "index: status $code"
count=$(jq -r '.profiles[] | select(.name == "goroutineleak") | .count' "$tmp/index.body")
[ "$count" = 11 ] || fail "index: goroutineleak count '$count'"

# --- the healthy calls end as they should ---------------------------------
kill -TERM "$demo_pid"
await_exit goroutineleak "$tmp/demo.err"
grep -qx 'healthy ok' "$tmp/demo.out" || fail "$(tail -1 "$tmp/demo.out")"
echo "PASS: goroutineleak.sh"
