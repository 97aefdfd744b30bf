#!/bin/sh
# host_symbols.sh -- a program's exported functions never take the calls
# of cpprof's libraries (libmicrohttpd, GnuTLS and its libraries, jansson,
# protobuf-c, zlib, libdw), whose names it may share (src/upper.c).
#
# test/host_symbols.c, linked with -rdynamic beside a function of every
# name that libcpprof-upper.so and its libraries call one another by (and
# the names the issue met: json_object, crc32, dwarf_begin...), each of
# which says so and ends the process when called.  In zero-code mode,
# serving TLS (GnuTLS's gnutls_init per connection), every endpoint
# answers 200 and none of those functions ran; with glibc's malloc, and
# with jemalloc preloaded ahead of cpprof, whose blocks the libraries
# must keep allocating from (src/upper/object_forward.c).  And the names that
# libcpprof-upper.so forwards are the ones libcpprof.so interposes.
set -u
. "$(dirname "$0")/http_lib.sh"
zero_code_preload
[ "${CPPROF_SANITIZER:-none}" = none ] || {
    echo "SKIP: under $CPPROF_SANITIZER, whose runtime refuses RTLD_DEEPBIND: cpprof declines it (src/upper.c)" >&2
    exit 77
}
UPPER=$(dirname "$LIB")/libcpprof-upper.so
libdir=$(dirname "$(gcc -print-file-name=libc.so.6)")
JEMALLOC=$libdir/libjemalloc.so.2
[ -f "$JEMALLOC" ] || fail "no $JEMALLOC: apt-get install libjemalloc2"

# functions OBJECT: the functions its dynamic symbol table defines.
functions() {
    nm -D --defined-only "$1" | awk '$2 ~ /^[TWi]$/ { sub(/@.*/, "", $3); print $3 }' |
        sort -u
}

# The names libcpprof-upper.so's tree calls that one of its libraries
# defines (not the C library, not the loader).
tree=$(ldd "$UPPER" | awk '$3 ~ /^\// { print $3 }')
echo "$tree" | grep -q libjansson || fail "ldd $UPPER lists no libraries: $tree"
# shellcheck disable=SC2086 # a list of paths
nm -D -A "$UPPER" $tree >"$tmp/nm" || fail "nm cannot read $UPPER's tree"
{
    awk -v upper="$UPPER" '
        { split($1, at, ":"); name = $3; sub(/@.*/, "", name) }
        $2 == "U" { called[name] = 1 }
        $2 ~ /^[TWi]$/ && at[1] ~ /\/(libc\.so|ld-linux)/ { libc[name] = 1 }
        $2 ~ /^[TWi]$/ && at[1] != upper { defined[name] = 1 }
        END { for (n in called) if ((n in defined) && !(n in libc)) print n }' \
        "$tmp/nm"
    printf '%s\n' json_object crc32 deflate inflate gnutls_init \
        MHD_start_daemon protobuf_c_message_pack elf_begin dwarf_begin
} | sort -u >"$tmp/names"
sed 's/.*/void &(void) { host_symbols_called("&"); }/' "$tmp/names" |
    { echo 'void host_symbols_called(const char *name);'; cat; } >"$tmp/names.c"
PROG=$tmp/host_symbols_prog
${CC:-gcc} -O1 -g -pthread -rdynamic -o "$PROG" "$(dirname "$0")/host_symbols.c" \
    "$tmp/names.c" || fail "cannot build the -rdynamic program"
exported=$(functions "$PROG" | comm -12 - "$tmp/names" | wc -l)
[ "$exported" -eq "$(wc -l <"$tmp/names")" ] ||
    fail "the program exports $exported of the $(wc -l <"$tmp/names") names"

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$tmp/server.key" -out "$tmp/server.pem" -days 2 \
    -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2>/dev/null ||
    fail "openssl: cannot make a certificate"
launch() {
    LD_PRELOAD="$preload" CPPROF_HTTP=127.0.0.1:$port CPPROF_ACCOUNTING=1 \
        CPPROF_HTTP_TLS_CERT=$tmp/server.pem CPPROF_HTTP_TLS_KEY=$tmp/server.key \
        "$PROG" 60 >"$tmp/prog.out" 2>"$tmp/prog.err" &
}
ready() {
    curl -s -o /dev/null --max-time 2 --cacert "$tmp/server.pem" "https://127.0.0.1:$port/debug/pprof/"
}

# In rounds, the requests of a round at once: one CPU profile, trace or
# fgprof at a time.
# (jemalloc ahead of cpprof: no heap profiles, alloc_not_ours says why.)
instant="/ ?format=json www/index.js labels accounting metrics cmdline
  symbol goroutine goroutine?debug=1 goroutine?debug=2 block mutex
  threadcreate threadcreate?format=json"
every="$instant heap heap?debug=1 allocs|profile?seconds=1 wall?seconds=1
  |profile?seconds=1&format=json|trace?seconds=0.3
  |trace?seconds=0.3&format=json|fgprof?seconds=1"
some="/ labels accounting metrics|profile?seconds=1&format=json
  |trace?seconds=0.3&format=json"

# serve_all NAME LD_PRELOAD ROUNDS: the endpoints of ROUNDS (rounds
# split by |) answer 200, and the program is alive and said nothing.
serve_all() {
    preload=$2
    serve_on_free_port "$1" "$tmp/prog.err" launch ready
    base=https://127.0.0.1:$port/debug/pprof
    n=0
    rounds=$3
    while [ -n "$rounds" ]; do
        endpoints=${rounds%%|*} requests=
        case $rounds in *'|'*) rounds=${rounds#*|} ;; *) rounds= ;; esac
        for e in $endpoints; do
            n=$((n + 1))
            curl -s --max-time 30 --cacert "$tmp/server.pem" -o "$tmp/e$n.body" \
                -w "%{http_code} $e" "$base/${e#/}" >"$tmp/e$n.code" &
            requests="$requests $!"
        done
        for r in $requests; do wait "$r"; done
    done
    n=$((n + 1))
    curl -s --max-time 30 --cacert "$tmp/server.pem" -o "$tmp/e$n.body" \
        -w '%{http_code} POST symbol' --data-binary 0x1000 "$base/symbol" >"$tmp/e$n.code"
    for i in $(seq "$n"); do
        code=$(cut -d' ' -f1 "$tmp/e$i.code") e=$(cut -d' ' -f2- "$tmp/e$i.code")
        [ "$code" = 200 ] ||
            fail "$1: $e answered $code: $(head -c 300 "$tmp/e$i.body") $(cat "$tmp/prog.err")"
    done
    kill -0 "$demo_pid" 2>/dev/null || fail "$1: the program died: $(cat "$tmp/prog.err")"
    ! grep -q 'host_symbols:' "$tmp/prog.err" || fail "$1: $(cat "$tmp/prog.err")"
    kill "$demo_pid"
    wait "$demo_pid" 2>/dev/null
    demo_pid=
    echo "ok: $1: $n endpoints answer over TLS, none of the program's $(wc -l <"$tmp/names") functions of their libraries' names called"
}
serve_all "glibc's malloc" "$PRELOAD" "$every"
serve_all "jemalloc preloaded first" "$JEMALLOC $PRELOAD" "$some"

# What the libraries must still reach in the program's scope.
functions "$LIB" | grep -v '^cpprof_' >"$tmp/interposed"
functions "$UPPER" | grep -vx cpprof_upper_entry >"$tmp/forwarded"
cmp -s "$tmp/interposed" "$tmp/forwarded" ||
    fail "libcpprof.so interposes and libcpprof-upper.so forwards different names: $(diff "$tmp/interposed" "$tmp/forwarded" | grep '^[<>]' | tr '\n' ' ')"
echo "ok: libcpprof-upper.so forwards the $(wc -l <"$tmp/interposed") functions libcpprof.so interposes"
echo PASS
