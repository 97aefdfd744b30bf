#!/bin/sh
# node.sh -- Node.js with cpprof preloaded in zero-code mode: a JIT's code
# in a CPU profile.  V8 runs a hot loop as machine code it wrote into
# anonymous memory, which no file and no symbol describes; node also maps
# part of its own executable a second time, far above the first, so that
# libdw's module for node spanned V8's code space and every JIT frame was
# named "_end", node's last symbol.  Checked, with a 2-second profile of a
# busy JavaScript loop:
#   - google/pprof's parser accepts it, with at least 10 samples;
#   - it holds frames outside every mapping (the JIT's), and each is named
#     by its address, as pprof names what it cannot symbolize -- never
#     after a symbol;
#   - node ends normally once told to.
set -u
case ${CPPROF_SANITIZER:-none} in
asan | tsan) echo "SKIP: under $CPPROF_SANITIZER (node is not instrumented; zero_code.sh covers preloading a sanitizer build)" >&2; exit 77 ;;
esac
. "$(dirname "$0")/http_lib.sh"
PRELOAD=$top_builddir/.libs/libcpprof.so
[ -f "$PRELOAD" ] || fail "no $PRELOAD"
command -v node >/dev/null || fail "no node: apt-get install nodejs"

cat >"$tmp/busy.js" <<'EOF'
const fs = require('fs');
let x = 0;
while (!fs.existsSync(process.argv[2]))
    for (let i = 0; i < 1e6; i++) x += Math.sqrt(i);
console.log(x > 0 ? 'done' : 'wrong');
EOF
launch_node() {
    LD_PRELOAD=$PRELOAD CPPROF_HTTP=127.0.0.1:$port node "$tmp/busy.js" \
        "$tmp/stop" >"$tmp/node.out" 2>"$tmp/node.err" &
}
serve_on_free_port node "$tmp/node.err" launch_node answers_index

code=$(fetch profile "$base/profile?seconds=2")
[ "$code" = 200 ] || fail "/profile answered $code: $(cat "$tmp/profile.body")"
"$GOCHECK" "$tmp/profile.body" >"$tmp/profile.check" ||
    fail "google/pprof rejects node's CPU profile"
samples=$(awk '$1 == "total" && $2 == 0 { print $3 }' "$tmp/profile.check")
[ "${samples:-0}" -ge 10 ] || fail "only ${samples:-0} samples of a busy loop"
go tool pprof -raw "$tmp/profile.body" >"$tmp/raw" 2>"$tmp/raw.err" ||
    fail "go tool pprof -raw: $(cat "$tmp/raw.err")"
# Mappings lines: "K: START/LIMIT/OFFSET [FILE] [BUILDID] [FLAGS]", no
# file for anonymous memory; Locations lines: "N: 0xADDR [M=K] NAME
# FILE:LINE s=0".  A JIT's code is in a mapping without a file: it must
# carry no build id (node's, once: pprof would symbolize it with node's
# binary), and each of its locations (or one outside every mapping, but
# for cpprof's pseudo-frames at 0x0) is named by its address.
sed -n '/^Mappings/,$p' "$tmp/raw" |
    awk '$1 ~ /^[0-9]+:$/ && $2 ~ /\// && $3 !~ /^[\/[]/' >"$tmp/anon"
[ -s "$tmp/anon" ] || fail "no mapping without a file: no JIT code seen"
awk 'NF > 2 { print }' "$tmp/anon" >"$tmp/anon.id"
[ ! -s "$tmp/anon.id" ] || fail "an anonymous mapping with a build id: $(head -2 "$tmp/anon.id")"
sed -n '/^Locations/,/^Mappings/p' "$tmp/raw" |
    awk -v ids=" $(awk '{ sub(":", "", $1); printf "%s ", $1 }' "$tmp/anon")" \
        '$1 ~ /^[0-9]+:$/ && ($3 ~ /^M=/ ? index(ids, " " substr($3, 3) " ") : $2 != "0x0") {
             if ($3 !~ /^M=/) $3 = "M=0 " $3   # no mapping: the name is field 4
             print }' \
        >"$tmp/unmapped"
[ -s "$tmp/unmapped" ] || fail "no sample in the JIT's code"
awk '$4 != $2 { print }' "$tmp/unmapped" >"$tmp/named"
[ ! -s "$tmp/named" ] || fail "JIT frames named after a symbol: $(head -3 "$tmp/named")"
echo "ok: $samples samples; $(wc -l <"$tmp/unmapped") JIT locations, each named by its address"

: >"$tmp/stop"
await_exit node "$tmp/node.err"
[ "$(cat "$tmp/node.out")" = done ] || fail "node printed '$(cat "$tmp/node.out")'"
echo "ok: node ended normally"
