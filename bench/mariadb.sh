#!/bin/sh
# mariadb.sh -- cpprof in zero-code mode on Debian's mariadbd (package
# mariadb-server), the deployed shape of a thread-per-connection server:
#   1. census time with CONNS (default 1,000) idle client connections,
#      each a mariadbd thread waiting in its read for the next command:
#      after one census before they connect (mariadbd's symbols loaded),
#      the first census of them (every thread new) and REPEATS more (threads that
#      have not run since are taken from the last census); each timed by
#      curl's total time for /debug/pprof/goroutine?debug=1, so the figure
#      includes symbolizing and writing 1,000 stacks.  Goal: first at most
#      25 ms, repeats at most 5 ms.
#   2. stacks of threads blocked in the kernel under load (mysqlslap
#      writing, so that commits wait in fdatasync and friends): for each of
#      ROUNDS censuses (debug=2), eu-stack (elfutils) is run right after,
#      and each thread in a system call in both is compared, function by
#      function, from the leaf to the thread's start: equal, marked a guess
#      (cpprof.guessedCallers), or different.
# Prints `conns N first_ms M repeat_ms_median M repeat_ms_max M` and
# `blocked_threads N equal E guessed G different D` with a few different
# ones.  Runs as root: mariadbd runs as the mysql user from its start, as
# systemd starts it (a server that drops root itself is not dumpable, and
# its census declines to read stacks; docs/limits.md), through setpriv:
# runuser's PAM session would put the open-files limit back to 1,024.
#
# Usage: bench/mariadb.sh [BUILD_DIR [CONNS [REPEATS [ROUNDS]]]]
#        (build, 1000, 10, 40)
set -eu
build=$(cd "${1:-build}" && pwd)
conns=${2:-1000} repeats=${3:-10} rounds=${4:-40}
lib=$build/.libs/libcpprof.so
[ -f "$lib" ] || { echo "mariadb.sh: no $lib: build first" >&2; exit 2; }
for c in mariadbd mariadb-install-db mysqlslap eu-stack python3 curl; do
    command -v $c >/dev/null || [ -x /usr/sbin/$c ] || {
        echo "mariadb.sh: $c is missing: apt-get install mariadb-server mariadb-client elfutils python3 curl" >&2
        exit 2
    }
done
[ "$(id -u)" = 0 ] || { echo "mariadb.sh: run as root (mariadbd runs as mysql)" >&2; exit 2; }

# The client's CONNS sockets and the server's, over the usual 1,024.
ulimit -n $((conns * 2 + 1024))
tmp=$(mktemp -d /tmp/cpprof-mariadb.XXXXXX)
chmod 755 "$tmp"
chown mysql "$tmp"
server= holder=
cleanup() {
    [ -z "$holder" ] || kill "$holder" 2>/dev/null || true
    [ -z "$server" ] || { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; } || true
    [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
port=$((20000 + $$ % 20000))
base=http://127.0.0.1:$port/debug/pprof

mariadb-install-db --no-defaults --datadir="$tmp/data" --user=mysql \
    --auth-root-authentication-method=normal >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; exit 1; }
setpriv --reuid=mysql --regid=mysql --init-groups env LD_PRELOAD="$lib" CPPROF_HTTP=127.0.0.1:$port \
    /usr/sbin/mariadbd --no-defaults --datadir="$tmp/data" \
    --socket="$tmp/sock" --skip-networking --pid-file="$tmp/pid" \
    --max-connections=$((conns + 100)) --thread-cache-size=$((conns + 100)) \
    --open-files-limit=$((conns * 2 + 1024)) \
    --innodb-flush-log-at-trx-commit=1 >"$tmp/server.log" 2>&1 &
server=$!
i=0
until [ -S "$tmp/sock" ] && curl -sf -o /dev/null "$base/"; do
    i=$((i + 1))
    [ $i -lt 600 ] && kill -0 $server 2>/dev/null ||
        { cat "$tmp/server.log" >&2; echo "mariadb.sh: mariadbd did not start" >&2; exit 1; }
    sleep 0.1
done

# census_ms FILE: one goroutine?debug=1, its body in FILE; prints its ms.
census_ms() {
    curl -sf -o "$1" -w '%{time_total}\n' "$base/goroutine?debug=1" |
        awk '{ printf "%.1f\n", $1 * 1000 }'
}

# --- 1. CONNS idle connections: a minimal client of MariaDB's protocol
# (handshake, root without a password over the socket), holding each
# connection open until its stdin closes.
cat >"$tmp/hold.py" <<'EOF'
import socket, struct, sys
path, n = sys.argv[1], int(sys.argv[2])
def packet(s):
    head = b''
    while len(head) < 4:
        head += s.recv(4 - len(head))
    size = head[0] | head[1] << 8 | head[2] << 16
    body = b''
    while len(body) < size:
        body += s.recv(size - len(body))
    return head[3], body
held = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    seq, greeting = packet(s)
    caps = 0x200 | 0x8000 | 0x1    # PROTOCOL_41, SECURE_CONNECTION, LONG_PASSWORD
    body = struct.pack('<IIB23x', caps, 1 << 24, 33) + b'root\0' + b'\0'
    s.sendall(struct.pack('<I', len(body))[:3] + bytes([seq + 1]) + body)
    _, ok = packet(s)
    if ok[:1] != b'\0':
        sys.exit('login refused: %r' % ok)
    held.append(s)
print('connected', len(held), flush=True)
sys.stdin.read()
EOF
# A census before the connections: it loads mariadbd's symbols, which
# the census of the connection threads should not be charged with.
warmup=$(census_ms "$tmp/warmup.txt")
mkfifo "$tmp/hold.in"
python3 "$tmp/hold.py" "$tmp/sock" "$conns" <"$tmp/hold.in" >"$tmp/hold.out" 2>&1 &
holder=$!
exec 3>"$tmp/hold.in"
i=0
until grep -q '^connected' "$tmp/hold.out"; do
    i=$((i + 1))
    [ $i -lt 1200 ] && kill -0 $holder 2>/dev/null ||
        { cat "$tmp/hold.out" "$tmp/server.log" >&2; echo "mariadb.sh: the connections failed" >&2; exit 1; }
    sleep 0.1
done
sleep 1
threads=$(ls /proc/$server/task | wc -l)
first=$(census_ms "$tmp/first.txt")
total=$(sed -n 's/^goroutine profile: total //p' "$tmp/first.txt")
i=0
: >"$tmp/repeats"
while [ $i -lt "$repeats" ]; do
    census_ms "$tmp/repeat.txt" >>"$tmp/repeats"
    i=$((i + 1))
done
sort -n "$tmp/repeats" | awk -v conns="$conns" -v threads="$threads" \
    -v total="$total" -v first="$first" -v warmup="$warmup" '
    { v[NR] = $1 }
    END { printf "conns %d threads %d censused %d warmup_ms %s first_ms %s repeat_ms_median %s repeat_ms_max %s\n",
                 conns, threads, total, warmup, first, v[int((NR + 1) / 2)], v[NR] }'
exec 3>&-
wait "$holder" 2>/dev/null || true
holder=

# --- 2. Blocked threads' stacks under a write load, against eu-stack.
mysqlslap --socket="$tmp/sock" -uroot --concurrency=16 --iterations=1000 \
    --number-of-queries=200 --auto-generate-sql \
    --auto-generate-sql-load-type=write >"$tmp/slap.out" 2>&1 &
slap=$!
sleep 2
i=0
while [ $i -lt "$rounds" ] && kill -0 $slap 2>/dev/null; do
    eu-stack -i -p "$server" >"$tmp/before$i.txt" 2>/dev/null || true
    grep -H . /proc/$server/task/*/schedstat >"$tmp/ran_before$i.txt" 2>/dev/null || true
    curl -sf -o "$tmp/census$i.txt" "$base/goroutine?debug=2" || true
    grep -H . /proc/$server/task/*/schedstat >"$tmp/ran_after$i.txt" 2>/dev/null || true
    eu-stack -i -p "$server" >"$tmp/after$i.txt" 2>/dev/null || true
    i=$((i + 1))
done
kill $slap 2>/dev/null || true
wait $slap 2>/dev/null || true
# Threads compared: the program's (not cpprof's own, pprof_internal),
# blocked in cpprof's census, that did not run from the end of the
# eu-stack before the census to the start of the one after it (their
# schedstat run time unchanged: a thread that ran may have been somewhere
# else during the census and come back) and whose stacks eu-stack saw the
# same both times; the others are counted apart.  Names are compared
# without arguments and libc's alias prefixes (__GI___poll is poll).
cat >"$tmp/compare.py" <<'EOF'
import re, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def norm(name):
    name = name.split('(')[0].strip()
    if not name or re.search(r'\+0x[0-9a-f]+$', name):
        return '?'  # no symbol: cpprof says object+offset, eu-stack nothing
    return re.sub(r'^(__GI_)?_*', '', name)
def ours(path):
    threads, tid = {}, None
    for line in open(path, errors='replace'):
        m = re.match(r'thread (\d+) ".*" \[(\w+)', line)
        if m:
            own = 'pprof_internal' in line
            tid = int(m.group(1)) if m.group(2) != 'running' and not own else None
            if tid:
                threads[tid] = []
        elif tid and line.strip() and not line.startswith('\t'):
            name = line.rstrip()
            threads[tid].append(name[:-5] if name.endswith('(...)') else name)
    return threads
def theirs(path):
    threads, tid = {}, None
    for line in open(path, errors='replace'):
        m = re.match(r'TID (\d+):', line)
        if m:
            tid = int(m.group(1))
            threads[tid] = []
            continue
        m = re.match(r'#\d+\s+0x[0-9a-f]+(?:\s+(?:- \d+\s+)?(.+))?$', line.rstrip())
        if m and tid:
            threads[tid].append((m.group(1) or '').strip())
    return threads
def run_ns(path):
    ran = {}
    for line in open(path):
        m = re.match(r'/proc/\d+/task/(\d+)/schedstat:(\d+)', line)
        if m:
            ran[int(m.group(1))] = int(m.group(2))
    return ran
n = equal = guessed = different = moved = 0
shown = []
for r in range(rounds):
    try:
        a = ours('%s/census%d.txt' % (tmp, r))
        b = theirs('%s/before%d.txt' % (tmp, r))
        b2 = theirs('%s/after%d.txt' % (tmp, r))
        r0 = run_ns('%s/ran_before%d.txt' % (tmp, r))
        r1 = run_ns('%s/ran_after%d.txt' % (tmp, r))
    except OSError:
        continue
    for tid, frames in a.items():
        other = b.get(tid)
        if not frames or not other:
            continue
        fa, fb = [norm(f) for f in frames], [norm(f) for f in other]
        if other != b2.get(tid) or tid not in r0 or r0[tid] != r1.get(tid):
            moved += 1
            continue
        n += 1
        if 'cpprof.guessedCallers' in frames:
            guessed += 1
        elif fa == fb:
            equal += 1
        else:
            different += 1
            if len(shown) < 3:
                shown.append((tid, frames, other))
print('blocked_threads %d equal %d guessed %d different %d ran_meanwhile %d'
      % (n, equal, guessed, different, moved))
for tid, x, y in shown:
    print('different %d\n  cpprof:   %s\n  eu-stack: %s'
          % (tid, ' <- '.join(x), ' <- '.join(y)))
EOF
python3 "$tmp/compare.py" "$tmp" "$i"
