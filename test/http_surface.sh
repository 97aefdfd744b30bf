#!/bin/sh
# http_surface.sh -- every /debug/pprof/ endpoint beyond the profiles
# themselves, against the demo (--park 3: one parked thread per tenant):
#   /                the HTML index (Go's table, links and descriptions) and
#                    ?format=json; a bad format is a 400 naming it;
#   /debug/pprof     redirects to /debug/pprof/, as Go's mux does;
#   www/NAME         the page's stylesheet and script, compiled in;
#   labels           the JSON labels summary: census and ?seconds=N;
#   cmdline          argv joined by NUL, no trailing NUL;
#   symbol           num_symbols, then "ADDRESS NAME" per known address,
#                    from a POST body or a GET raw query; 413 past the cap;
#   errors           404 Unknown profile, unknown parameters ignored, a bad
#                    known parameter a 400 naming it, 405 with Allow;
#   HEAD             200 with GET's headers (Content-Length included; the
#                    index's within 1%, its counts move) and no body, as Go
#                    answers it (curl -I).
# The expected names, descriptions and symbols are written here or taken
# from nm and /proc, never from the server's own output.
set -u
. "$(dirname "$0")/http_lib.sh"
command -v jq >/dev/null || fail "jq is missing: apt-get install jq"

start_demo --workers 1 --park 3 --for 120

# expect_error NAME STATUS GOT PATTERN: Go's error form with STATUS and a
# one-line message matching PATTERN (grep -E).
expect_error() {
    [ "$3" = "$2" ] || fail "$1: status $3, want $2: $(cat "$tmp/$1.body")"
    [ "$(header "$1" content-type)" = 'text/plain; charset=utf-8' ] ||
        fail "$1: content-type $(header "$1" content-type)"
    [ "$(header "$1" x-go-pprof)" = 1 ] || fail "$1: no X-Go-Pprof: 1"
    [ "$(header "$1" x-content-type-options)" = nosniff ] ||
        fail "$1: no X-Content-Type-Options: nosniff"
    [ "$(wc -l <"$tmp/$1.body")" = 1 ] ||
        fail "$1: body is not one line: $(cat "$tmp/$1.body")"
    grep -Eq "$4" "$tmp/$1.body" ||
        fail "$1: message '$(cat "$tmp/$1.body")' does not match '$4'"
}

profiles='allocs block cmdline goroutine goroutineleak heap mutex profile symbol threadcreate trace'

# --- The HTML index ---------------------------------------------------------
code=$(fetch index "$base/")
[ "$code" = 200 ] || fail "index: status $code"
[ "$(header index content-type)" = 'text/html; charset=utf-8' ] ||
    fail "index: content-type $(header index content-type)"
[ "$(header index x-content-type-options)" = nosniff ] || fail "index: nosniff"
# Go's rows: the count, then the name linking to NAME?debug=1; sorted.
# A count is "?" only for heap and allocs in a sanitized build, whose
# runtime's malloc comes before cpprof's (the index says why).
sed -n 's/^<tr data-profile="\([a-z]*\)"><td class="num">\([0-9]*\|?\)<\/td><td><a href="\1?debug=1">\1<\/a><\/td><\/tr>$/\1 \2/p' \
    "$tmp/index.body" >"$tmp/rows"
[ "$(cut -d' ' -f1 "$tmp/rows" | tr '\n' ' ')" = "$profiles " ] ||
    fail "index: rows $(cat "$tmp/rows"), want $profiles"
unknown=$(awk '$2 == "?" { print $1 }' "$tmp/rows" | tr '\n' ' ')
case ${CPPROF_SANITIZER:-none}:$unknown in
*: | asan:"allocs heap " | tsan:"allocs heap ") ;;
*) fail "index: counts unknown for $unknown" ;;
esac
grep -q '<a href="goroutine?debug=2">full thread stack dump</a>' \
    "$tmp/index.body" || fail "index: no full thread stack dump link"
# Go's descriptions, word for word (threads for goroutines).
for want in \
    'allocs: </div> A sampling of all past memory allocations' \
    'cmdline: </div> The command line invocation of the current program' \
    'goroutine: </div> Stack traces of all current threads. Use debug=2' \
    'goroutineleak: </div> Stack traces of all leaked threads' \
    'mutex: </div> Stack traces of holders of contended mutexes' \
    'symbol: </div> Maps given program counters to function names. Counters can be specified in a GET raw query or POST body, multiple counters are separated by &#39;+&#39;.' \
    'threadcreate: </div> Stack traces that led to the creation of new OS threads'; do
    grep -qF "$want" "$tmp/index.body" || fail "index: no description '$want'"
done
# The goroutine count is the number of threads (the census's), which
# /proc/PID/task gives independently; the server's connection thread may
# come and go around the request.
threads=$(ls "/proc/$demo_pid/task" | wc -l)
count=$(awk '$1 == "goroutine" { print $2 }' "$tmp/rows")
[ "$count" -ge $((threads - 1)) ] && [ "$count" -le $((threads + 1)) ] ||
    fail "index: goroutine count $count, /proc says $threads threads"
# The page's files are compiled in.
code=$(fetch css "$base/www/index.css")
[ "$code" = 200 ] && [ "$(header css content-type)" = 'text/css; charset=utf-8' ] ||
    fail "www/index.css: $code $(header css content-type)"
cmp -s "$tmp/css.body" "$(dirname "$0")/../www/index.css" ||
    fail "www/index.css differs from www/index.css"
code=$(fetch js "$base/www/index.js")
[ "$code" = 200 ] && [ "$(header js content-type)" = 'text/javascript; charset=utf-8' ] ||
    fail "www/index.js: $code $(header js content-type)"
code=$(fetch nofile "$base/www/missing.js")
expect_error nofile 404 "$code" '^404 page not found$'
# Go's mux redirects the directory without its slash.
code=$(fetch redirect "http://127.0.0.1:$port/debug/pprof")
[ "$code" = 301 ] && [ "$(header redirect location)" = /debug/pprof/ ] ||
    fail "/debug/pprof: status $code, location $(header redirect location)"

# --- The JSON index ---------------------------------------------------------
code=$(fetch json "$base/?format=json")
[ "$code" = 200 ] && [ "$(header json content-type)" = application/json ] ||
    fail "?format=json: $code $(header json content-type)"
[ "$(jq -r '[.profiles[].name] | join(" ")' "$tmp/json.body")" = "$profiles" ] ||
    fail "?format=json: names $(jq -c '[.profiles[].name]' "$tmp/json.body")"
# A profile that cannot be taken (heap and allocs in a sanitized build)
# has a null count and says why.
jq -e 'all(.profiles[]; ((.count | type == "number") or
            (.count == null and (.unavailable | type == "string"))) and
        .path == "/debug/pprof/" + .name and (.description | length > 20))' \
    "$tmp/json.body" >/dev/null || fail "?format=json: bad entry: $(cat "$tmp/json.body")"
[ "$(jq -r '.profiles[] | select(.name == "heap") | .description' "$tmp/json.body")" = \
  'A sampling of memory allocations of live objects. You can specify the gc GET parameter to run GC before taking the heap sample.' ] ||
    fail "?format=json: heap description"
code=$(fetch badformat "$base/?format=xml")
expect_error badformat 400 "$code" '^invalid value for "format"'
code=$(fetch unknownparam "$base/?format=json&colour=blue")
[ "$code" = 200 ] || fail "unknown parameter not ignored: $code"

# --- Labels summary: census -------------------------------------------------
# The parked threads take their labels as they start: wait for all three.
for tick in $(seq 100); do
    code=$(fetch census "$base/labels")
    [ "$code" = 200 ] || fail "labels: status $code: $(cat "$tmp/census.body")"
    [ "$(jq '.labels.kind.wait.count // 0' "$tmp/census.body")" -ge 3 ] && break
    sleep 0.1
done
[ "$(header census content-type)" = application/json ] || fail "labels: content-type"
# Shares are printed with 6 significant digits (JSON_REAL_PRECISION(6)):
# equal to count / total to that precision, exactly only when total is a
# power of two.
jq -e '.source == "threads" and .total >= 6 and
       (.labels.tenant | keys) == ["acme", "globex", "initech"] and
       all(.labels.tenant[]; .count >= 1 and
           ((.share - .count / $total) | if . < 0 then -. else . end) < 1e-6)' \
    --argjson total "$(jq .total "$tmp/census.body")" "$tmp/census.body" \
    >/dev/null || fail "labels: $(cat "$tmp/census.body")"

# --- Labels summary: CPU ----------------------------------------------------
code=$(fetch cpu "$base/labels?seconds=2")
[ "$code" = 200 ] || fail "labels?seconds=2: $code $(cat "$tmp/cpu.body")"
# The demo's tenants cost 1:2:5 per job, so initech's share is the largest;
# shares are the value's samples over all samples, cpu_nanoseconds the
# samples times the 10 ms period.
jq -e '.source == "cpu" and .seconds == 2 and .total > 20 and
       .cpu_nanoseconds == .total * 10000000 and
       (.labels.tenant | keys) == ["acme", "globex", "initech"] and
       .labels.tenant.initech.share > .labels.tenant.acme.share and
       ([.labels.tenant[].share] | add) <= 1.00001 and
       all(.labels.tenant[]; .cpu_nanoseconds == .count * 10000000)' \
    "$tmp/cpu.body" >/dev/null || fail "labels?seconds=2: $(cat "$tmp/cpu.body")"
for bad in 0 -1 abc 99999 ''; do
    code=$(fetch badsec "$base/labels?seconds=$bad")
    expect_error badsec 400 "$code" '^invalid value for "seconds"'
done
# One CPU profile at a time, shared with /profile.  Once that profile holds
# the profiler (its collector thread, cpprof-sampler, exists: at most 10 s),
# a CPU window of the labels summary must be refused.
curl -s -o /dev/null "$base/profile?seconds=5" &
busy_pid=$!
for tick in $(seq 100); do
    grep -qx cpprof-sampler /proc/"$demo_pid"/task/*/comm 2>/dev/null && break
    sleep 0.1
done
code=$(fetch busy "$base/labels?seconds=1")
expect_error busy 500 "$code" '^Could not enable CPU profiling: cpu profiling already in use$'
wait "$busy_pid"

# --- cmdline ----------------------------------------------------------------
code=$(fetch cmdline "$base/cmdline")
[ "$code" = 200 ] || fail "cmdline: status $code"
[ "$(header cmdline content-type)" = 'text/plain; charset=utf-8' ] ||
    fail "cmdline: content-type $(header cmdline content-type)"
# argv[0] is the binary behind libtool's wrapper; the rest is what we ran.
{ cat "$tmp/cmdline.body"; echo; } | tr '\0' '\n' | tail -n +2 >"$tmp/argv"
printf '%s\n' --addr "127.0.0.1:$port" --workers 1 --park 3 --for 120 |
    cmp -s - "$tmp/argv" || fail "cmdline: arguments $(cat "$tmp/argv")"
[ "$(tr -cd '\0' <"$tmp/cmdline.body" | wc -c)" = 8 ] ||
    fail "cmdline: want 8 NULs between 9 arguments, none trailing"

# --- symbol -----------------------------------------------------------------
code=$(fetch sym0 "$base/symbol")
[ "$code" = 200 ] && [ "$(cat "$tmp/sym0.body")" = 'num_symbols: 1' ] ||
    fail "symbol: $code $(cat "$tmp/sym0.body")"
[ "$(header sym0 content-type)" = 'text/plain; charset=utf-8' ] ||
    fail "symbol: content-type $(header sym0 content-type)"
# Runtime addresses of two of the demo's functions: nm's value plus the
# load address of the executable's first mapping (a PIE's).
exe=$(readlink "/proc/$demo_pid/exe")
load=$(awk -v exe="$exe" '$6 == exe && $3 == "00000000" { split($1, a, "-"); print a[1]; exit }' \
    "/proc/$demo_pid/maps")
[ -n "$load" ] || fail "symbol: no mapping of $exe"
addr_of() {
    v=$(nm "$exe" | awk -v f="$1" '$3 == f { print $1 }')
    [ -n "$v" ] || fail "symbol: nm finds no $1 in $exe"
    printf '0x%X' $((0x$load + 0x$v + $2))
}
a1=$(addr_of decode_block 4)      # upper-case hex: echoed as asked
a2=$(addr_of main 1 | tr 'A-FX' 'a-fx') # lower case: also as asked
printf 'num_symbols: 1\n%s decode_block\n%s main\n' "$a1" "$a2" >"$tmp/sym.want"
code=$(fetch sympost "$base/symbol" --data-binary "$a1+0x1+junk+$a2")
[ "$code" = 200 ] || fail "symbol POST: status $code"
cmp -s "$tmp/sympost.body" "$tmp/sym.want" ||
    fail "symbol POST: got $(od -c "$tmp/sympost.body" | head -5)"
code=$(fetch symget "$base/symbol?$a1+0x1+junk+$a2")
cmp -s "$tmp/symget.body" "$tmp/sym.want" ||
    fail "symbol GET: got $(cat "$tmp/symget.body")"
# A body over the cap (64 KiB), announced or chunked, is a 413.
head -c 70000 /dev/zero | tr '\0' '+' >"$tmp/big"
code=$(fetch symbig "$base/symbol" --data-binary @"$tmp/big")
expect_error symbig 413 "$code" '^request body larger than 65536 bytes$'
code=$(fetch symchunk "$base/symbol" -H 'Transfer-Encoding: chunked' \
    --data-binary @"$tmp/big")
expect_error symchunk 413 "$code" '^request body larger than 65536 bytes$'

# --- Errors -----------------------------------------------------------------
code=$(fetch unknown "$base/nonesuch")
expect_error unknown 404 "$code" '^Unknown profile$'
code=$(fetch badpath "http://127.0.0.1:$port/elsewhere")
expect_error badpath 404 "$code" '^404 page not found$'
code=$(fetch ignored "$base/goroutine?debug=1&colour=blue")
[ "$code" = 200 ] || fail "goroutine with an unknown parameter: $code"
code=$(fetch baddebug "$base/goroutine?debug=x")
expect_error baddebug 400 "$code" 'debug'
code=$(fetch badprof "$base/profile?seconds=x")
expect_error badprof 400 "$code" '"seconds"'
code=$(fetch postprof "$base/profile" -X POST)
expect_error postprof 405 "$code" '^Method Not Allowed$'
[ "$(header postprof allow)" = GET ] || fail "405: Allow $(header postprof allow)"
code=$(fetch putsym "$base/symbol" -X PUT)
expect_error putsym 405 "$code" '^Method Not Allowed$'
[ "$(header putsym allow)" = 'GET, POST' ] || fail "405: Allow $(header putsym allow)"
code=$(fetch postindex "$base/" -X POST)
expect_error postindex 405 "$code" '^Method Not Allowed$'

# HEAD: GET's status and headers (but Date), no body.
for ep in '' cmdline 'symbol' 'www/index.css' 'nosuch'; do
    get=$(fetch headget "$base/$ep")
    head=$(fetch headhead "$base/$ep" -I)
    [ "$head" = "$get" ] || fail "HEAD /$ep: status $head, GET $get"
    # curl -I writes the headers as its output: anything more is a body.
    cmp -s "$tmp/headhead.body" "$tmp/headhead.rawhdr" || fail "HEAD /$ep: a body"
    # The index's counts (threads, heap samples) move between the two
    # requests, and its length with them: its Content-Length must be there
    # and within 1% of GET's; every other endpoint's must be GET's exactly.
    drop='^date:'
    if [ -z "$ep" ]; then
        drop='^(date|content-length):'
        got=$(header headhead content-length)
        want=$(header headget content-length)
        [ -n "$got" ] && [ -n "$want" ] &&
            [ $(( (got - want) * 100 )) -le "$want" ] &&
            [ $(( (want - got) * 100 )) -le "$want" ] ||
            fail "HEAD /: Content-Length '$got', GET's '$want'"
    fi
    grep -Ev "$drop" "$tmp/headget.hdr" >"$tmp/headget.cmp"
    grep -Ev "$drop" "$tmp/headhead.hdr" >"$tmp/headhead.cmp"
    cmp -s "$tmp/headget.cmp" "$tmp/headhead.cmp" ||
        fail "HEAD /$ep: headers differ from GET's: $(diff "$tmp/headget.cmp" "$tmp/headhead.cmp")"
done

stop_demo
echo "http_surface: ok"
