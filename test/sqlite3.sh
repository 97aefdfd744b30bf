#!/bin/sh
# sqlite3.sh -- Debian's sqlite3 shell with cpprof preloaded in zero-code
# mode: a program and a library (libsqlite3) nobody here wrote, stripped
# and built without frame pointers, so every stack is walked by call-frame
# information.  The shell reads its SQL from a FIFO the test holds open, so
# it stays up, idle in read(), between statements.  Checked:
#   - idle: the goroutine census lists its main thread blocked in read()
#     under fgets, its stack reaching __libc_start_call_main;
#   - a recursive query of 5,000,000 rows (about 1.8 s of CPU here), with a
#     2-second CPU profile taken while it runs: google/pprof's parser
#     accepts it, and at least 99% of the program's samples (every sample
#     not labelled pprof_internal, cpprof's own threads) carry the chain
#     __libc_start_call_main -> sqlite3_step -> sqlite3VdbeExec (100% seen);
#   - the heap profile (one sample per 4 KiB allocated) holds allocations
#     made through sqlite3Malloc;
#   - the query's answer is the right one (its sums are known in closed
#     form), and the shell exits 0 once its input ends.
set -u
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER (sqlite3 is not instrumented; zero_code.sh covers preloading a sanitizer build)" >&2; exit 77 ;;
esac
. "$(dirname "$0")/http_lib.sh"
PRELOAD=$top_builddir/.libs/libcpprof.so
[ -f "$PRELOAD" ] || fail "no $PRELOAD"
command -v sqlite3 >/dev/null || fail "no sqlite3: apt-get install sqlite3"

ROWS=5000000
QUERY="WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < $ROWS)
 SELECT count(*), sum(x), sum(length(printf('%08x', x))) FROM c;"
# n rows, their sum n(n+1)/2, and 8 hex digits each.
WANT="$ROWS|$((ROWS * (ROWS + 1) / 2))|$((8 * ROWS))"

mkfifo "$tmp/sql" || fail "mkfifo"
# Held open read-write by the test alone (the shell gets 3>&-), so neither
# end's open waits for the other and the shell sees the end of its input
# when the test closes it.
exec 3<>"$tmp/sql"
launch_sqlite() {
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port CPPROF_MEM_PROFILE_RATE=4096 \
        sqlite3 -batch \
        <"$tmp/sql" >"$tmp/sqlite.out" 2>"$tmp/sqlite.err" 3>&- &
}
serve_on_free_port sqlite3 "$tmp/sqlite.err" launch_sqlite answers_index
echo "ok: sqlite3 with cpprof preloaded serves"

code=$(fetch census "$base/goroutine?debug=1")
[ "$code" = 200 ] || fail "/goroutine?debug=1 answered $code: $(cat "$tmp/census.body")"
awk '/^[0-9]+ @/ { read = fgets = start = 0 }
     /__libc_read/ { read = 1 }
     read && /_IO_fgets/ { fgets = 1 }
     fgets && /__libc_start_call_main/ { ok = 1 }
     END { exit !ok }' "$tmp/census.body" ||
    fail "the census shows no thread in read() under fgets down to main: $(cat "$tmp/census.body")"
echo "ok: the idle shell's main thread is listed in read() under fgets"

printf '%s\n' "$QUERY" >&3
code=$(fetch profile "$base/profile?seconds=2")
[ "$code" = 200 ] || fail "/profile answered $code: $(cat "$tmp/profile.body")"
"$GOCHECK" -chain '__libc_start_call_main;sqlite3_step;sqlite3VdbeExec' \
    -where '!pprof_internal' "$tmp/profile.body" >"$tmp/profile.check" ||
    fail "google/pprof rejects sqlite3's CPU profile"
judge_chain sqlite3 "$tmp/profile.check" '__libc_start_call_main;sqlite3_step;sqlite3VdbeExec'

code=$(fetch heap "$base/heap")
[ "$code" = 200 ] || fail "/heap answered $code: $(cat "$tmp/heap.body")"
"$GOCHECK" -frames "$tmp/heap.body" >"$tmp/heap.check" ||
    fail "google/pprof rejects sqlite3's heap profile"
grep -q '^frame sqlite3Malloc ' "$tmp/heap.check" ||
    fail "the heap profile has no allocation through sqlite3Malloc: $(grep -v '^frame' "$tmp/heap.check")"
echo "ok: the heap profile holds sqlite3Malloc's allocations ($(grep '^samples' "$tmp/heap.check"), $(awk '$1 == "total" && $2 == 0 { print $3 }' "$tmp/heap.check") objects)"

exec 3>&- # the query's rest, then the end of its input
await_exit sqlite3 "$tmp/sqlite.err"
[ "$(cat "$tmp/sqlite.out")" = "$WANT" ] ||
    fail "sqlite3 answered '$(cat "$tmp/sqlite.out")', not '$WANT'"
[ ! -s "$tmp/sqlite.err" ] || fail "sqlite3 wrote to stderr: $(cat "$tmp/sqlite.err")"
echo "ok: the query's answer is right and sqlite3 exits 0"
