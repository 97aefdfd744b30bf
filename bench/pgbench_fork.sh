#!/bin/sh
# pgbench_fork.sh -- what cpprof loaded into PostgreSQL's postmaster costs
# a pre-forking server, new connections and established ones alike.
#
# Each round starts the postmaster once per mode, in turn (the order
# rotates from round to round, so that no mode always runs first), and
# runs against it:
#   -C  pgbench -C -S -c 2 -j 2 -t TX: a new connection (a postmaster
#       fork, a backend that starts, answers one SELECT and exits) per
#       transaction: connections per second, and per connection the
#       postmaster's CPU (utime+stime of /proc/PID/stat) and its
#       backends' (cutime+cstime: the children it reaped), in ms, and
#       their page faults (minflt, cminflt: counts that a busy machine
#       does not blur, each a page copied or mapped, microseconds on a
#       small VM);
#   -S  pgbench -S -c 2 -j 2 -T SECS: two established connections
#       answering SELECTs: transactions per second, and the backends' CPU
#       per transaction in us (their start included: a few ms in SECS).
# The modes (MODES, default "off serve serve0"):
#   off     the postmaster as is;
#   lib     LD_PRELOAD=libcpprof.so, not serving;
#   serve   LD_PRELOAD=libcpprof.so CPPROF_HTTP=127.0.0.1:SERVE, so that
#           each backend is a fork of a serving process (http_forks.c);
#   serve0  the same with CPPROF_HTTP_FORKS=0: forks are not workers, so
#           what is left is what a backend pays for cpprof being loaded
#           in a serving process.
# Then per mode the medians, and against off: the ratio of the medians
# and the median of the rounds' own ratios (each round's off is the run
# nearest in time).
#
# Usage: bench/pgbench_fork.sh [LIBRARY...]
#   (default: the build's .libs/libcpprof.so; with more than one, the
#   modes other than off run with each, named mode.N for the Nth).
#   ROUNDS (default 5), TX transactions per client for -C (default 150),
#   SECS for -S (default 5), SERVE the port (default 0: the kernel's
#   pick).  About 40 s a round with the default modes.  Needs
#   PostgreSQL's initdb, pg_ctl and postgres (PG_BIN, default
#   /usr/lib/postgresql/15/bin) and pgbench.  Run as root it runs
#   PostgreSQL as the user postgres.
set -u
: "${top_builddir:=.}" "${ROUNDS:=5}" "${TX:=150}" "${SECS:=5}"
: "${SERVE:=0}" "${MODES:=off serve serve0}"
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
# The runs of a round: "mode libindex" (0 for off).
runs=
for mode in $MODES; do
    case $mode in
    off) runs="$runs off:0" ;;
    lib | serve | serve0)
        i=0
        for lib in "$@"; do i=$((i + 1)); runs="$runs $mode:$i"; done ;;
    *) echo "unknown mode $mode" >&2; exit 1 ;;
    esac
done
nruns=$(echo $runs | wc -w)
label() { # mode:i -> mode, or mode.i past the first library
    case $1 in *:0 | *:1) echo "${1%:*}" ;; *) echo "${1%:*}.${1#*:}" ;; esac
}
mkdir "$dir/data" "$dir/sock"
chmod -R a+rX "$dir"
[ "$(id -u)" != 0 ] || chown -R postgres "$dir/data" "$dir/sock"
as_pg "$PG_BIN/initdb -D $dir/data -A trust" >/dev/null || exit 1
opts="-k $dir/sock -p 5432 -c listen_addresses="
start() { # mode:i
    env=
    mode=${1%:*} i=${1#*:}
    [ "$mode" = off ] || env="LD_PRELOAD=$dir/lib$i/libcpprof.so"
    case $mode in
    serve) env="$env CPPROF_HTTP=127.0.0.1:$SERVE" ;;
    serve0) env="$env CPPROF_HTTP=127.0.0.1:$SERVE CPPROF_HTTP_FORKS=0" ;;
    esac
    # cpprof's lines (the shell pg_ctl starts postgres with is a wrapper)
    # kept out of the table, and shown if the start fails.
    as_pg "$env $PG_BIN/pg_ctl -D $dir/data -o '$opts' -l $dir/data/log -w start" \
        >/dev/null 2>"$dir/start.err" || { cat "$dir/start.err" >&2; exit 1; }
}
stop() { as_pg "$PG_BIN/pg_ctl -D $dir/data -m fast -w stop" >/dev/null; }
children() { cat /proc/"$1"/task/*/children 2>/dev/null | wc -w; }
# Until the postmaster has reaped the backends of a run (its count of
# children back to n), so that cutime holds all of their CPU; 5 s at most.
reaped() {
    k=0
    while [ "$(children "$1")" -gt "$2" ] && [ $k -lt 100 ]; do
        sleep 0.05
        k=$((k + 1))
    done
}
# CPU ticks and minor faults, the postmaster's own and its reaped children's.
cpu() { awk '{ print $14 + $15, $16 + $17, $10, $11 }' "/proc/$1/stat"; }
bench="$PG_BIN/pgbench -h $dir/sock -p 5432"
start off:0
as_pg "$bench -i -s 1 postgres" >/dev/null 2>&1 || exit 1
stop
hz=$(getconf CLK_TCK)
echo "$ROUNDS rounds; -C: pgbench -C -S -c 2 -j 2 -t $TX; -S: pgbench -S -c 2 -j 2 -T $SECS"
printf '%-5s %-8s %8s %7s %7s %7s %7s %9s %9s\n' round mode C_conn/s C_pm_ms \
    C_be_ms C_pm_pf C_be_pf S_tps S_be_us/tx
for r in $(seq "$ROUNDS"); do
    # This round's order: the runs rotated by r - 1.
    set -- $runs
    k=$(((r - 1) % nruns))
    while [ $k -gt 0 ]; do x=$1; shift; set -- "$@" "$x"; k=$((k - 1)); done
    for run in "$@"; do
        start "$run"
        pm=$(head -n 1 "$dir/data/postmaster.pid")
        base=$(children "$pm")
        c0=$(cpu "$pm")
        ctps=$(as_pg "$bench -C -S -c 2 -j 2 -t $TX postgres 2>/dev/null" |
               sed -n 's/^tps = \([0-9.]*\).*/\1/p')
        reaped "$pm" "$base"
        c1=$(cpu "$pm")
        out=$(as_pg "$bench -S -c 2 -j 2 -T $SECS postgres 2>/dev/null")
        stps=$(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
        stx=$(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
        reaped "$pm" "$base"
        c2=$(cpu "$pm")
        stop
        echo "$r $(label "$run") ${ctps:-0} $c0 $c1 ${stps:-0} ${stx:-0} $c2" |
            awk -v hz="$hz" -v n="$((2 * TX))" '{
                printf "%-5s %-8s %8.1f %7.2f %7.2f %7.1f %7.1f %9.1f %9.1f\n",
                    $1, $2, $3, ($8 - $4) * 1000 / hz / n,
                    ($9 - $5) * 1000 / hz / n, ($10 - $6) / n, ($11 - $7) / n,
                    $12, ($13 > 0 ? ($15 - $9) * 1e6 / hz / $13 : 0) }'
    done
done | tee "$dir/rounds"
echo "medians (ratio: of the medians to off's; median of the rounds' own ratios):"
printf '%-8s %8s %7s %7s %7s %7s %9s %9s   %-11s %-11s %-11s\n' mode C_conn/s \
    C_pm_ms C_be_ms C_pm_pf C_be_pf S_tps S_be_us/tx C_conn/s S_tps S_be_us/tx
awk -v order="$(for run in $runs; do label "$run"; done)" '
    function med(a, n,   s, i, j, x) {
        for (i = 1; i <= n; i++) s[i] = a[i]
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && s[j - 1] > s[j]; j--) {
                x = s[j]; s[j] = s[j - 1]; s[j - 1] = x }
        return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
    { for (c = 3; c <= 9; c++) v[$2, $1, c] = $c; rounds[$1] = 1 }
    END {
        nm = split(order, modes, "\n")
        for (m = 1; m <= nm; m++) {
            md = modes[m]
            for (c = 3; c <= 9; c++) {
                n = 0
                for (r in rounds) if ((md, r, c) in v) a[++n] = v[md, r, c]
                M[md, c] = med(a, n)
            }
            line = sprintf("%-8s %8.1f %7.2f %7.2f %7.1f %7.1f %9.1f %9.1f",
                           md, M[md, 3], M[md, 4], M[md, 5], M[md, 6],
                           M[md, 7], M[md, 8], M[md, 9])
            if (md != "off") {
                split("3 8 9", cols, " ")
                for (k = 1; k <= 3; k++) {
                    c = cols[k]; n = 0
                    for (r in rounds)
                        if (v["off", r, c] > 0 && (md, r, c) in v)
                            a[++n] = v[md, r, c] / v["off", r, c]
                    line = line sprintf("   %.3f %.3f",
                        M["off", c] > 0 ? M[md, c] / M["off", c] : 0, med(a, n))
                }
            }
            print line
        }
    }' "$dir/rounds"
