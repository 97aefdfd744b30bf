#!/bin/sh
# postgres.sh -- Debian's PostgreSQL 15 in zero-code mode: the postmaster
# serves, and its backends, forks that PostgreSQL names in their command
# line, cost nothing of cpprof's until asked for through it.
#   First the index page, labels, accounting and a JSON trace leave the
#   postmaster serving, its log clean: it exports json_object
#   (src/upper.c).
#   8 idle backends (psql sessions waiting on their input): each runs its
#   1 thread and holds no socket of cpprof's but its client's connection,
#   and the index lists each, armed, by its title (`postgres: postgres
#   postgres [local] idle`, as ps shows it).
#   Under a pgbench select load, a 2 s CPU profile of one of its backends,
#   asked through the postmaster's address (/debug/pprof/pid/PID/profile),
#   answers 200 with samples in PortalRun, the request path of a backend
#   (Debian's postgres keeps only its exported symbols: exec_simple_query,
#   static, is an address); the backend's part ran meanwhile (threads and
#   a connection back to the postmaster) and is gone again, its 1 thread
#   and no socket of cpprof's, within CPPROF_HTTP_WORKER_IDLE_MS of it,
#   with a generous bound.
# One PostgreSQL instance for all.  Run as root, PostgreSQL runs as
# postgres.
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
fifo_writer=
trap '[ -z "$fifo_writer" ] || kill "$fifo_writer"; stop_pg; cleanup' EXIT

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

# A worker's part goes after this long without a request: short, so that
# the test sees it go.
idle_ms=1500
launch_pg() {
    stop_pg
    pgport=$((port + port_span))
    as_pg "LD_PRELOAD='$preload' CPPROF_HTTP=127.0.0.1:$port CPPROF_HTTP_WORKER_IDLE_MS=$idle_ms ASAN_OPTIONS=${ASAN_OPTIONS:-} $PG_BIN/postgres -D $pg/data -k $pg/sock -p $pgport -c listen_addresses=" \
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
psql="$PG_BIN/psql -h $pg/sock -p $pgport"
# backends APP: the pids of the backends whose clients' application_name
# is APP.
backends() {
    as_pg "$psql -Atc \"select pid from pg_stat_activity where application_name = '$1'\" postgres" 2>/dev/null
}
# listed PID: PID's entry in the index's forked_processes ($tmp/index.json).
listed() {
    jq -c --argjson p "$1" '.forked_processes[] | select(.pid == $p)' \
        "$tmp/index.json" 2>/dev/null
}
# await_listed APP N: waits (up to 30 s) until N backends of APP's clients
# run and the index lists each; their pids in $want.
await_listed() {
    for tick in $(seq 300); do
        curl -s --max-time 2 "$base/?format=json" >"$tmp/index.json"
        n=0 want=$(backends "$1")
        for pid in $want; do
            [ -n "$(listed "$pid")" ] && n=$((n + 1))
        done
        [ "$n" -eq "$2" ] && return 0
        sleep 0.1
    done
    fail "the postmaster's index lists $n of $2 backends of $1 ($want): $(cat "$tmp/index.json")"
}

# -- 8 idle backends --
# Each psql waits on its input, a FIFO whose one writer is a sleep the
# test ends (at exit, too): its backend waits for a query in epoll_wait
# until then.
mkfifo -m 666 "$tmp/idle.fifo"
sleep 600 >"$tmp/idle.fifo" &
fifo_writer=$!
for i in 1 2 3 4 5 6 7 8; do
    as_pg "PGAPPNAME=cpprof_idle $psql -q postgres <$tmp/idle.fifo" \
        >/dev/null 2>>"$tmp/psql.err" &
done
await_listed cpprof_idle 8
# A backend names itself "startup" until its client is in, then "idle":
# the index read once all are idle.
for tick in $(seq 300); do
    curl -s --max-time 2 "$base/?format=json" >"$tmp/index.json"
    jq -e '[.forked_processes[] | select(.title | endswith("startup"))]
           | length == 0' "$tmp/index.json" >/dev/null &&
        [ "$(jq '[.forked_processes[] | select(.title | endswith("idle"))] | length' "$tmp/index.json")" -ge 8 ] &&
        break
    sleep 0.1
done
for pid in $want; do
    costs_nothing "$pid" "$postmaster" ||
        fail "idle backend: $(worker_cost "$pid" "$postmaster")"
    # Its one socket is its client's connection: a backend closes the
    # postmaster's listeners (ClosePostmasterPorts).
    sockets=$(socket_inodes "$pid" | wc -l)
    [ "$sockets" -eq 1 ] ||
        fail "idle backend $pid holds $sockets sockets, not just its client's: $(ls -l "/proc/$pid/fd")"
    entry=$(listed "$pid")
    title=$(ps -o args= -p "$pid" | sed 's/ *$//')
    case $title in
    "postgres: "*) ;;
    *) fail "backend $pid's title is '$title': PostgreSQL did not name it" ;;
    esac
    echo "$entry" | jq -e --arg t "$title" --argjson pm "$postmaster" \
        '.title == $t and .name == "postgres" and .parent == $pm and .state == "armed"' \
        >/dev/null ||
        fail "the index lists backend $pid as $entry, not armed, titled '$title', forked by $postmaster"
done
curl -s --max-time 5 "$base/" >"$tmp/index.html" ||
    fail "no index page"
grep -qF "$title" "$tmp/index.html" ||
    fail "the index page names no backend '$title'"
echo "ok: 8 idle backends run 1 thread each and no socket of cpprof's; the index lists each as armed, by its title ('$title')"

# -- a profile of a busy backend, through the postmaster --
bench="$PG_BIN/pgbench -h $pg/sock -p $pgport"
as_pg "$bench -i -s 1 postgres" >"$tmp/init.log" 2>&1 ||
    fail "pgbench -i: $(cat "$tmp/init.log")"
# Longer than the test needs: it is stopped at the end.
as_pg "$bench -S -c 2 -j 2 -T 120 postgres" >"$tmp/bench.log" 2>&1 &
bench_pid=$!
await_listed pgbench 2
pid=$(echo "$want" | head -1)
costs_nothing "$pid" "$postmaster" ||
    fail "busy backend, not yet asked for: $(worker_cost "$pid" "$postmaster")"
curl -s --max-time 60 -o "$tmp/b.pb.gz" -w '%{http_code}\n' \
    "$base/pid/$pid/profile?seconds=2" >"$tmp/b.code" &
asked=$!
watch_serving "$pid" "$postmaster" "$asked"
wait "$asked"
code=$(cat "$tmp/b.code")
[ "$code" = 200 ] ||
    fail "backend $pid's profile through the postmaster answered '$code': $(head -c 300 "$tmp/b.pb.gz")"
go tool pprof -traces "$tmp/b.pb.gz" >"$tmp/b.traces" 2>&1 ||
    fail "pprof on backend $pid's profile: $(cat "$tmp/b.traces")"
n=$(grep -c ' PortalRun$' "$tmp/b.traces")
[ "$n" -gt 0 ] || fail "backend $pid's profile has no PortalRun: $(head -40 "$tmp/b.traces")"
# The checks of a part gone must see it come first, or they show nothing.
[ "$ws_threads" -gt 1 ] && [ -n "$ws_socket" ] ||
    fail "while backend $pid served its profile it ran at most $ws_threads threads, cpprof's socket '$ws_socket'"
echo "ok: backend $pid's profile through the postmaster: $n stacks through PortalRun; meanwhile it ran $ws_threads threads"
await_costs_nothing "$pid" "$postmaster" $((idle_ms / 1000 + 60))
curl -s --max-time 5 "$base/?format=json" >"$tmp/index.json"
listed "$pid" | jq -e '.state == "armed"' >/dev/null ||
    fail "backend $pid, idle again, is listed as $(listed "$pid")"
kill "$bench_pid" 2>/dev/null
echo "ok: its part went $acn_ms ms after the profile (CPPROF_HTTP_WORKER_IDLE_MS=$idle_ms), under load: 1 thread, no socket of cpprof's, armed"
echo PASS
