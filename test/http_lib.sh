# http_lib.sh -- sourced by the test/http_*.sh scripts and bench/attribution.sh.
#
# Starts the demo job runner serving /debug/pprof/ on a free loopback port
# and makes sure it dies with the script, whatever way the script ends.  The
# port is chosen at random and retried when taken, because the demo cannot
# tell us a port the kernel picked.  Everything a run writes (profiles, go
# tool pprof's cache and HOME) lives in one temp dir removed at exit.

# Where the build tree is: make check runs tests from the top build dir.
: "${top_builddir:=.}"
# The demo; a cross build runs it through an emulator (test/cross/aarch64.sh).
: "${JOBRUNNER:=$top_builddir/examples/jobrunner}"
# ports.sh beside this file (a script sourcing this one from elsewhere
# names this directory in $test_dir first).
. "${test_dir:-$(dirname "$0")}/ports.sh"
GOCHECK=$top_builddir/test/gocheck/gocheck
PPROF=$top_builddir/test/pprof/pprof

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-http.XXXXXX")
demo_pid=

cleanup() {
    if [ -n "$demo_pid" ]; then
        kill "$demo_pid" 2>/dev/null
        wait "$demo_pid" 2>/dev/null
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# go tool pprof writes its cache and history under HOME.
export HOME=$tmp GOCACHE=$tmp/gocache PPROF_TMPDIR=$tmp/pprof

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# zero_code_preload: sets LIB (the built libcpprof.so) and PRELOAD, what
# a program run in zero-code mode preloads.  ASan's runtime must be a
# process's first library, so an ASan build preloads it ahead of the
# instrumented libcpprof.so (the programs themselves are not instrumented:
# only cpprof's code is checked, and their leaks are theirs, hence no leak
# check).  TSan's runtime cannot start in a process already running
# threads it did not see created (the server's, started at load), so a
# TSan build skips the calling test.
zero_code_preload() {
    LIB=$top_builddir/.libs/libcpprof.so
    [ -f "$LIB" ] || fail "no $LIB"
    PRELOAD=$LIB
    case ${CPPROF_SANITIZER:-none} in
    asan)
        asan_rt=$(ldd "$LIB" | awk '/libasan\.so/ { print $3 }')
        [ -f "$asan_rt" ] || fail "the ASan build of $LIB names no libasan"
        PRELOAD="$asan_rt $LIB"
        ASAN_OPTIONS=${ASAN_OPTIONS:-}:detect_leaks=0
        export ASAN_OPTIONS
        ;;
    tsan)
        echo "SKIP: under TSan, whose runtime cannot start in a process already running threads" >&2
        exit 77
        ;;
    esac
}

# start_demo ARGS...: runs the demo with --addr on a free port, waits (at
# most 10 s) until it says it is serving, and sets $port, $base, $demo_pid.
# The demo's stdout goes to $tmp/demo.out.  It binds $DEMO_HOST (default
# 127.0.0.1); $base always reaches it through loopback.
start_demo() {
    start_program "$JOBRUNNER" "$@"
}

# serve_on_free_port NAME ERRFILE LAUNCH READY: picks a random port
# (random_port), sets $port and $base, runs the shell function LAUNCH,
# which starts the program in the background, and waits up to 10 s for
# the function READY to succeed; a program that dies
# (its port taken, say) or never gets ready is killed and tried again on
# another port, 8 times in all.  Sets $demo_pid (killed at exit); fails
# with NAME and the contents of ERRFILE when no attempt served.
serve_on_free_port() {
    sofp_name=$1 sofp_err=$2 sofp_launch=$3 sofp_ready=$4
    for attempt in 1 2 3 4 5 6 7 8; do
        random_port
        base=http://127.0.0.1:$port/debug/pprof
        $sofp_launch
        demo_pid=$!
        for tick in $(seq 100); do
            $sofp_ready && return 0
            kill -0 "$demo_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill "$demo_pid" 2>/dev/null
        wait "$demo_pid" 2>/dev/null
        demo_pid=
    done
    fail "$sofp_name never served: $(cat "$sofp_err")"
}

# answers_index: whether the server at $base answers its index page.
answers_index() {
    curl -s -o /dev/null --max-time 2 "$base/"
}

# start_program PROGRAM ARGS...: start_demo for another program that takes
# --addr first and prints "serving ..." as the demo does.
start_program() {
    sp_program=$1
    shift
    sp_args=$*
    serve_on_free_port "$sp_program" "$tmp/demo.err" launch_program \
        program_serving
}
launch_program() {
    # Emptied here, not by the background job's own redirection, which may
    # run after program_serving has read the last program's "serving" line.
    : >"$tmp/demo.out"
    : >"$tmp/demo.err"
    # shellcheck disable=SC2086 # the arguments are words, as given
    "$sp_program" --addr "${DEMO_HOST:-127.0.0.1}:$port" $sp_args \
        >>"$tmp/demo.out" 2>>"$tmp/demo.err" &
}
program_serving() {
    grep -qsE "^serving (http://)?[^ ]*:$port(/|\$)" "$tmp/demo.out"
}

# stop_demo: asks the demo to finish (it prints its true CPU shares on the
# way out) and waits for it.
stop_demo() {
    kill -TERM "$demo_pid"
    wait "$demo_pid" || fail "demo exited with status $?"
    demo_pid=
}

# await_exit NAME ERRFILE: waits for $demo_pid, a program told to end (its
# input closed, a stop file made), to exit, at most 60 s (a bound on a
# hang, not a timing), and fails unless it exits with status 0 (naming
# NAME and showing ERRFILE).
await_exit() {
    for tick in $(seq 600); do
        kill -0 "$demo_pid" 2>/dev/null || break
        sleep 0.1
    done
    ! kill -0 "$demo_pid" 2>/dev/null || fail "$1 did not end when told to"
    wait "$demo_pid" || fail "$1 exited with status $?: $(cat "$2")"
    demo_pid=
}

# judge_chain NAME CHECKFILE CHAIN: from gocheck -chain's output in
# CHECKFILE, fails unless at least 10 samples were judged and 99% of them
# carry the chain (listing the incomplete), else prints "ok: N of M
# samples carry the chain (CHAIN)".  Not in $(...): its fail must end the
# script.
judge_chain() {
    awk '$1 == "chain" && $2 == "judged" {
             printf "%d of %d samples carry the chain\n", $5, $3
             ok = $3 >= 10 && $5 >= 0.99 * $3 }
         END { exit !ok }' "$2" >"$tmp/chain.judged" ||
        fail "$1's stacks: $(cat "$tmp/chain.judged") (at least 10 wanted, 99% of them complete): $(grep '^chain incomplete' "$2")"
    echo "ok: $(cat "$tmp/chain.judged") ($3)"
}

# fetch NAME URL [CURL ARGS...]: GETs URL into $tmp/NAME.body, headers into
# $tmp/NAME.hdr (lower-cased names, no CRs), and prints the status code.
fetch() {
    name=$1 url=$2
    shift 2
    curl -s --max-time 30 -D "$tmp/$name.rawhdr" -o "$tmp/$name.body" \
        -w '%{http_code}\n' "$@" "$url"
    tr -d '\r' <"$tmp/$name.rawhdr" |
        awk -F': ' 'NR > 1 && NF { printf "%s: %s\n", tolower($1), $2 }' \
            >"$tmp/$name.hdr"
}

# cpprof_frames NAME: the frames of profile $tmp/NAME.body's samples
# outside pprof_internal that lie in cpprof's src/*.c or src/upper/*.c, but for a call of a
# public cpprof_* function (the program called cpprof) and what that call
# runs; counted, most first.  None: cpprof shows nowhere as the program.
cpprof_frames() {
    go tool pprof -traces -lines -tagignore='pprof_internal=.' \
        "$tmp/$1.body" 2>"$tmp/pprof.err" >"$tmp/$1.traces" ||
        fail "pprof -traces $1: $(cat "$tmp/pprof.err")"
    awk 'function judge(   i, api) {
             for (i = n; i >= 1; i--) { # root first
                 if (fn[i] ~ /^cpprof_/) api = 1
                 else if (file[i] ~ /\/src\/(upper\/)?[a-z_0-9]+\.c:[0-9]+$/) {
                     if (!api) print fn[i], file[i]
                 } else api = 0
             }
             n = 0
         }
         /^-----/ { judge(); next }
         { for (i = 1; i < NF; i++)
               if ($(i + 1) ~ /:[0-9]+$/) { n++; fn[n] = $i; file[n] = $(i + 1) } }
         END { judge() }' "$tmp/$1.traces" | sort | uniq -c | sort -rn
}

# header NAME FIELD: the value of a response header (empty when absent).
header() {
    awk -F': ' -v f="$2" '$1 == f { print $2 }' "$tmp/$1.hdr"
}

# make_pki DIR: a throwaway PKI in DIR: a CA (ca.pem, ca.key) that signs
# the server's certificate for 127.0.0.1 and localhost (server.pem,
# server.key) and a client's (client.pem, client.key); another CA
# (otherca) that signs a stranger's (stranger.pem, stranger.key).
make_pki() {
    command -v openssl >/dev/null || fail "openssl is missing: apt-get install openssl"
    pki=$1
    mkdir -p "$pki"
    for ca in ca otherca; do
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/$ca.key" \
            -out "$pki/$ca.pem" -days 2 -subj "/CN=cpprof test $ca" 2>/dev/null ||
            fail "openssl: cannot make $ca"
    done
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$pki/san.ext"
    make_cert server 127.0.0.1 ca "$pki/san.ext"
    make_cert client client ca
    make_cert stranger stranger otherca
}

# make_cert NAME CN ISSUER [EXTFILE]: $pki/NAME.pem and NAME.key, signed by
# ISSUER.
make_cert() {
    openssl req -newkey rsa:2048 -nodes -keyout "$pki/$1.key" \
        -out "$pki/$1.csr" -subj "/CN=$2" 2>/dev/null &&
        openssl x509 -req -in "$pki/$1.csr" -CA "$pki/$3.pem" \
            -CAkey "$pki/$3.key" -CAcreateserial -out "$pki/$1.pem" -days 2 \
            ${4:+-extfile "$4"} 2>/dev/null || fail "openssl: cannot make $1"
}

# -- a pre-fork worker's cost (postgres.sh, nginx.sh, prefork.sh) --------
# A fork of a serving process costs nothing of cpprof's until someone asks
# for it through the serving process (/debug/pprof/pid/PID/): no thread
# and no socket; then its part serves, and goes again once idle.

# threads_of PID: how many threads PID runs (0 once it is gone).
threads_of() {
    ls "/proc/$1/task" 2>/dev/null | wc -l
}

# socket_inodes PID: the inodes of the sockets PID holds, sorted.
socket_inodes() {
    find "/proc/$1/fd" -mindepth 1 -printf '%l\n' 2>/dev/null |
        sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' | sort -u
}

# cpprof_sockets WORKER SERVER: the sockets of WORKER, a fork (or a fork's
# fork) of the serving process SERVER, that are cpprof's, "INODE WHY" a
# line: any TCP socket on cpprof's port ($port), SERVER's listener or a
# connection it accepted, which a worker must not keep; and of the others
# that SERVER does not hold too (a program's listeners and socket pairs
# inherited from it are the program's), each that listens (TCP, TCP6 or
# Unix) or whose Unix peer SERVER holds (a connection back to it, which
# is how a worker's part reaches its server).  A worker's connections to
# its own clients are none of these.
cpprof_sockets() {
    socket_inodes "$1" >"$tmp/cs.worker"
    socket_inodes "$2" >"$tmp/cs.server"
    # ss asks the kernel by netlink: /proc/net/tcp, read in pieces, may
    # miss a socket while others come and go.
    ss -tanHe | awk '{
        ino = ""
        for (i = 5; i <= NF; i++) if ($i ~ /^ino:/) ino = substr($i, 5)
        n = split($4, a, ":"); print ino, a[n], $1 == "LISTEN" }' \
        >"$tmp/cs.sockets"
    ss -xaH | awk '{ print $(NF - 2), "-", $2 == "LISTEN" }' >>"$tmp/cs.sockets"
    ss -xaH | awk '{ print $(NF - 2), $NF }' >"$tmp/cs.peers"
    awk -v srv="$tmp/cs.server" -v socks="$tmp/cs.sockets" \
        -v peers="$tmp/cs.peers" -v server="$2" -v ours="$port" '
        BEGIN {
            while ((getline x < srv) > 0) held[x] = 1
            while ((getline x < socks) > 0) {
                split(x, f, " "); tcp_port[f[1]] = f[2]; listening[f[1]] = f[3]
            }
            while ((getline x < peers) > 0) { split(x, f, " "); peer[f[1]] = f[2] }
        }
        tcp_port[$1] == ours {
            print $1, "is on cpprof'"'"'s port of pid " server; next }
        ($1 in held) { next }
        listening[$1] { print $1, "listens"; next }
        (($1 in peer) && (peer[$1] in held)) { print $1, "is connected to pid " server }
    ' "$tmp/cs.worker"
}

# costs_nothing WORKER SERVER: whether WORKER runs 1 thread and holds no
# socket of cpprof's (what the program itself runs: the callers' workers
# are single-threaded).
costs_nothing() {
    [ "$(threads_of "$1")" -eq 1 ] && [ -z "$(cpprof_sockets "$1" "$2")" ]
}

# worker_cost WORKER SERVER: its threads and cpprof's sockets, for a
# failure's message.
worker_cost() {
    echo "pid $1 runs $(threads_of "$1") threads ($(cat /proc/"$1"/task/*/comm 2>/dev/null | sort | uniq -c | tr -s ' \n' ' ')), cpprof's sockets: $(cpprof_sockets "$1" "$2" | tr '\n' ';')"
}

# await_costs_nothing WORKER SERVER SECONDS: waits up to SECONDS (a bound
# on a hang, not a timing) until costs_nothing WORKER SERVER, and sets
# $acn_ms to how long that took; fails unless it does by then.
await_costs_nothing() {
    acn_start=$(date +%s%N)
    for tick in $(seq $(($3 * 10))); do
        kill -0 "$1" 2>/dev/null || fail "worker $1 exited before its part went"
        costs_nothing "$1" "$2" && break
        sleep 0.1
    done
    costs_nothing "$1" "$2" ||
        fail "$3 s after its last request, $(worker_cost "$1" "$2")"
    acn_ms=$((($(date +%s%N) - acn_start) / 1000000))
}

# watch_serving WORKER SERVER PID: while PID (a client's request for
# WORKER) runs, notes WORKER's threads and cpprof's sockets: $ws_threads
# the most it ran, $ws_socket a socket of cpprof's seen (empty if none).
watch_serving() {
    ws_threads=0 ws_socket=
    while kill -0 "$3" 2>/dev/null; do
        n=$(threads_of "$1")
        [ "$n" -le "$ws_threads" ] || ws_threads=$n
        [ -n "$ws_socket" ] || ws_socket=$(cpprof_sockets "$1" "$2" | head -1)
        sleep 0.05
    done
}
