#!/bin/sh
# http_names.sh -- thread names and labels with quotes, newlines, tabs and
# bytes that are not UTF-8 (test/hostile_names) through every text form:
# a name written raw into goroutine?debug=2's header
# broke it and injected lines of its own, such as a fake frame.
#   - goroutine?debug=2: every line is a goroutine header, a frame, a
#     file line, a creator or blank, in Go's shapes and order; each named
#     thread has one header, its name quoted as Go's %q writes it; no
#     thread twice;
#   - goroutine?debug=1: every line in Go's shapes, the label set's line
#     quoted as %q;
#   - /metrics: the strict parser (and promtool when installed), the
#     values escaped by Prometheus's rules;
#   - the JSON forms parse (jq) and give the label back byte for byte;
#   - the named profiles' text, symbol and cmdline: valid UTF-8;
#   - nowhere a line that came from a name ("fake" only inside quotes).
set -u
. "$(dirname "$0")/http_lib.sh"
APP=$top_builddir/test/hostile_names
CHECK=$top_builddir/test/check_accounting

launch_app() {
    "$APP" "127.0.0.1:$port" >"$tmp/app.out" 2>"$tmp/app.err" &
}
app_serving() {
    grep -qs '^serving' "$tmp/app.out"
}
serve_on_free_port hostile_names "$tmp/app.err" launch_app app_serving

# utf8 NAME: the response body NAME is valid UTF-8.
utf8() {
    iconv -f UTF-8 -t UTF-8 "$tmp/$1.body" >/dev/null 2>&1 ||
        fail "$1: not valid UTF-8"
}
# get NAME PATH: fetches $base/PATH (200 wanted) and checks it is UTF-8.
get() {
    code=$(fetch "$1" "$base/$2")
    [ "$code" = 200 ] || fail "$2: status $code: $(head -c 500 "$tmp/$1.body")"
    utf8 "$1"
}

# The strings as Go's %q writes them, byte for byte (U+FFFD stands for
# each byte of a label that is not UTF-8: labels are stored repaired).
fffd=$(printf '\357\277\275')
printf '%s\n' '"q\"]:\nfake(...)"' '"t\n\tfake:1 +0x1"' \
    '"\r\nthread 1 \"x\""' '"bad\xff\xfe\xc3(\\"' >"$tmp/names.want"
printf '%s\n' "labels:{\"k\\\"\\n\": \"v\\n\\tfake.c:1 +0x1\", \"tab\\tkey\": \"line\\r\\nthread 2 \\\"y\\\" [running]:\", \"utf\": \"bad$fffd$fffd\"}]:" \
    >"$tmp/labels2.want"
printf '%s\n' "# labels: {\"k\\\"\\n\":\"v\\n\\tfake.c:1 +0x1\", \"tab\\tkey\":\"line\\r\\nthread 2 \\\"y\\\" [running]:\", \"utf\":\"bad$fffd$fffd\"}" \
    >"$tmp/labels1.want"

# --- goroutine?debug=2 ---------------------------------------------------------
get goroutine2 'goroutine?debug=2'
q='"([^"\\]|\\.)*"'
Q=$q awk '
    BEGIN {
        q = ENVIRON["Q"]
        header = "^goroutine [0-9]+ \\[[a-z ]+(, [A-Za-z0-9_.]+)?( \\(leaked\\))?" \
                 "(, thread " q ")?(, stack unavailable: [^]]*)?" \
                 "(, labels:\\{" q ": " q "(, " q ": " q ")*\\})?\\]:$"
        frame = "^[^[:space:]].*\\(\\.\\.\\.\\)$"
        created = "^created by .* in goroutine [0-9]+$"
        file = "^\t(\\?\\?|.*\\.(c|go|s)):-?[0-9]+ \\+0x[0-9a-f]+$"
        want = "header"
    }
    function bad(why) { printf "line %d: %s: %s\n", NR, why, $0; exit 1 }
    {
        if (want == "header") {
            if ($0 !~ header) bad("not a goroutine header")
            if (seen[$2]++) bad("thread " $2 " twice")
            want = "frame"
        } else if (want == "frame") {
            if ($0 ~ frame) want = "file"
            else bad("not a frame line")
        } else if (want == "file" || want == "creator file") {
            if ($0 !~ file) bad("not a file line")
            want = want == "file" ? "frame, creator or blank" : "blank"
        } else if (want == "frame, creator or blank") {
            if ($0 == "") want = "header"
            else if ($0 ~ frame) want = "file"
            else if ($0 ~ created) want = "creator file"
            else bad("not a frame line, a creator or blank")
        } else if ($0 == "") {
            want = "header"
        } else bad("not blank")
        if ($0 ~ /fake/ && $0 !~ header) bad("a line from a name")
    }
    END { if (NR == 0) { print "empty"; exit 1 } }
' "$tmp/goroutine2.body" >"$tmp/shape2" ||
    fail "goroutine?debug=2 does not parse: $(cat "$tmp/shape2")"
i=0
while IFS= read -r want; do
    tid=$(awk -v i=$i '$1 == "name" && $2 == i { print $3 }' "$tmp/app.out")
    [ -n "$tid" ] || fail "hostile_names did not report thread $i"
    grep -a "^goroutine $tid \[" "$tmp/goroutine2.body" >"$tmp/header$i"
    n=$(grep -cF ", thread $want" "$tmp/header$i")
    [ "$n" = 1 ] ||
        fail "goroutine?debug=2: $n headers of thread $tid named $want: $(cat "$tmp/header$i")"
    grep -qF "$(cat "$tmp/labels2.want")" "$tmp/header$i" ||
        fail "goroutine?debug=2: thread $tid's labels are not quoted as %q: $(cat "$tmp/header$i")"
    i=$((i + 1))
done <"$tmp/names.want"
echo "ok: goroutine?debug=2 parses, $i names quoted as %q"

# --- goroutine?debug=1 ---------------------------------------------------------
get goroutine1 'goroutine?debug=1'
Q=$q awk '
    BEGIN {
        q = ENVIRON["Q"]
        labels = "^# labels: \\{" q ":" q "(, " q ":" q ")*\\}$"
    }
    function bad(why) { printf "line %d: %s: %s\n", NR, why, $0; exit 1 }
    NR == 1 { if ($0 !~ /^goroutine profile: total [0-9]+$/) bad("not the title"); next }
    /^[0-9]+ @( 0x[0-9a-f]+)*$/ || $0 == "" { next }
    /^#\t0x[0-9a-f]+\t[^\t]+(\t[^\t]*:-?[0-9]+)?$/ { next }
    $0 ~ labels { next }
    { bad("not a line of Go'"'"'s form") }
' "$tmp/goroutine1.body" >"$tmp/shape1" ||
    fail "goroutine?debug=1 does not parse: $(cat "$tmp/shape1")"
grep -qxF "$(cat "$tmp/labels1.want")" "$tmp/goroutine1.body" ||
    fail "goroutine?debug=1: the label set is not quoted as %q: $(grep -a '^# labels' "$tmp/goroutine1.body")"
echo "ok: goroutine?debug=1 parses"

# --- /metrics ------------------------------------------------------------------
code=$(fetch metrics "http://127.0.0.1:$port/metrics")
[ "$code" = 200 ] || fail "/metrics: status $code"
utf8 metrics
"$CHECK" --parse-metrics "$tmp/metrics.body" >"$tmp/metrics.check" 2>&1 ||
    fail "/metrics does not parse: $(cat "$tmp/metrics.check")"
if command -v promtool >/dev/null; then
    promtool check metrics <"$tmp/metrics.body" ||
        fail "promtool check metrics rejects /metrics"
else
    echo "note: promtool not installed: strict parser only"
fi
want=$(printf 'k__="v\\n\tfake.c:1 +0x1",tab_key="line\r\\nthread 2 \\"y\\" [running]:",utf="bad%s%s"' "$fffd" "$fffd")
grep -qF "cpprof_threads{$want}" "$tmp/metrics.body" ||
    fail "/metrics: no series {$want}: $(grep -a '^cpprof_threads' "$tmp/metrics.body")"
echo "ok: /metrics parses ($(cat "$tmp/metrics.check"))"

# --- JSON ------------------------------------------------------------------------
for ep in labels accounting 'goroutine?format=json' '?format=json'; do
    name=$(printf '%s' "$ep" | tr -c 'a-z' _)
    get "$name" "$ep"
    jq -e . "$tmp/$name.body" >/dev/null || fail "$ep: jq rejects it"
done
jq -e '.labels["k\"\n"]["v\n\tfake.c:1 +0x1"].count == 4 and
       .labels["tab\tkey"]["line\r\nthread 2 \"y\" [running]:"].count == 4' \
    "$tmp/labels.body" >/dev/null ||
    fail "labels: the label set does not read back: $(cat "$tmp/labels.body")"
echo "ok: the JSON forms parse and give the labels back"

# --- Everything else with a text form --------------------------------------------
texts=
for ep in heap allocs block mutex threadcreate; do
    code=$(fetch "$ep" "$base/$ep?debug=1")
    # Under a sanitizer, whose malloc comes first, cpprof declines the
    # heap profiles (501, saying why): nothing of theirs to check there.
    if [ "$code" = 501 ] && [ -n "${CPPROF_SANITIZER:-}" ]; then
        echo "note: $ep: $(head -c 100 "$tmp/$ep.body")..."
        continue
    fi
    [ "$code" = 200 ] || fail "$ep?debug=1: status $code: $(head -c 500 "$tmp/$ep.body")"
    utf8 "$ep"
    texts="$texts $ep"
done
get symbol symbol
get cmdline cmdline
# Go's form: the arguments joined by NULs, none after the last.
printf '\0' | cat "$tmp/cmdline.body" - | cmp -s - "/proc/$demo_pid/cmdline" ||
    fail "cmdline: not the process's NUL-separated arguments"
for name in $texts symbol; do
    ! grep -aq fake "$tmp/$name.body" ||
        fail "$name: a line from a name: $(grep -a fake "$tmp/$name.body")"
done
echo "http_names: ok"
