# readme_lib.sh -- README's code blocks, for tests that run them as written
# (sourced by test/install_consumers.sh and test/readme_commands.sh).
#
# readme_block README SECTION N: prints the Nth code block (lines indented
# by four spaces, blank lines inside it kept) of the section titled
# SECTION (a title line underlined with '-' or '='), without the indent;
# fails naming what is missing, so that a README edit that moves or drops
# a command fails its test instead of testing nothing.
readme_block() {
    awk -v want="$2" -v n="$3" '
        /^(-+|=+)$/ && length($0) == length(prev) {
            section = prev; k = 0; inblock = 0; blanks = 0; prev = $0; next
        }
        /^    / {
            if (!inblock) { k++; inblock = 1 }
            if (section == want && k == n) {
                for (; blanks > 0; blanks--) print ""
                print substr($0, 5); found = 1
            }
            blanks = 0; prev = $0; next
        }
        /^$/ { if (inblock) blanks++; prev = $0; next }
        { inblock = 0; blanks = 0; prev = $0 }
        END { exit !found }
    ' "$1" || {
        echo "FAIL: README has no code block $3 in section \"$2\"" >&2
        return 1
    }
}
