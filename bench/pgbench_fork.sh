#!/bin/sh
# pgbench_fork.sh -- what cpprof preloaded (not serving) costs a
# pre-forking server: PostgreSQL's pgbench -C -S, a new connection (a
# postmaster fork, a backend that starts, answers one SELECT and exits) per
# transaction, against a postmaster run as is and with each LIBRARY in
# LD_PRELOAD.  Modes alternate, ROUNDS times (default 5), TX transactions
# per client (default 150, 2 clients).  Per round and mode it prints the
# connections per second, and per connection the postmaster's CPU
# (utime+stime of /proc/PID/stat) and its backends' (cutime+cstime: the
# children it reaped), in ms; then the medians.
#
# With SERVE=PORT the postmaster also serves (CPPROF_HTTP=127.0.0.1:PORT),
# so that each backend is a fork of a serving process: it starts the
# waiting thread of a pre-fork server's worker (http_forks.c), and exits
# before it would serve.
#
# Usage: bench/pgbench_fork.sh [LIBRARY...]
#   (default: the build's .libs/libcpprof.so; give an older build's
#   libcpprof.so too to compare).  Needs PostgreSQL's initdb, pg_ctl and
#   postgres (PG_BIN, default /usr/lib/postgresql/15/bin) and pgbench.
#   Run as root it runs PostgreSQL as the user postgres.
set -u
: "${top_builddir:=.}" "${ROUNDS:=5}" "${TX:=150}" "${SERVE:=}"
: "${PG_BIN:=/usr/lib/postgresql/15/bin}"
[ $# -gt 0 ] || set -- "$top_builddir/.libs/libcpprof.so"
for t in initdb pg_ctl postgres pgbench; do
    [ -x "$PG_BIN/$t" ] || { echo "no $PG_BIN/$t" >&2; exit 1; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-pgbench.XXXXXX")
trap 'as_pg "$PG_BIN/pg_ctl -D $dir/data -m immediate stop" >/dev/null 2>&1;
      rm -rf "$dir"' EXIT
as_pg() {
    if [ "$(id -u)" = 0 ]; then su postgres -c "$1"; else sh -c "$1"; fi
}
# Each library copied where the server's user can read it, with the
# upper object beside it (src/upper.h), as installed.
i=0
for lib in "$@"; do
    i=$((i + 1))
    mkdir -p "$dir/lib$i/cpprof"
    cp "$lib" "$dir/lib$i/libcpprof.so"
    upper=$(dirname "$lib")/libcpprof-upper.so
    [ ! -f "$upper" ] || cp "$upper" "$dir/lib$i/cpprof/"
done
mkdir "$dir/data" "$dir/sock"
chmod -R a+rX "$dir"
[ "$(id -u)" != 0 ] || chown -R postgres "$dir/data" "$dir/sock"
as_pg "$PG_BIN/initdb -D $dir/data -A trust" >/dev/null || exit 1
opts="-k $dir/sock -p 5432 -c listen_addresses="
start() {
    serve=
    [ -z "$1" ] || [ -z "$SERVE" ] || serve="CPPROF_HTTP=127.0.0.1:$SERVE"
    as_pg "LD_PRELOAD=$1 $serve $PG_BIN/pg_ctl -D $dir/data -o '$opts' -l $dir/data/log -w start" >/dev/null
}
stop() { as_pg "$PG_BIN/pg_ctl -D $dir/data -m fast -w stop" >/dev/null; }
bench="$PG_BIN/pgbench -h $dir/sock -p 5432"
start ""
as_pg "$bench -i -s 1 postgres" >/dev/null 2>&1 || exit 1
stop
hz=$(getconf CLK_TCK)
conns=$((2 * TX))
printf '%-6s %-5s %8s %12s %12s\n' round mode conn/s pm_ms/conn backend_ms/conn
for r in $(seq "$ROUNDS"); do
    m=0
    while [ $m -le $# ]; do
        lib=; [ $m = 0 ] || lib=$dir/lib$m/libcpprof.so
        start "$lib"
        pm=$(head -n 1 "$dir/data/postmaster.pid")
        before=$(awk '{ print $14 + $15, $16 + $17 }' "/proc/$pm/stat")
        tps=$(as_pg "$bench -C -S -c 2 -j 2 -t $TX postgres 2>/dev/null" |
              sed -n 's/^tps = \([0-9.]*\).*/\1/p')
        after=$(awk '{ print $14 + $15, $16 + $17 }' "/proc/$pm/stat")
        stop
        echo "$r $m $tps $before $after" | awk -v hz="$hz" -v n="$conns" '{
            printf "%-6s %-5s %8.1f %12.2f %12.2f\n", $1, ($2 ? "lib" $2 : "none"),
                $3, ($6 - $4) * 1000 / hz / n, ($7 - $5) * 1000 / hz / n }'
        m=$((m + 1))
    done
done | tee "$dir/rounds"
echo "medians:"
i=0
for name in none "$@"; do
    label=none; [ $i = 0 ] || label=lib$i
    awk -v l="$label" '$2 == l' "$dir/rounds" | awk -v name="$name" '
        { t[NR] = $3; p[NR] = $4; b[NR] = $5 }
        function med(a, n,   i, j, x) {
            for (i = 2; i <= n; i++)
                for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
                    x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        END { printf "%8.1f conn/s %8.2f pm_ms/conn %8.2f backend_ms/conn  %s\n",
              med(t, NR), med(p, NR), med(b, NR), name }'
    i=$((i + 1))
done
