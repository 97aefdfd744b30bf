#!/bin/sh
# postgres.sh -- Debian's PostgreSQL 15 in zero-code mode: the postmaster
# serves, and under a pgbench select load (2 clients, each a backend that
# lives for the run) its index lists both backends, and a 2 s CPU profile
# fetched from each listed address has samples in PortalRun, the request
# path of a backend (Debian's postgres keeps only its exported symbols:
# exec_simple_query, static, is an address).  Before, the index page,
# labels, accounting and a JSON trace leave the postmaster serving, its
# log clean: it exports json_object (src/upper.c).  Run as root,
# PostgreSQL runs as postgres.
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
: "${PG_BIN:=/usr/lib/postgresql/15/bin}"
for t in initdb pg_ctl postgres pgbench psql; do
    [ -x "$PG_BIN/$t" ] || fail "no $PG_BIN/$t: install postgresql-15"
done
as_pg() {
    if [ "$(id -u)" = 0 ]; then su postgres -c "$1"; else sh -c "$1"; fi
}
pg=$tmp/pg
# stop_pg: ends every postmaster of this test's data directory (one a
# retried launch left, which su did not take with it, too).
stop_pg() {
    for p in $(pgrep -f -- "-D $pg/data "); do kill -QUIT "$p" 2>/dev/null; done
}
trap 'stop_pg; cleanup' EXIT

# The library where postgres can read it, with the upper object beside
# it as installed (src/upper.h); an ASan build's runtime stays first.
mkdir -p "$pg/lib/cpprof" "$pg/data" "$pg/sock"
cp "$LIB" "$pg/lib/libcpprof.so"
cp "$(dirname "$LIB")/libcpprof-upper.so" "$pg/lib/cpprof/"
preload=$(echo "$PRELOAD" | sed "s|$LIB|$pg/lib/libcpprof.so|")
chmod 755 "$tmp"
chmod -R a+rX "$pg"
[ "$(id -u)" != 0 ] || chown -R postgres "$pg/data" "$pg/sock"
as_pg "$PG_BIN/initdb -D $pg/data -A trust" >"$tmp/initdb.log" 2>&1 ||
    fail "initdb: $(cat "$tmp/initdb.log")"

launch_pg() {
    stop_pg
    pgport=$((port + port_span))
    as_pg "LD_PRELOAD='$preload' CPPROF_HTTP=127.0.0.1:$port CPPROF_HTTP_FORK_DELAY_MS=200 ASAN_OPTIONS=${ASAN_OPTIONS:-} $PG_BIN/postgres -D $pg/data -k $pg/sock -p $pgport -c listen_addresses=" \
        </dev/null >"$tmp/pg.out" 2>"$tmp/pg.err" &
}
pg_ready() {
    as_pg "$PG_BIN/psql -h $pg/sock -p $pgport -Atc 'select 1' postgres" \
        >/dev/null 2>&1 && answers_index
}
serve_on_free_port postgres "$tmp/pg.err" launch_pg pg_ready

# PostgreSQL exports its SQL functions, json_object among them, which
# took jansson's calls: the index page (which fetches labels), labels,
# accounting and a JSON trace leave the postmaster serving, its log clean.
postmaster=$(head -1 "$pg/data/postmaster.pid")
for p in "" labels accounting "trace?seconds=0.3&format=json"; do
    code=$(curl -s -o "$tmp/page.body" -w '%{http_code}' --max-time 30 "$base/$p")
    [ "$code" = 200 ] || fail "/debug/pprof/$p answered $code: $(tail -5 "$tmp/pg.err")"
done
[ -d "/proc/$postmaster" ] ||
    fail "the postmaster ($postmaster) is gone: $(tail -5 "$tmp/pg.err")"
as_pg "$PG_BIN/psql -h $pg/sock -p $pgport -Atc 'select 1' postgres" >/dev/null ||
    fail "the postmaster ($postmaster) no longer answers: $(tail -5 "$tmp/pg.err")"
! grep -E 'terminated by signal|PANIC|Segmentation fault' "$tmp/pg.err" ||
    fail "the postmaster's log is not clean"
echo "ok: the postmaster serves its index, labels, accounting and a JSON trace"
bench="$PG_BIN/pgbench -h $pg/sock -p $pgport"
as_pg "$bench -i -s 1 postgres" >"$tmp/init.log" 2>&1 ||
    fail "pgbench -i: $(cat "$tmp/init.log")"
as_pg "$bench -S -c 2 -j 2 -T 20 postgres" >"$tmp/bench.log" 2>&1 &
bench_pid=$!

# The backends pgbench's clients are, once each is listed (up to 30 s).
backends() {
    as_pg "$PG_BIN/psql -h $pg/sock -p $pgport -Atc \"select pid from pg_stat_activity where application_name = 'pgbench'\" postgres" 2>/dev/null
}
for tick in $(seq 300); do
    curl -s --max-time 2 "$base/?format=json" >"$tmp/index.json"
    listed=0 want=$(backends)
    for pid in $want; do
        jq -e --argjson p "$pid" '.forked_processes[] | select(.pid == $p)' \
            "$tmp/index.json" >/dev/null 2>&1 && listed=$((listed + 1))
    done
    [ "$listed" -eq 2 ] && break
    sleep 0.1
done
[ "$listed" -eq 2 ] || fail "the postmaster's index lists $listed of pgbench's backends ($want): $(cat "$tmp/index.json")"
profiles=
for pid in $want; do
    url=$(jq -r --argjson p "$pid" '.forked_processes[] | select(.pid == $p) | .url' "$tmp/index.json")
    curl -s --max-time 30 -o "$tmp/b$pid.pb.gz" "${url}profile?seconds=2" &
    profiles="$profiles $!"
done
for p in $profiles; do wait "$p" || fail "a backend's profile failed"; done
for pid in $want; do
    go tool pprof -traces "$tmp/b$pid.pb.gz" >"$tmp/b$pid.traces" 2>&1 ||
        fail "pprof on backend $pid's profile: $(cat "$tmp/b$pid.traces")"
    n=$(grep -c ' PortalRun$' "$tmp/b$pid.traces")
    [ "$n" -gt 0 ] || fail "backend $pid's profile has no PortalRun: $(head -40 "$tmp/b$pid.traces")"
    echo "backend $pid: $n stacks through PortalRun"
done
kill "$bench_pid" 2>/dev/null
echo "ok: the postmaster's index lists pgbench's 2 backends, each profile in PortalRun"
echo PASS
