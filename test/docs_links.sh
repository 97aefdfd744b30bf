#!/bin/sh
# docs_links.sh -- README stays a front page whose links all lead somewhere:
# every relative link in README, docs/*.md and test/README.md names a file
# of the tree, every page in docs/ is linked from README, and README stays
# within 400 lines (the rest belongs in docs/).
set -u
: "${srcdir:=.}"
fail=0
for page in "$srcdir/README" "$srcdir"/docs/*.md "$srcdir/test/README.md"; do
    dir=$(dirname "$page")
    # [text](target): targets without a scheme, anchors dropped.
    for target in $(grep -o '\](\([^)#:]*\)[^)]*)' "$page" |
                    sed 's/^](//; s/[#)].*//' | sort -u); do
        [ -e "$dir/$target" ] || {
            echo "FAIL: $page links to $target, which does not exist"; fail=1; }
    done
done
for doc in "$srcdir"/docs/*.md; do
    name=docs/$(basename "$doc")
    grep -q "]($name)" "$srcdir/README" || {
        echo "FAIL: README does not link $name"; fail=1; }
done
lines=$(wc -l <"$srcdir/README")
[ "$lines" -le 400 ] || { echo "FAIL: README has $lines lines (at most 400)"; fail=1; }
[ $fail = 0 ] && echo "ok: every link resolves, every docs page is linked, README is $lines lines"
exit $fail
