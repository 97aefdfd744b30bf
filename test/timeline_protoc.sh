#!/bin/sh
# timeline_protoc.sh -- the trace encoder's Perfetto protobuf read by an
# oracle that shares no code with it: protoc's own decoder.  Decoded with
# the vendored src/upper/perfetto_trace.proto it must parse, hold no field the
# definitions do not name, balance its slices and name its tracks.  Where
# the pinned Perfetto mirror is (PERFETTO_REPO, by default the one the
# vendored file was taken from), it is decoded again with upstream's whole,
# untrimmed perfetto_trace.proto at the commit the vendored file names: the
# two decodings must be the same text, so every field kept has upstream's
# number, type and name.  The fixture is test/check_timeline's.
set -u
: "${top_builddir:=.}" "${srcdir:=.}"
: "${PERFETTO_REPO:=/work/.mirror/google+perfetto/repo}"
fail() { echo "FAIL: $*"; exit 1; }
command -v protoc >/dev/null ||
    fail "no protoc (the Debian package protobuf-compiler)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-protoc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

"$top_builddir/test/check_timeline" --write "$tmp" ||
    fail "check_timeline --write could not write the trace"
decode() { # PROTO_DIR OUT
    protoc --decode=perfetto.protos.Trace --proto_path="$1" \
        "$1/perfetto_trace.proto" <"$tmp/trace.pb" >"$2" 2>"$tmp/err" ||
        { cat "$tmp/err"; fail "protoc could not decode with $1"; }
}
decode "$srcdir/src/upper" "$tmp/vendored.txt"

# protoc prints a field its definitions do not know by number ("99: 1").
unknown=$(grep -E '^ *[0-9]+ *[:{]' "$tmp/vendored.txt" | head -n 3)
[ -z "$unknown" ] || fail "fields the vendored definitions do not name: $unknown"
begins=$(grep -c 'type: TYPE_SLICE_BEGIN' "$tmp/vendored.txt")
ends=$(grep -c 'type: TYPE_SLICE_END' "$tmp/vendored.txt")
[ "$begins" -gt 0 ] && [ "$begins" = "$ends" ] ||
    fail "$begins slice begins, $ends ends"
for want in 'clock_id: 3' 'primary_trace_clock: BUILTIN_CLOCK_MONOTONIC' \
    'sequence_flags: 1' 'timestamp_clock_id: 3' 'process_name: "demo"' \
    'thread_name: "cpprof-sampler (cpprof)"' 'name: "task 7 job=task7"' \
    'name: "job=7,tenant=acme"' 'string_value: "bad \\xff byte"' \
    'str: "leaf (a.c:1)\nmain (a.c:9)"' 'string_value_iid: 1'; do
    grep -qF "$want" "$tmp/vendored.txt" || fail "no '$want' in the decoding"
done
echo "vendored definitions: $(grep -c '^packet {' "$tmp/vendored.txt") packets, $begins slices"

commit=$(grep -o -m 1 '[0-9a-f]\{40\}' "$srcdir/src/upper/perfetto_trace.proto")
if [ ! -d "$PERFETTO_REPO" ]; then
    echo "upstream check skipped: no Perfetto mirror at $PERFETTO_REPO"
    exit 0
fi
mkdir "$tmp/upstream"
git -C "$PERFETTO_REPO" show \
    "$commit:protos/perfetto/trace/perfetto_trace.proto" \
    >"$tmp/upstream/perfetto_trace.proto" ||
    fail "the mirror has no perfetto_trace.proto at $commit"
decode "$tmp/upstream" "$tmp/upstream.txt"
diff -u "$tmp/vendored.txt" "$tmp/upstream.txt" >"$tmp/diff" ||
    { head -n 40 "$tmp/diff"; fail "upstream's definitions read it otherwise"; }
echo "upstream's perfetto_trace.proto at ${commit%${commit#????????????}}: the same decoding"
