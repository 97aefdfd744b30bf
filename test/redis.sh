#!/bin/sh
# redis.sh -- Debian's redis-server (on jemalloc) with cpprof preloaded in
# zero-code mode: it starts, answers PING, serves a
# redis-benchmark run while its heap profile and a 2-second CPU profile are
# fetched, and answers PING after; the heap profile holds redis's
# allocations (its stacks run through zmalloc) or the heap endpoint says why
# there is none; neither profile has a frame of cpprof's in redis's samples
# (its own are labelled pprof_internal).
set -u
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER" >&2; exit 77 ;;
esac
. "$(dirname "$0")/http_lib.sh"
PRELOAD=$top_builddir/.libs/libcpprof.so
[ -f "$PRELOAD" ] || fail "no $PRELOAD"
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null ||
    fail "no redis-server or redis-benchmark: install redis-server redis-tools"

ping() {
    redis-cli -p "$rport" PING 2>/dev/null
}

# Redis listens on port + port_span (random_port).
launch_redis() {
    rport=$((port + port_span))
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port redis-server \
        --port "$rport" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$tmp" >"$tmp/redis.out" 2>"$tmp/redis.err" &
}
redis_serving() {
    [ "$(ping)" = PONG ] && answers_index
}
serve_on_free_port redis-server "$tmp/redis.err" launch_redis redis_serving
echo "ok: redis-server with cpprof preloaded answers PING"

redis-benchmark -p "$rport" -q -n 50000 -c 20 -t set,get,lpush,lpop \
    >"$tmp/bench.raw" 2>&1 &
bench_pid=$!
sleep 1
code=$(fetch profile "$base/profile?seconds=2")
[ "$code" = 200 ] || fail "/profile answered $code: $(cat "$tmp/profile.body")"
"$GOCHECK" "$tmp/profile.body" >"$tmp/profile.check" ||
    fail "google/pprof rejects redis's CPU profile"
no_cpprof_frames() {
    frames=$(cpprof_frames "$1")
    [ -z "$frames" ] ||
        fail "redis's $1 profile has cpprof's frames in its samples: $(echo "$frames" | head -8)"
    echo "ok: $1: no cpprof frame in redis's samples"
}
no_cpprof_frames profile
code=$(fetch heap "$base/heap")
case $code in
200)
    "$GOCHECK" -frames "$tmp/heap.body" >"$tmp/heap.check" ||
        fail "google/pprof rejects redis's heap profile"
    grep -q '^frame zmalloc' "$tmp/heap.check" ||
        fail "the heap profile has no allocation by redis's zmalloc: $(cat "$tmp/heap.check")"
    echo "ok: heap profile with redis's allocations ($(grep '^samples' "$tmp/heap.check"))"
    no_cpprof_frames heap ;;
501)
    grep -q 'no heap profile: ' "$tmp/heap.body" ||
        fail "/heap 501 without a reason: $(cat "$tmp/heap.body")"
    echo "ok: no heap profile, and why: $(cat "$tmp/heap.body")" ;;
*) fail "/heap answered $code: $(cat "$tmp/heap.body")" ;;
esac
wait "$bench_pid" || fail "redis-benchmark: status $?: $(cat "$tmp/bench.raw")"
# Its progress lines end in CR; the final one per test in LF.
tr '\r' '\n' <"$tmp/bench.raw" | sed 's/^ *//' | grep 'requests per second' \
    >"$tmp/bench.out"
for t in SET GET LPUSH LPOP; do
    grep -q "^$t: .* requests per second" "$tmp/bench.out" ||
        fail "redis-benchmark has no $t figure: $(cat "$tmp/bench.out")"
done
echo "ok: redis-benchmark: $(tr '\n' ';' <"$tmp/bench.out")"
[ "$(ping)" = PONG ] || fail "redis-server stopped answering PING"
kill -TERM "$demo_pid"
wait "$demo_pid" || fail "redis-server exited with status $?: $(tail -5 "$tmp/redis.out")"
demo_pid=
echo "ok: redis-server answers PING after and exits cleanly"
