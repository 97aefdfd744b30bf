#!/bin/sh
# sort.sh -- Debian's coreutils sort with cpprof preloaded in zero-code
# mode.  sort installs its own handler for SIGPROF (to remove its
# temporary files), the signal cpprof's CPU profile uses by default, so
# cpprof must decline CPU profiles there and say why everywhere:
#   - /profile and /debug/pprof/labels?seconds=N answer 500 naming the
#     signal, the setting cpu_signal and CPPROF_CPU_SIGNAL;
#   - the index (JSON and HTML) says the CPU profile is declined and why;
#   - stderr says it once, however many profiles were asked for;
#   - everything else still serves (the census), and sort's output is
#     exactly what sort gives without cpprof;
# and with CPPROF_CPU_SIGNAL=41 (SIGRTMIN+7, which sort leaves alone and
# which is not the accounting tick's 40) the CPU profile is served,
# google/pprof's parser accepts it, the index declines nothing and stderr
# stays empty.  sort reads from a FIFO the test holds open, so it stays
# up until the test closes it.
set -u
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER (sort is not instrumented; zero_code.sh covers preloading a sanitizer build)" >&2; exit 77 ;;
esac
. "$(dirname "$0")/http_lib.sh"
PRELOAD=$top_builddir/.libs/libcpprof.so
[ -f "$PRELOAD" ] || fail "no $PRELOAD"
SIGPROF_NO=$(for n in $(seq 31); do [ "$(kill -l "$n")" = PROF ] && echo "$n"; done)

# Lines to sort, and what sort makes of them without cpprof.
awk 'BEGIN { srand(7); for (i = 0; i < 20000; i++) printf "%08d %d\n", int(rand() * 1e8), i }' \
    >"$tmp/lines"
LC_ALL=C sort "$tmp/lines" >"$tmp/want"

# run_sort [VAR=VALUE...]: sort preloaded, reading the FIFO on fd 3.
run_sort() {
    sort_env=$*
    rm -f "$tmp/in"
    mkfifo "$tmp/in" || fail "mkfifo"
    # Held open read-write by the test alone (sort gets 3>&-): sort sees
    # the end of its input when the test closes it.
    exec 3<>"$tmp/in"
    serve_on_free_port sort "$tmp/sort.err" launch_sort answers_index
}
launch_sort() {
    env $sort_env LD_PRELOAD="$PRELOAD" CPPROF_HTTP="127.0.0.1:$port" \
        LC_ALL=C sort <"$tmp/in" >"$tmp/sorted" 2>"$tmp/sort.err" 3>&- &
}
# finish_sort: feeds the lines, ends the input, checks sort's output.
finish_sort() {
    cat "$tmp/lines" >&3
    exec 3>&-
    await_exit sort "$tmp/sort.err"
    cmp -s "$tmp/sorted" "$tmp/want" || fail "sort's output differs from sort's without cpprof"
}

run_sort
for path in 'profile?seconds=1' 'labels?seconds=1'; do
    code=$(fetch declined "$base/$path")
    [ "$code" = 500 ] || fail "/$path under sort answered $code, not 500"
    for word in "signal $SIGPROF_NO " cpu_signal CPPROF_CPU_SIGNAL; do
        grep -qF "$word" "$tmp/declined.body" ||
            fail "/$path's answer does not say '$word': $(cat "$tmp/declined.body")"
    done
done
echo "ok: /profile and /labels?seconds=1 say: $(cat "$tmp/declined.body")"
fetch index "$base/?format=json" >/dev/null
jq -e '.profiles[] | select(.name == "profile") | .unavailable |
       test("own handler") and test("CPPROF_CPU_SIGNAL")' "$tmp/index.body" >/dev/null ||
    fail "the index JSON does not say why: $(jq -c '.profiles[] | select(.name == "profile")' "$tmp/index.body")"
fetch html "$base/" >/dev/null
grep -q 'class="unavailable">Not available: declined: the program has its own handler for the CPU profiling signal' \
    "$tmp/html.body" || fail "the index page does not say why"
echo "ok: the index says the CPU profile is declined, and why"
code=$(fetch census "$base/goroutine?debug=1")
[ "$code" = 200 ] || fail "the census under sort answered $code: $(cat "$tmp/census.body")"
finish_sort
[ "$(grep -c 'cpprof: CPU profiles are declined' "$tmp/sort.err")" = 1 ] &&
    grep -q "handler for signal $SIGPROF_NO; set CPPROF_CPU_SIGNAL" "$tmp/sort.err" ||
    fail "stderr should say it once: $(cat "$tmp/sort.err")"
echo "ok: stderr says it once: $(cat "$tmp/sort.err")"
echo "ok: the census served, and sort's output is unchanged"

run_sort CPPROF_CPU_SIGNAL=41
code=$(fetch profile "$base/profile?seconds=1")
[ "$code" = 200 ] || fail "with CPPROF_CPU_SIGNAL=41: /profile answered $code: $(cat "$tmp/profile.body")"
"$GOCHECK" "$tmp/profile.body" >/dev/null || fail "google/pprof rejects the profile"
fetch index "$base/?format=json" >/dev/null
jq -e '[.profiles[] | select(.unavailable)] | length == 0' "$tmp/index.body" >/dev/null ||
    fail "with CPPROF_CPU_SIGNAL=41 the index still declines: $(jq -c '[.profiles[] | select(.unavailable)]' "$tmp/index.body")"
finish_sort
[ ! -s "$tmp/sort.err" ] || fail "stderr with CPPROF_CPU_SIGNAL=41: $(cat "$tmp/sort.err")"
echo "ok: with CPPROF_CPU_SIGNAL=41 the CPU profile is served and nothing is declined"
