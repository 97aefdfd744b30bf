#!/bin/sh
# http_json.sh -- format=json on the proto endpoints (docs/endpoints.md, "JSON
# profile"), against the demo:
#   - the CPU profile's JSON, with proto=1, holds the same profile as the
#     .pb.gz embedded in it: google/pprof's parser (gocheck) reading the
#     proto and this script reading the JSON find the same sample count,
#     the same sums per value and per label, and the same frames;
#   - gzip only when the client accepts it (Content-Encoding, Vary), the
#     body then the same JSON;
#   - heap: labelled false, the object size as the numeric label bytes,
#     samples in root-first order;
#     goroutine: labelled true, the parked threads' labels, a value holding
#     <, >, &, " and \ escaped (the markup characters as \u escapes);
#   - bad format, proto and debug combinations are 400s naming them.
set -u
. "$(dirname "$0")/http_lib.sh"
command -v python3 >/dev/null || fail "python3 is missing"

# summarize FILE: what gocheck prints, from a JSON profile: "samples N",
# "total IDX SUM", "tag KEY VALUE IDX SUM" and (the frames) "frame FUNCTION
# FILE:LINE" for every symbolized frame.
summarize() {
    python3 - "$1" <<'EOF'
import json, re, sys
p = json.load(open(sys.argv[1]))
def field(s):
    return json.dumps(s) if s == '' or re.search(r'[\s"\\]|[^\x20-\x7e]', s) else s
out = ['samples %d' % len(p['samples'])]
ntypes = len(p['sample_types'])
totals = [0] * ntypes
tags = {}
for s in p['samples']:
    assert len(s['values']) == ntypes, s
    for i, v in enumerate(s['values']):
        totals[i] += v
        for k, val in s.get('labels', {}).items():
            tags[(k, val, i)] = tags.get((k, val, i), 0) + v
out += ['total %d %d' % (i, t) for i, t in enumerate(totals)]
out += ['tag %s %s %d %d' % (field(k), field(v), i, n)
        for (k, v, i), n in sorted(tags.items())]
frames = set()
for f in p['frames']:
    if 'address' in f:
        continue  # an unsymbolized address: gocheck lists lines only
    place = '%s:%d' % (f.get('file', ''), f.get('line', 0))
    frames.add('frame %s %s' % (field(f['function']), field(place)))
out += sorted(frames)
print('\n'.join(out))
EOF
}

NOTE='<b>&"\'
start_demo --workers 1 --park 3 --park-note "$NOTE" --for 120

# --- The CPU profile, proto and JSON of one window --------------------------
code=$(fetch cpu "$base/profile?seconds=2&format=json&proto=1")
[ "$code" = 200 ] || fail "profile?format=json: status $code $(cat "$tmp/cpu.body")"
[ "$(header cpu content-type)" = application/json ] ||
    fail "profile?format=json: content-type $(header cpu content-type)"
[ -z "$(header cpu content-encoding)" ] || fail "gzip sent to a client that did not ask"
python3 -c 'import base64, json, sys
sys.stdout.buffer.write(base64.b64decode(json.load(open(sys.argv[1]))["proto"]))' \
    "$tmp/cpu.body" >"$tmp/cpu.pb.gz" || fail "no proto in the JSON"
"$GOCHECK" -frames "$tmp/cpu.pb.gz" >"$tmp/cpu.check" || fail "gocheck rejects the proto"
summarize "$tmp/cpu.body" >"$tmp/cpu.json.check" || fail "the JSON does not parse"
grep -v '^valid\|^sample_types\|^period_type\|^duration_nanos\|^default_sample_type\|^numtag' \
    "$tmp/cpu.check" >"$tmp/cpu.want"
diff "$tmp/cpu.want" "$tmp/cpu.json.check" >&2 ||
    fail "the JSON and the proto disagree (< pprof's parser, > the JSON)"
grep -q '^tag tenant initech 0 [1-9]' "$tmp/cpu.want" || fail "no initech samples"
grep -q '^frame decode_block ' "$tmp/cpu.want" || fail "no decode_block frame"

# --- gzip on request, and the heap profile --------------------------------------
# Under ASan or TSan the sanitizer's malloc comes first: the heap profile
# is declined with its reason (a 501), and gzip is checked on goroutine.
gz=heap
case ${CPPROF_SANITIZER:-none} in
asan | tsan)
    gz=goroutine
    code=$(fetch declined "$base/heap?format=json")
    [ "$code" = 501 ] && grep -q '^no heap profile: ' "$tmp/declined.body" ||
        fail "heap?format=json under $CPPROF_SANITIZER: status $code: $(head -c 300 "$tmp/declined.body")"
    ;;
esac
code=$(fetch gz "$base/$gz?format=json" -H 'Accept-Encoding: gzip')
[ "$code" = 200 ] || fail "$gz?format=json: status $code"
[ "$(header gz content-encoding)" = gzip ] &&
    [ "$(header gz vary)" = Accept-Encoding ] ||
    fail "$gz?format=json: no gzip: $(cat "$tmp/gz.hdr")"
gzip -dc <"$tmp/gz.body" >"$tmp/$gz.json" || fail "not gzip"
[ $gz = goroutine ] || python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
assert p["labelled"] is False, p["labelled"]
types = [t["type"] for t in p["sample_types"]]
assert types == ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"], types
assert p["samples"] and all("labels" not in s for s in p["samples"])
assert all(s["numeric_labels"]["bytes"] > 0 for s in p["samples"])
roots = [s["stack"][::-1] for s in p["samples"]]
assert roots == sorted(roots), "samples not in root-first order"' "$tmp/heap.json" ||
    fail "heap JSON: $(head -c 1000 "$tmp/heap.json")"

code=$(fetch goroutine "$base/goroutine?format=json")
[ "$code" = 200 ] || fail "goroutine?format=json: status $code"
python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
assert p["labelled"] is True
notes = [s for s in p["samples"] if s.get("labels", {}).get("note") == sys.argv[2]]
assert sum(s["values"][0] for s in notes) == 3, notes' "$tmp/goroutine.body" "$NOTE" ||
    fail "goroutine JSON: $(head -c 1000 "$tmp/goroutine.body")"
# Markup characters travel as \u escapes, never as themselves.
grep -qF '"note":"\u003cb\u003e\u0026\"\\"' "$tmp/goroutine.body" ||
    fail "goroutine JSON: the note is not escaped: $(grep -o '"note":[^}]*' "$tmp/goroutine.body" | head -1)"

# --- Bad requests ---------------------------------------------------------------
bad() {
    code=$(fetch bad "$base/$1")
    [ "$code" = 400 ] && [ "$(cat "$tmp/bad.body")" = "$2" ] ||
        fail "$1: $code $(cat "$tmp/bad.body")"
}
bad 'goroutine?format=xml' 'invalid value for "format" - must be json or proto'
bad 'profile?seconds=1&format=' 'invalid value for "format" - must be json or proto'
bad 'goroutine?format=json&proto=2' 'invalid value for "proto" - must be 0 or 1'
bad 'mutex?proto=1' 'the proto parameter needs format=json'
bad 'goroutine?format=json&debug=1' 'format=json and debug params are incompatible'
bad 'goroutine?format=json&debug=2' 'format=json and debug params are incompatible'
code=$(fetch proto "$base/goroutine?format=proto")
[ "$code" = 200 ] && [ "$(header proto content-type)" = application/octet-stream ] ||
    fail "goroutine?format=proto: $code $(header proto content-type)"
stop_demo
echo "http_json: ok"
