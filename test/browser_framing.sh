#!/bin/sh
# browser_framing.sh -- another site cannot start a profile through the
# index page.  The cross-site guard refuses a window a
# browser marks cross-site, but a site could frame /debug/pprof/#cpu=N,
# unseen, and the page's own script asked labels?seconds=N same-origin.
# Now every response refuses to be framed (X-Frame-Options: DENY,
# Content-Security-Policy: frame-ancestors 'none'), and the page starts a
# window only when its button is pressed: #cpu=N only fills in the form.
#
# Headless chromium (test/browsercheck) opens a page of another origin
# (127.0.0.2, served by browsercheck) holding the index with #cpu=60 in a
# frame the user cannot see; once the frame's load event has come (the
# framed page's scripts, had they run, asked for the window before it),
# the server's index JSON is read for 10 s: no window may open (the old
# code's request was already sent by then, and its window, held for 60 s,
# was seen open in both builds; the 10 s only bound a request slowed by
# the machine's load).  Then
# the index opened directly with #cpu=7: the form says 7 seconds, its
# button is ready and nothing runs until it is pressed; pressed, the CPU
# view fills as for any user.
set -u
. "$(dirname "$0")/http_lib.sh"
BROWSERCHECK=$top_builddir/test/browsercheck/browsercheck
command -v chromium >/dev/null || fail "chromium is missing: apt-get install chromium"

# Each check says what it saw and the script fails at the end, so that a
# run shows every layer that is missing.
failed=
flaw() {
    echo "FAIL: $*" >&2
    failed=1
}

start_demo --workers 1 --park 3 --for 120

# The refusal to be framed, on the index and on every other response: a
# page's file, a profile's text, an error.
for path in '' www/index.js labels cmdline 'profile?seconds=0'; do
    code=$(fetch frame "$base/$path")
    xfo=$(header frame x-frame-options)
    csp=$(header frame content-security-policy)
    [ "$xfo" = DENY ] && [ "$csp" = "frame-ancestors 'none'" ] ||
        flaw "/debug/pprof/$path ($code): X-Frame-Options '$xfo', Content-Security-Policy '$csp'"
done

"$BROWSERCHECK" -framed -url "$base/#cpu=60" -watch 10 >"$tmp/framed" ||
    fail "the browser could not show the other site's page"
cat "$tmp/framed"
grep -q '^framed loaded http://127\.0\.0\.2:' "$tmp/framed" ||
    fail "the frame never loaded"
[ "$(awk '$1 == "framed" && $2 == "windows" { print $3 }' "$tmp/framed")" = 0 ] ||
    flaw "a frame of another site started a window: $(grep '^framed windows' "$tmp/framed")"

"$BROWSERCHECK" -url "$base/#cpu=7" -shots "$tmp" -cpu 2 >"$tmp/page" ||
    fail "the browser could not show the page"
grep '^cpuform' "$tmp/page"
[ "$(grep '^cpuform' "$tmp/page")" = 'cpuform 7 ready ' ] ||
    flaw "the page opened with #cpu=7 did more than fill in the form: $(grep '^cpuform' "$tmp/page")"
[ "$(awk '$1 == "cpu" && $2 == "tenant" { print $3 }' "$tmp/page" | sort | tr '\n' ' ')" = \
  'acme globex initech ' ] ||
    flaw "the CPU view after the press: $(grep '^cpu' "$tmp/page" | tr '\n' ';')"
stop_demo
[ -z "$failed" ] || exit 1
echo "browser_framing: ok: every response refuses to be framed, another site's" \
    "frame started no window, #cpu=7 only filled in the form and the press" \
    "started the window"
