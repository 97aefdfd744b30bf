#!/bin/sh
# scrape.sh -- the demo scraped as Pyroscope, Parca and Grafana Alloy scrape
# a Go service: profile?seconds=N back to back, and allocs, goroutine,
# block and mutex every 2 s, all at once, for SCRAPE_SECONDS (default 40).
# Every response must be a 200 that google/pprof's parser accepts
# (gocheck), and the demo's resident memory must stay flat: it is read
# once the first round of every profile is in and again at the end, and
# may grow by at most SCRAPE_RSS_SLACK_KB (default 8192) in between.
set -u
. "$(dirname "$0")/http_lib.sh"
seconds=${SCRAPE_SECONDS:-40}
slack_kb=${SCRAPE_RSS_SLACK_KB:-8192}

CPPROF_BLOCK_PROFILE_RATE=10000 CPPROF_MUTEX_PROFILE_FRACTION=10 \
    start_demo --workers 2 --rate 200 --park 3 --for $((seconds + 60))

rss_kb() {
    awk '$1 == "VmRSS:" { print $2 }' "/proc/$demo_pid/status"
}

# scraper NAME PATH PAUSE: fetches PATH every PAUSE seconds until the
# deadline, checks each answer with gocheck; appends one line per scrape
# to $tmp/NAME.log: "ok" or what went wrong.
scraper() {
    while [ "$(date +%s)" -lt "$deadline" ]; do
        code=$(curl -s -o "$tmp/$1.pb" -w '%{http_code}' --max-time 60 "$base/$2")
        if [ "$code" = 501 ] && [ "$1" = allocs ] && [ -n "$declined" ] &&
            grep -q '^no heap profile: ' "$tmp/$1.pb"; then
            echo ok >>"$tmp/$1.log"
        elif [ "$code" != 200 ]; then
            echo "status $code: $(head -c 200 "$tmp/$1.pb")" >>"$tmp/$1.log"
        elif ! "$GOCHECK" "$tmp/$1.pb" >/dev/null 2>"$tmp/$1.err"; then
            echo "rejected: $(cat "$tmp/$1.err")" >>"$tmp/$1.log"
        else
            echo ok >>"$tmp/$1.log"
        fi
        sleep "$3"
    done
}

# Under ASan or TSan the sanitizer's malloc comes before cpprof's, so the
# heap profiles are declined: a 501 that says why is the right answer
# there (test/http_unlabelled.sh), and nothing else is.
case ${CPPROF_SANITIZER:-none} in
asan | tsan) declined=1 ;;
*) declined= ;;
esac

start=$(date +%s)
deadline=$((start + seconds))
names='cpu allocs goroutine block mutex'
scraper cpu 'profile?seconds=5' 0 & pids=$!
for p in allocs goroutine block mutex; do
    scraper $p $p 2 &
    pids="$pids $!"
done

# Resident memory once every scraper has been served at least once.
for tick in $(seq 200); do
    all=1
    for n in $names; do
        [ -s "$tmp/$n.log" ] || all=
    done
    [ -n "$all" ] && break
    sleep 0.1
done
rss_start=$(rss_kb)
for pid in $pids; do
    wait "$pid"
done
rss_end=$(rss_kb)

total=0
for n in $names; do
    count=$(wc -l <"$tmp/$n.log")
    ok=$(grep -cx ok "$tmp/$n.log")
    echo "scrape $n: $ok of $count ok"
    [ "$ok" = "$count" ] || fail "$n: $(grep -vx ok "$tmp/$n.log" | head -3)"
    total=$((total + count))
done
# The CPU scraper gets a 5 s profile back to back; the others one scrape
# every 2 s or so.
[ "$(wc -l <"$tmp/cpu.log")" -ge $((seconds / 6)) ] || fail "too few CPU scrapes"
[ "$(wc -l <"$tmp/goroutine.log")" -ge $((seconds / 4)) ] || fail "too few scrapes"
echo "scrape: $total responses in $(($(date +%s) - start)) s; demo RSS ${rss_start} kB -> ${rss_end} kB"
[ "$rss_end" -le $((rss_start + slack_kb)) ] ||
    fail "demo RSS grew from $rss_start kB to $rss_end kB"
stop_demo
echo "scrape: ok"
