#!/bin/sh
# browser_index.sh -- the /debug/pprof/ index in a real browser: Debian's
# headless chromium, driven by test/browsercheck over the DevTools protocol,
# opens the page served by the demo (--park 3: one parked thread per
# tenant), waits for its scripts, presses "Profile CPU", and reports the
# profile table and both labels views.  The table must list every profile,
# both views the three tenants, and the page must fit a phone's width.
# Screenshots (phone.png, wide.png) are kept in test/browser-shots/ under
# the build tree.  Then the same over TLS with a token in the page's
# address (README, "Exposing the endpoints", way 2).
set -u
. "$(dirname "$0")/http_lib.sh"
BROWSERCHECK=$top_builddir/test/browsercheck/browsercheck
SHOTS=$top_builddir/test/browser-shots
command -v chromium >/dev/null || fail "chromium is missing: apt-get install chromium"

# check_page: the table lists every profile, both views the three tenants,
# the CPU view in the demo's order, and the page fits a phone's width.
check_page() {
    [ "$(awk '$1 == "profile" { printf "%s ", $2 }' "$tmp/page")" = \
      'allocs block cmdline goroutine heap mutex profile symbol threadcreate ' ] ||
        fail "profile table: $(grep '^profile' "$tmp/page")"
    awk '$1 == "profile" && $2 == "goroutine" && $3 >= 6 { ok = 1 } END { exit !ok }' \
        "$tmp/page" || fail "goroutine count: $(grep goroutine "$tmp/page")"
    for view in threads cpu; do
        [ "$(awk -v v=$view '$1 == v && $2 == "tenant" { print $3 }' "$tmp/page" | sort | tr '\n' ' ')" = \
          'acme globex initech ' ] ||
            fail "$view view: tenants $(grep "^$view tenant" "$tmp/page")"
    done
    # The demo's tenants cost 1:2:5: the CPU view puts initech first.
    [ "$(awk '$1 == "cpu" && $2 == "tenant" { print $3; exit }' "$tmp/page")" = initech ] ||
        fail "cpu view: $(grep '^cpu tenant' "$tmp/page")"
    ! grep '^overflow' "$tmp/page" || fail "the page is wider than the screen"
}

start_demo --workers 2 --park 3 --for 120
mkdir -p "$SHOTS"
rm -f "$SHOTS/phone.png" "$SHOTS/wide.png"
"$BROWSERCHECK" -url "$base/" -shots "$SHOTS" -cpu 2 >"$tmp/page" ||
    fail "the browser could not show the page"
check_page
for shot in phone wide; do
    [ "$(od -An -N4 -tx1 "$SHOTS/$shot.png" | tr -d ' ')" = 89504e47 ] ||
        fail "no $shot.png screenshot"
done
stop_demo

# README's second way: TLS and a token, the page opened as
# https://user:TOKEN@host:PORT/debug/pprof/, its own fetches carrying the
# credentials the browser keeps.  The throwaway CA is not the browser's, so
# certificate errors are ignored (-insecure); mutual TLS is not checked in
# the browser, as headless chromium offers a client certificate only from
# an NSS database with a policy choosing it.
make_pki "$tmp/pki"
TOKEN=tok-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
CPPROF_HTTP_ALLOW_REMOTE=1 CPPROF_HTTP_TOKEN=$TOKEN \
CPPROF_HTTP_TLS_CERT=$pki/server.pem CPPROF_HTTP_TLS_KEY=$pki/server.key \
    DEMO_HOST=0.0.0.0 start_demo --workers 2 --park 3 --for 120
mkdir -p "$tmp/shots"
"$BROWSERCHECK" -insecure -url "https://user:$TOKEN@127.0.0.1:$port/debug/pprof/" \
    -shots "$tmp/shots" -cpu 2 >"$tmp/page" ||
    fail "the browser could not show the page over TLS with the token"
check_page
stop_demo
echo "browser_index: ok (screenshots in $SHOTS)"
