#!/bin/bash
# http_security.sh -- who may reach the server and how much one client can
# hold:
#   - a non-loopback address is refused without http_allow_remote, and then
#     without a token unless http_require_token=0;
#   - with a token, a request without "Authorization: Bearer TOKEN" (none,
#     a wrong one, a prefix of it, another scheme) is a 401 with no data,
#     also for a POST whose body is then never read; the schemes Bearer
#     and Basic are named in any case (RFC 9110 11.1: "bearer TOKEN" was
#     a 401);
#   - http_max_connections: with the limit held by idle keep-alive
#     connections (each served a request: connections that never send one
#     are pushed out, see test/http_slowloris), a new request is not served
#     until one is released;
#   - http_connection_timeout: an idle connection is closed;
#   - http_max_body: the cap is a setting;
#   - http_cmdline=0 turns cmdline off (403);
#   - a bad CPPROF_* value is reported once on stderr and the default kept;
#   - TLS with client certificates (a throwaway CA): a profile over mutual
#     TLS parses; no client certificate fails the handshake; one of another
#     CA is a 403; a client trusting another CA refuses the server; plain
#     HTTP gets no
#     profile; a missing, empty or wrong file (key not matching) keeps the
#     server from starting: the start call returns CPPROF_ETLS and stderr
#     names the setting, file and reason;
#   - a refused server setting fails closed: a token with a control
#     character (a trailing \r, read from a file) or a bad limit keeps the
#     server from starting, and the token is never printed.
set -u
. "$(dirname "$0")/http_lib.sh"

# expect_status NAME WANT GOT
expect_status() {
    [ "$3" = "$2" ] && return 0
    [ "$3" = 000 ] || fail "$1: status $3, want $2"
    state=exited
    kill -0 "$demo_pid" 2>/dev/null && state=running
    fail "$1: no HTTP answer, want $2; the demo has $state; its stderr ends: $(tail -n 5 "$tmp/demo.err")"
}

# refused ENV...: the demo, given a non-loopback address under ENV, must
# exit non-zero saying why (it never serves, so any port will do).
refused() {
    want=$1
    shift
    env "$@" "$JOBRUNNER" --addr "0.0.0.0:$((20000 + $$ % 40000))" --for 1 \
        >/dev/null 2>"$tmp/refused.err" && fail "served with $*"
    grep -qF "$want" "$tmp/refused.err" ||
        fail "refusal with $* says: $(cat "$tmp/refused.err")"
}
refused 'needs the http_allow_remote setting'
refused 'needs the http_token setting' CPPROF_HTTP_ALLOW_REMOTE=1

# --- A refused server setting fails closed -----------------------------------
# On loopback, where no token is needed: the server must still not start
# (it would serve everyone), and stderr must not show the token.
secret=leak-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
for bad in "CPPROF_HTTP_TOKEN=$secret"$'\r' "CPPROF_HTTP_TOKEN=$secret"$'\n' \
    "CPPROF_HTTP_TOKEN=$secret x" "CPPROF_HTTP_MAX_BODY=lots"; do
    env "$bad" "$JOBRUNNER" --addr "127.0.0.1:$((20000 + $$ % 40000))" \
        --for 1 >"$tmp/closed.out" 2>"$tmp/closed.err" &&
        fail "started with a refused ${bad%%=*}: $(cat "$tmp/closed.out")"
    grep -q '^serving' "$tmp/closed.out" && fail "served with a refused ${bad%%=*}"
    grep -qF "${bad%%=*}" "$tmp/closed.err" ||
        fail "refusal does not name ${bad%%=*}: $(cat "$tmp/closed.err")"
    grep -qF 'does not start' "$tmp/closed.err" ||
        fail "refusal does not say the server did not start: $(cat "$tmp/closed.err")"
    grep -qF "$secret" "$tmp/closed.err" && fail "stderr shows the token"
done

# --- A token on a non-loopback address --------------------------------------
token=s3cret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
export CPPROF_HTTP_ALLOW_REMOTE=1 CPPROF_HTTP_TOKEN="$token"
DEMO_HOST=0.0.0.0 start_demo --workers 1 --rate 200 --for 120
basic() { printf '%s' "$1" | base64 -w0; }
for auth in '' "Bearer wrong" "Bearer ${token%?}" "Bearer ${token}x" \
            "Basic $token" "bearer$token" "bearer wrong" \
            "basic $(basic "anyone:${token}x")" "Bearer" "Bearer "; do
    code=$(fetch noauth "$base/goroutine?debug=2" ${auth:+-H "Authorization: $auth"})
    expect_status "no token ($auth)" 401 "$code"
    [ "$(cat "$tmp/noauth.body")" = Unauthorized ] ||
        fail "401 carries data: $(head -c 200 "$tmp/noauth.body")"
    header noauth www-authenticate | grep -qx Bearer ||
        fail "401 without WWW-Authenticate: Bearer"
    header noauth www-authenticate | grep -q '^Basic realm=' ||
        fail "401 without WWW-Authenticate: Basic (a browser would not ask)"
done
# HTTP Basic with the token as password (any user), as go tool pprof,
# curl and browsers send it from http://user:TOKEN@host/.
code=$(fetch basic "$base/cmdline" -u "anyone:$token")
expect_status "Basic with the token" 200 "$code"
code=$(fetch basicwrong "$base/cmdline" -u "anyone:${token}x")
expect_status "Basic with a wrong token" 401 "$code"
GOFLAGS= go tool pprof -raw \
    "http://user:$token@127.0.0.1:$port/debug/pprof/goroutine" \
    >"$tmp/basic.raw" 2>"$tmp/basic.err" ||
    fail "go tool pprof with the token as password: $(cat "$tmp/basic.err")"
grep -q '^PeriodType: goroutine count' "$tmp/basic.raw" ||
    fail "go tool pprof got no goroutine profile: $(head -5 "$tmp/basic.raw")"
grep -qF "$token" "$tmp/demo.out" "$tmp/demo.err" && fail "the demo printed the token"

code=$(fetch postnoauth "$base/symbol" --data-binary '0x1234')
expect_status "POST without token" 401 "$code"
code=$(fetch auth "$base/goroutine?debug=2" -H "Authorization: Bearer $token")
expect_status "with the token" 200 "$code"
grep -q '^goroutine [0-9]* \[.*, thread "' "$tmp/auth.body" || fail "token: no thread dump"
for auth in "bearer $token" "BEARER $token" "bEaReR  $token" \
            "basic $(basic "anyone:$token")" "BASIC $(basic ":$token")"; do
    code=$(fetch anycase "$base/cmdline" -H "Authorization: $auth")
    expect_status "the token under a scheme in another case ($auth)" 200 "$code"
done
code=$(fetch authsym "$base/symbol" -H "Authorization: Bearer $token" \
    --data-binary '0x1')
expect_status "POST with the token" 200 "$code"
stop_demo

# --- http_require_token=0: explicitly open ------------------------------------
unset CPPROF_HTTP_TOKEN
CPPROF_HTTP_REQUIRE_TOKEN=0 DEMO_HOST=0.0.0.0 start_demo --workers 1 --rate 200 --for 120
code=$(fetch open "$base/")
expect_status "open server" 200 "$code"
stop_demo
unset CPPROF_HTTP_ALLOW_REMOTE

# --- Limits, cmdline off, a bad value ----------------------------------------
# demo_sockets: the demo's open sockets (its listener and the connections
# the server has accepted).
demo_sockets() {
    ls -l "/proc/$demo_pid/fd" 2>/dev/null | grep -c 'socket:'
}
CPPROF_HTTP_MAX_CONNECTIONS=2 CPPROF_HTTP_CONNECTION_TIMEOUT=3 \
CPPROF_HTTP_MAX_BODY=2048 CPPROF_HTTP_CMDLINE=0 CPPROF_LABEL_CAP=lots \
    start_demo --workers 1 --rate 200 --for 120
listeners=$(demo_sockets) # no request yet: its listening sockets alone
[ "$(grep -c 'CPPROF_LABEL_CAP="lots" is not valid' "$tmp/demo.err")" = 1 ] ||
    fail "bad CPPROF_LABEL_CAP not reported once: $(cat "$tmp/demo.err")"

code=$(fetch cmdline "$base/cmdline")
expect_status "cmdline off" 403 "$code"
grep -q 'http_cmdline' "$tmp/cmdline.body" || fail "403 does not name the setting"
head -c 3000 /dev/zero | tr '\0' '+' >"$tmp/body3k"
code=$(fetch big "$base/symbol" --data-binary @"$tmp/body3k")
expect_status "3000-byte body over a 2048 cap" 413 "$code"
head -c 1000 /dev/zero | tr '\0' '+' >"$tmp/body1k"
code=$(fetch small "$base/symbol" --data-binary @"$tmp/body1k")
expect_status "1000-byte body" 200 "$code"

# Two idle keep-alive connections, each served one request so that it was
# let in (one that never sends a request is pushed out to make room), take
# both slots: wait until the server has accepted
# them (two more sockets in the demo), then a request cannot be served
# within 1.5 s; when the idle timeout (3 s) closes them, it is.  First
# the requests above must be closed on the server's side too: a count
# taken while one lingered (slow under TSan) never grew by two.  Both are
# readiness waits, not bounds under test: 15 s for a TSan build on a
# loaded machine.
for tick in $(seq 150); do
    [ "$(demo_sockets)" -le "$listeners" ] && break
    sleep 0.1
done
idle=$(demo_sockets)
exec 7<>"/dev/tcp/127.0.0.1/$port" 8<>"/dev/tcp/127.0.0.1/$port"
for fd in 7 8; do
    printf 'GET /debug/pprof/cmdline HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n' \
        "$port" >&$fd
done
for tick in $(seq 150); do
    [ "$(demo_sockets)" -ge $((idle + 2)) ] && break
    sleep 0.1
done
[ "$(demo_sockets)" -ge $((idle + 2)) ] || fail "idle connections not accepted"
start=$(date +%s)
curl -s -o /dev/null --max-time 1.5 "$base/" && fail "served past http_max_connections=2"
# The server closes an idle connection after http_connection_timeout: the
# read sees EOF (status 0), long before timeout(1)'s 15 s (status 124).
timeout 15 cat <&7 >/dev/null || fail "idle connection not closed by the server"
timeout 15 cat <&8 >/dev/null || fail "idle connection not closed by the server"
exec 7<&- 8<&-
elapsed=$(($(date +%s) - start))
[ "$elapsed" -le 6 ] || fail "idle connections closed after ${elapsed}s, timeout 3s"
code=$(fetch after "$base/")
expect_status "after the idle connections closed" 200 "$code"
# A handler's own wait is not idleness: a 4 s profile outlives the 3 s
# timeout.
code=$(fetch long "$base/profile?seconds=4")
expect_status "4 s profile with a 3 s idle timeout" 200 "$code"
stop_demo

# --- DNS rebinding and cross-site use (loopback) ----------------------------------
CPPROF_HTTP_ALLOWED_HOSTS=pprof.internal,other.example start_demo --workers 1 --rate 200 --for 120
for host in evil.example "evil.example:$port" "localhost.evil.example:$port" \
    "127.0.0.1:1" "pprof.internal:1"; do
    code=$(fetch rebind "$base/cmdline" -H "Host: $host")
    expect_status "Host: $host" 403 "$code"
    grep -q 'http_allowed_hosts' "$tmp/rebind.body" ||
        fail "403 for Host $host does not name the setting: $(cat "$tmp/rebind.body")"
done
for host in "localhost:$port" "127.0.0.1:$port" "127.1.2.3:$port" localhost \
    "pprof.internal:$port" "OTHER.example:$port"; do
    code=$(fetch okhost "$base/cmdline" -H "Host: $host")
    expect_status "Host: $host" 200 "$code"
done
# The demo listens on IPv4 only: [::1] as a Host name over IPv4.
code=$(fetch v6name "$base/cmdline" -H "Host: [::1]:$port")
expect_status "Host: [::1]:$port" 200 "$code"
# A window started from another site: refused; from the page itself: not.
code=$(fetch xsite "$base/profile?seconds=1" -H 'Sec-Fetch-Site: cross-site')
expect_status "cross-site profile" 403 "$code"
code=$(fetch xorigin "$base/goroutine?seconds=1" -H 'Origin: http://evil.example')
expect_status "foreign Origin window" 403 "$code"
code=$(fetch xnull "$base/profile?seconds=1" -H 'Origin: null')
expect_status "null Origin profile" 403 "$code"
code=$(fetch sameorigin "$base/profile?seconds=1" -H 'Sec-Fetch-Site: same-origin' \
    -H "Origin: http://127.0.0.1:$port")
expect_status "same-origin profile" 200 "$code"
code=$(fetch xsiteread "$base/cmdline" -H 'Sec-Fetch-Site: cross-site')
expect_status "cross-site read (no state change; CORS keeps it unreadable)" 200 "$code"
# No route grants another origin anything.
for ep in '' '?format=json' cmdline symbol labels accounting goroutine heap \
    allocs block mutex threadcreate www/index.js nosuch; do
    fetch cors "$base/$ep" -H 'Origin: http://evil.example' >/dev/null
    [ -z "$(header cors access-control-allow-origin)" ] ||
        fail "/$ep sends Access-Control-Allow-Origin"
done
stop_demo

# --- A token on loopback: asked for, so required --------------------------------
CPPROF_HTTP_TOKEN="$token" start_demo --workers 1 --rate 200 --for 120
code=$(fetch loopnoauth "$base/")
expect_status "loopback without the token" 401 "$code"
code=$(fetch loopauth "$base/" -H "Authorization: Bearer $token")
expect_status "loopback with the token" 200 "$code"
stop_demo
# --- TLS, and mutual TLS -------------------------------------------------------
# A throwaway CA signs the server's certificate (for 127.0.0.1) and a
# client's; another CA signs nothing the server trusts.
make_pki "$tmp/pki"
CPPROF_HTTP_TLS_CERT=$pki/server.pem CPPROF_HTTP_TLS_KEY=$pki/server.key \
CPPROF_HTTP_TLS_CA=$pki/ca.pem start_demo --workers 2 --rate 200 --for 120
tls=https://127.0.0.1:$port/debug/pprof
mine="--cacert $pki/ca.pem --cert $pki/client.pem --key $pki/client.key"
code=$(fetch tlsprof "$tls/profile?seconds=2" $mine)
expect_status "profile over mutual TLS" 200 "$code"
"$GOCHECK" "$tmp/tlsprof.body" >/dev/null || fail "the profile over TLS does not parse"
# Without a client certificate the server ends the handshake: no HTTP at
# all.  Under TLS 1.2 curl sees the handshake fail (35); under TLS 1.3 its
# part of the handshake is over when the server refuses, and it sees the
# connection close with no reply.
code=$(fetch nocert "$tls/cmdline" --cacert "$pki/ca.pem")
[ "$code" = 000 ] || fail "no client certificate: status $code, want no HTTP answer"
curl -s -o /dev/null --tls-max 1.2 --cacert "$pki/ca.pem" "$tls/cmdline"
rc=$?
[ "$rc" = 35 ] || fail "no client certificate (TLS 1.2): curl status $rc, want 35 (handshake)"
code=$(fetch stranger "$tls/cmdline" --cacert "$pki/ca.pem" \
    --cert "$pki/stranger.pem" --key "$pki/stranger.key")
expect_status "a client certificate of another CA" 403 "$code"
curl -s -o /dev/null --cacert "$pki/otherca.pem" "$tls/cmdline" &&
    fail "a client trusting another CA accepted the server"
code=$(fetch plain "$base/profile?seconds=1")
[ "$code" = 200 ] && fail "plain HTTP on the TLS port got a profile"

# A renewed certificate is served from a handshake on, without a restart
# (the files are looked at once a second); a broken renewal is not used,
# stderr says why, and the previous certificate goes on being served.
served_serial() {
    timeout 10 openssl s_client -connect "127.0.0.1:$port" -CAfile "$pki/ca.pem" \
        -cert "$pki/client.pem" -key "$pki/client.key" </dev/null 2>/dev/null |
        openssl x509 -noout -serial 2>/dev/null
}
# wait_for WHAT COMMAND...: COMMAND succeeds within 10 s, or the test fails.
wait_for() {
    what=$1
    shift
    for _ in $(seq 50); do
        "$@" && return 0
        sleep 0.2
    done
    fail "$what: not within 10 s"
}
serving() { [ "$(served_serial)" = "$1" ]; }
said() { grep -qF "$1" "$tmp/demo.err"; }
first=$(openssl x509 -noout -serial -in "$pki/server.pem")
serving "$first" || fail "TLS: the server does not serve server.pem ($(served_serial))"
make_cert renewed 127.0.0.1 ca "$pki/san.ext"
renewed=$(openssl x509 -noout -serial -in "$pki/renewed.pem")
[ "$renewed" != "$first" ] || fail "openssl made the same serial twice"
cp "$pki/renewed.key" "$pki/server.key.new" && cp "$pki/renewed.pem" "$pki/server.pem.new" &&
    mv "$pki/server.key.new" "$pki/server.key" && mv "$pki/server.pem.new" "$pki/server.pem" ||
    fail "cannot renew the certificate files"
wait_for "the renewed certificate served" serving "$renewed"
said "now serves the renewed TLS certificate \"$pki/server.pem\"" ||
    fail "renewal: stderr does not say it: $(cat "$tmp/demo.err")"
code=$(fetch renewed "$tls/cmdline" $mine)
expect_status "a request over the renewed certificate" 200 "$code"
cp "$pki/server.pem" "$pki/renewed.pem" # for the bad-file cases below
echo "not a certificate" >"$pki/server.pem.new" && mv "$pki/server.pem.new" "$pki/server.pem"
# The files are looked at when a handshake asks for the certificate.
handshake_then_said() { served_serial >/dev/null; said "$1"; }
wait_for "the broken renewal reported" handshake_then_said "are not used"
serving "$renewed" || fail "after a broken renewal: serves $(served_serial), want $renewed"
[ "$(grep -c 'are not used' "$tmp/demo.err")" = 1 ] ||
    fail "the broken renewal was not reported once: $(cat "$tmp/demo.err")"
cp "$pki/renewed.pem" "$pki/server.pem"
cp "$pki/renewed.key" "$pki/server.key"
stop_demo

# Bad TLS files: the start call returns CPPROF_ETLS (the demo prints its
# cpprof_strerror), and stderr names the setting, the file and the reason.
# test/zero_code.sh checks the same stderr in zero-code mode.
: >"$pki/empty.pem"
echo 'not a certificate' >"$pki/junk.pem"
etls='jobrunner: a TLS file of the HTTP server (http_tls_cert, http_tls_key, http_tls_ca) cannot be used'
badtls() { # WANT VAR=VALUE...: the demo must refuse to serve saying WANT
    want=$1
    shift
    env CPPROF_HTTP_TLS_CERT="$pki/server.pem" CPPROF_HTTP_TLS_KEY="$pki/server.key" \
        "$@" "$JOBRUNNER" --addr "127.0.0.1:$((20000 + $$ % 40000))" --for 1 \
        >"$tmp/badtls.out" 2>"$tmp/badtls.err" && fail "served with $*"
    grep -qF "$want" "$tmp/badtls.err" ||
        fail "bad TLS ($*): stderr says: $(cat "$tmp/badtls.err")"
    grep -qF "$etls" "$tmp/badtls.err" ||
        fail "bad TLS ($*): the start call did not return CPPROF_ETLS: $(cat "$tmp/badtls.err")"
}
badtls "CPPROF_HTTP_TLS_CERT=\"$pki/missing.pem\": No such file" \
    CPPROF_HTTP_TLS_CERT="$pki/missing.pem"
badtls "CPPROF_HTTP_TLS_KEY=\"$pki/client.key\": The certificate and the given key do not match" \
    CPPROF_HTTP_TLS_KEY="$pki/client.key"
badtls "CPPROF_HTTP_TLS_CA=\"$pki/empty.pem\": the file is empty" \
    CPPROF_HTTP_TLS_CA="$pki/empty.pem"
badtls "CPPROF_HTTP_TLS_CA=\"$pki/junk.pem\":" CPPROF_HTTP_TLS_CA="$pki/junk.pem"
badtls "CPPROF_HTTP_TLS_CERT=\"$pki/junk.pem\":" CPPROF_HTTP_TLS_CERT="$pki/junk.pem"
echo "http_security: ok"
