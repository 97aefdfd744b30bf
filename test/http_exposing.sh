#!/bin/sh
# http_exposing.sh -- docs/security.md's "Exposing the endpoints", command by command:
# each go tool pprof, pprof and curl command there is run here as written,
# from a directory holding the files it names (ca.pem, server.pem,
# client.pem, ...), with two substitutions: host:6060 is 127.0.0.1:PORT (a
# free port) and ?seconds=10 is ?seconds=2; curl gets -sf, so that an error
# status fails the command.  Each profile must list the
# demo's three tenants.  The browser commands are run by
# test/browser_index.sh.
#   1. SSH tunnel to loopback: go tool pprof and curl over plain HTTP (the
#      tunnel itself is ssh's; what goes through it is what runs here).
#   2. TLS and a token: go tool pprof trusting the CA through SSL_CERT_FILE
#      with the token as the Basic password; curl with --cacert and -u.
#   3. Mutual TLS: the standalone google/pprof with -tls_cert, -tls_key and
#      -tls_ca; curl with a client certificate.  Go 1.19's go tool pprof
#      ignores those flags (it fetches URLs itself, knowing only
#      https+insecure): docs/security.md says so, and the last check here fails
#      the day it honours them, so that the page gets changed.
set -u
. "$(dirname "$0")/http_lib.sh"
command -v go >/dev/null || fail "go not found (Debian package golang-go)"
[ -x "$PPROF" ] || fail "$PPROF not built"
PPROF=$(cd "$(dirname "$PPROF")" && pwd)/pprof
export GOFLAGS=

# has_tenants NAME: $tmp/NAME.out, a -tags listing, shows the three tenants.
has_tenants() {
    got=$(awk '$1 == "tenant:" { t = 1; next } /^ *$/ { t = 0 }
               t { print $NF }' "$tmp/$1.out" | sort | tr '\n' ' ')
    [ "$got" = 'acme globex initech ' ] ||
        fail "$1: tenants '$got': $(cat "$tmp/$1.out" "$tmp/$1.err")"
}

# run NAME COMMAND...: runs COMMAND in $pki, output in $tmp/NAME.out and
# .err, and fails saying so if it fails.
run() {
    name=$1
    shift
    (cd "$pki" && "$@") >"$tmp/$name.out" 2>"$tmp/$name.err" ||
        fail "$name: $* failed: $(cat "$tmp/$name.err")"
}

make_pki "$tmp/pki"
TOKEN=tok-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')

# --- 1. SSH tunnel to the loopback server ------------------------------------
start_demo --workers 2 --for 120
run way1pprof go tool pprof -tags "http://127.0.0.1:$port/debug/pprof/profile?seconds=2"
has_tenants way1pprof
run way1curl curl -sf -o p.pb "http://127.0.0.1:$port/debug/pprof/profile?seconds=2"
run way1file go tool pprof -tags p.pb
has_tenants way1file
stop_demo

# --- 2. TLS and a token -------------------------------------------------------
CPPROF_HTTP_ALLOW_REMOTE=1 CPPROF_HTTP_TOKEN=$TOKEN \
CPPROF_HTTP_TLS_CERT=$pki/server.pem CPPROF_HTTP_TLS_KEY=$pki/server.key \
    DEMO_HOST=0.0.0.0 start_demo --workers 2 --for 120
run way2pprof env SSL_CERT_FILE=ca.pem go tool pprof -tags \
    "https://user:$TOKEN@127.0.0.1:$port/debug/pprof/profile?seconds=2"
has_tenants way2pprof
run way2curl curl -sf --cacert ca.pem -u "user:$TOKEN" -o p.pb \
    "https://127.0.0.1:$port/debug/pprof/profile?seconds=2"
run way2file go tool pprof -tags p.pb
has_tenants way2file
grep -qF "$TOKEN" "$tmp/demo.out" "$tmp/demo.err" && fail "the demo printed the token"
stop_demo

# --- 3. Mutual TLS ------------------------------------------------------------
# The client certificate is the credential: no token.
CPPROF_HTTP_ALLOW_REMOTE=1 CPPROF_HTTP_REQUIRE_TOKEN=0 \
CPPROF_HTTP_TLS_CERT=$pki/server.pem CPPROF_HTTP_TLS_KEY=$pki/server.key \
CPPROF_HTTP_TLS_CA=$pki/ca.pem \
    DEMO_HOST=0.0.0.0 start_demo --workers 2 --for 120
run way3pprof "$PPROF" -tls_cert client.pem -tls_key client.key -tls_ca ca.pem \
    -tags "https://127.0.0.1:$port/debug/pprof/profile?seconds=2"
has_tenants way3pprof
run way3curl curl -sf --cacert ca.pem --cert client.pem --key client.key \
    -o p.pb "https://127.0.0.1:$port/debug/pprof/profile?seconds=2"
run way3file go tool pprof -tags p.pb
has_tenants way3file
# What docs/security.md says go tool pprof does with the same flags: it checks
# the server against the system's CAs only, and, told to skip that
# (https+insecure), sends no client certificate.
(cd "$pki" && go tool pprof -tls_cert client.pem -tls_key client.key -tls_ca ca.pem \
    -tags "https://127.0.0.1:$port/debug/pprof/profile?seconds=2") \
    >"$tmp/gotls.out" 2>"$tmp/gotls.err" &&
    fail "go tool pprof now does mutual TLS: change docs/security.md's 'Exposing the endpoints'"
grep -q 'certificate signed by unknown authority' "$tmp/gotls.err" ||
    fail "go tool pprof -tls_ca: $(cat "$tmp/gotls.err")"
(cd "$pki" && go tool pprof -tls_cert client.pem -tls_key client.key -tls_ca ca.pem \
    -tags "https+insecure://127.0.0.1:$port/debug/pprof/profile?seconds=2") \
    >"$tmp/gotls.out" 2>"$tmp/gotls.err" &&
    fail "go tool pprof now does mutual TLS: change docs/security.md's 'Exposing the endpoints'"
# No certificate sent: the server ends the handshake, Go sees the
# connection close: as EOF, or, when Go had already gone on to send its
# request (a loaded machine), as a write to or read from a closed socket.
grep -Eq 'profile\?seconds=2": (EOF|write tcp .*: broken pipe|read tcp .*: connection reset by peer)$' \
    "$tmp/gotls.err" ||
    fail "go tool pprof https+insecure: $(cat "$tmp/gotls.err")"
stop_demo
echo "http_exposing: ok"
