#!/bin/sh
# tests_list.sh -- test/tests.list, where every test is declared once,
# read for the build, the suite and the docs:
#
#   test/tests_list.sh am              the automake fragment (test/tests.am)
#   test/tests_list.sh table           test/README.md's table of modules
#   test/tests_list.sh tests BUILD     the tests BUILD runs, as make's TESTS
#                                      names them (BUILD: normal, asan, tsan,
#                                      arm64)
#   test/tests_list.sh left-out BUILD  "NAME: reason" for each test BUILD
#                                      leaves out
#   test/tests_list.sh update          rewrites test/tests.am and the table
#                                      where they are not what the list gives
#   test/tests_list.sh check           fails, naming them, where they are not
#
# test/tests.am is committed, not made at build time: README's "From git"
# command, CI, every worktree and the tests' fresh trees run a bare
# `autoreconf -fi`, and automake needs the fragment it includes to exist
# then.  Committed, nothing changes for them.  Makefile.am's rule runs
# `update` when the list or this script is newer than the fragment (make
# then runs automake again, as for Makefile.am), and test/tests_current.sh
# fails when the committed fragment or table is stale.  The release
# tarball holds the fragment (automake distributes what it includes), so
# it builds without this script.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
list=$top/test/tests.list

# read MODE [BUILD]: the list, parsed and checked, answering MODE.
read_list() {
    awk -v mode="$1" -v want="${2:-}" '
    function fail(msg) {
        print "test/tests.list:" NR ": " msg | "cat 1>&2"
        failed = 1
        exit 1
    }
    # A test that make check runs; script: one the suite runs after it.
    function is_test(k) { return k == "check" || k == "c" || k == "sh" || k == "sh+c" }
    function has_program(k) { return k != "sh" && k != "script" }
    function is_build(b) { return b == "normal" || b == "asan" || b == "tsan" || b == "arm64" }
    # The name make and the tables know a test by.
    function shown(i) {
        if (kind[i] == "fuzz") return "fuzz/" name[i] ".c"
        return (kind[i] ~ /^(sh|sh\+c|script)$/) ? name[i] ".sh" : name[i]
    }
    function program(i) {
        if (kind[i] == "fuzz") return "test/fuzz/" name[i]
        return (kind[i] == "plugin" || kind[i] == "lib") ? "test/" name[i] ".la" : "test/" name[i]
    }
    function canonical(s) { gsub(/[\/.]/, "_", s); return s }
    # list(VAR, OP, WORDS): an automake list, wrapped at 76 columns.
    function list(var, op, words,    n, w, i, line, width) {
        n = split(words, w, " ")
        if (n == 0) return
        line = var " " op
        width = length(line)
        for (i = 1; i <= n; i++) {
            if (width + 1 + length(w[i]) > 74) {
                print line " \\"
                line = "\t" w[i]
                width = 8 + length(w[i])
            } else {
                line = line " " w[i]
                width += 1 + length(w[i])
            }
        }
        print line
    }
    # The default of VAR for entry i, unless an attribute sets it.
    function default_var(i, var, value) {
        if (!((i, var) in set)) print canonical(program(i)) "_" var " = " value
    }
    # The kind'\''s defaults for entry i'\''s program.
    function program_defaults(i,    k) {
        k = kind[i]
        default_var(i, "SOURCES", (k == "fuzz" ? "test/fuzz/" : "test/") name[i] ".c")
        if (k == "check") {
            default_var(i, "CFLAGS", "$(TEST_CFLAGS)")
            default_var(i, "LDADD", "$(TEST_LIBS)")
        } else if (k == "plugin") {
            default_var(i, "LDFLAGS", "-module -avoid-version -shared -rpath /nowhere")
        } else if (k == "fuzz") {
            default_var(i, "LDADD", "libcpprof_internal.la")
            default_var(i, "LDFLAGS", "-fsanitize=fuzzer")
        } else if (k != "lib") {
            default_var(i, "LDADD", "libcpprof.la")
        }
    }
    # Entry i'\''s automake lines: its program'\''s defaults, then its own.
    function entry_lines(i,    j) {
        if (has_program(kind[i])) program_defaults(i)
        for (j = 1; j <= nam[i]; j++) print am[i, j]
    }
    BEGIN {
        split("SOURCES CFLAGS CXXFLAGS CPPFLAGS LDADD LIBADD LDFLAGS", v, " ")
        for (j in v) program_var[v[j]] = 1
    }
    /^[ \t]*(#|$)/ { next }
    $1 == "module" {
        title = $0
        sub(/^module[ \t]+[^ \t]+[ \t]+/, "", title)
        modules[++nmodules] = $2
        module_title[$2] = title
        next
    }
    $1 == "default" {
        if ($2 !~ /^-[a-z0-9]+:$/ || !is_build(substr($2, 2, length($2) - 2)))
            fail("expected: default -BUILD: reason")
        b = substr($2, 2, length($2) - 2)
        r = $0
        sub(/^default[ \t]+[^ \t]+[ \t]+/, "", r)
        default_reason[b] = r
        last = "default"
        next
    }
    # An entry: NAME KIND [MODULES [BUILDS]].
    /^[^ \t]/ {
        n++
        name[n] = $1
        kind[n] = $2
        if ($1 in seen) fail($1 " declared twice")
        seen[$1] = 1
        if (!is_test($2) && $2 !~ /^(script|prog|plugin|lib|fuzz)$/)
            fail("unknown kind: " $2)
        if (is_test($2) || $2 == "script" || $2 == "fuzz") {
            if (NF < 3) fail($1 ": no module")
            mods[n] = $3
        } else if (NF > 2) fail($1 ": a " $2 " is no test: it has no module or builds")
        if ($2 == "script" || $2 == "fuzz") {
            if (NF > 3) fail($1 ": a " $2 " runs in no build of make check")
        } else if (is_test($2)) {
            runs[n, "normal"] = runs[n, "asan"] = 1
            for (j = 4; j <= NF; j++) {
                if ($j != "tsan" && $j != "arm64")
                    fail($1 ": " $j ": only tsan and arm64 are named to run in (normal and asan run every test but those left out)")
                runs[n, $j] = 1
                named[n, $j] = 1
            }
        }
        last = "entry"
        next
    }
    # Indented: a default reason continued, or an attribute of the entry
    # above.
    {
        line = $0
        sub(/^[ \t]+/, "", line)
    }
    last == "default" { default_reason[b] = default_reason[b] " " line; next }
    n == 0 { fail("an indented line before the first entry") }
    # Left out of a build: -BUILD: reason.
    line ~ /^-[a-z0-9]+:/ {
        b = substr(line, 2, index(line, ":") - 2)
        if (!is_build(b)) fail("no such build: " b)
        if (!is_test(kind[n])) fail(name[n] ": a " kind[n] " runs in no build of make check")
        if ((n, b) in named) fail(name[n] ": both runs in " b " and is left out of it")
        if ((n, b) in reason) fail(name[n] ": left out of " b " twice")
        runs[n, b] = 0
        r = substr(line, index(line, ":") + 1)
        sub(/^[ \t]+/, "", r)
        reason[n, b] = r
        last = "reason"
        lastb = b
        next
    }
    # An automake line continued.
    last == "am" && am[n, nam[n]] ~ /\\$/ {
        am[n, ++nam[n]] = "\t" line
        next
    }
    # VAR = value or VAR += value: one of the program variables, for this
    # entry'\''s program; any other (EXTRA_DIST), as it is.
    line ~ /^[A-Za-z_][A-Za-z0-9_]*[ \t]*\+?=/ {
        var = line
        sub(/[ \t]*\+?=.*/, "", var)
        if (var in program_var) {
            if (!has_program(kind[n])) fail(name[n] ": a " kind[n] " has no program to set " var " of")
            if (line ~ /^[A-Za-z0-9_]+[ \t]*=/) {
                if ((n, var) in set) fail(name[n] ": " var " set twice")
                set[n, var] = 1
            }
            line = canonical(program(n)) "_" line
        }
        am[n, ++nam[n]] = line
        last = "am"
        next
    }
    # A reason continued.
    last == "reason" { reason[n, lastb] = reason[n, lastb] " " line; next }
    { fail("not an entry, a reason (-BUILD: why) or an automake line: " line) }

    END {
        if (failed) exit 1
        for (i = 1; i <= n; i++) {
            if (!(i in mods)) continue
            k = split(mods[i], m, ",")
            for (j = 1; j <= k; j++)
                if (!(m[j] in module_title)) {
                    print "test/tests.list: " name[i] ": no such module: " m[j] | "cat 1>&2"
                    exit 1
                }
        }
        if (mode == "am") write_am()
        else if (mode == "table") write_table()
        else if (mode == "tests") {
            if (!is_build(want)) { print "no such build: " want | "cat 1>&2"; exit 2 }
            for (i = 1; i <= n; i++)
                if (is_test(kind[i]) && runs[i, want]) print "test/" shown(i)
        } else if (mode == "left-out") {
            if (!is_build(want)) { print "no such build: " want | "cat 1>&2"; exit 2 }
            for (i = 1; i <= n; i++)
                if (is_test(kind[i]) && !runs[i, want])
                    print shown(i) ": " ((i, want) in reason ? reason[i, want] : default_reason[want])
        }
    }
    function write_am(    i, tests, progs, libs, dist, fuzz) {
        print "# Generated by test/tests_list.sh from test/tests.list: edit the list."
        for (i = 1; i <= n; i++) {
            if (is_test(kind[i])) tests = tests " test/" shown(i)
            if (kind[i] ~ /^(sh|sh\+c|script)$/) dist = dist " test/" shown(i)
            if (kind[i] == "plugin" || kind[i] == "lib") libs = libs " " program(i)
            else if (kind[i] == "fuzz") fuzz = fuzz " " program(i)
            else if (has_program(kind[i])) progs = progs " " program(i)
        }
        list("TESTS", "=", tests)
        list("check_PROGRAMS", "=", progs)
        list("check_LTLIBRARIES", "=", libs)
        list("EXTRA_DIST", "+=", dist)
        for (i = 1; i <= n; i++)
            if (kind[i] != "fuzz") entry_lines(i)
        print "if FUZZING"
        list("noinst_PROGRAMS", "+=", fuzz)
        for (i = 1; i <= n; i++)
            if (kind[i] == "fuzz") entry_lines(i)
        print "endif"
    }
    function write_table(    i, j, k, m, names) {
        print "| module | tests |"
        print "|---|---|"
        for (j = 1; j <= nmodules; j++) {
            names = ""
            for (i = 1; i <= n; i++) {
                if (!(i in mods)) continue
                if (index("," mods[i] ",", "," modules[j] ","))
                    names = names (names == "" ? "" : ", ") "`" shown(i) "`"
            }
            print "| " module_title[modules[j]] " | " names " |"
        }
    }
    ' "$list"
}

# table_into README TABLE: README with its table (from the line
# "| module | tests |" to the last line of the table) replaced by TABLE.
table_into() {
    TABLE=$2 awk '
        $0 == "| module | tests |" { print ENVIRON["TABLE"]; skip = 1; done = 1; next }
        skip && /^\|/ { next }
        { skip = 0; print }
        END { if (!done) { print "test/README.md: no line \"| module | tests |\"" | "cat 1>&2"; exit 1 } }
    ' "$1"
}

# fresh FILE CONTENT-FILE: whether FILE holds exactly CONTENT-FILE.
fresh() { cmp -s "$1" "$2"; }

# as_new_as_sources: test/tests.am, already what the list gives, dated as
# the newer of the list and this script, so that make does not ask again
# and does not run automake for a fragment that did not change (a fresh
# clone writes the files in any order).  A read-only tree keeps its dates.
as_new_as_sources() {
    src=$list
    [ "$0" -nt "$src" ] && src=$0
    touch -r "$src" "$top/test/tests.am" 2>/dev/null || :
}

case ${1:-} in
am | table) read_list "$1" ;;
tests | left-out)
    [ $# -eq 2 ] || { echo "usage: $0 $1 BUILD" >&2; exit 2; }
    read_list "$1" "$2" ;;
update | check)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    read_list am >"$tmp/tests.am"
    table_into "$top/test/README.md" "$(read_list table)" >"$tmp/README.md"
    stale=
    for f in tests.am README.md; do
        if fresh "$top/test/$f" "$tmp/$f"; then
            if [ "$1 $f" = "update tests.am" ]; then as_new_as_sources; fi
        elif [ "$1" = update ]; then
            cp "$tmp/$f" "$top/test/$f"
            echo "tests_list.sh: wrote test/$f"
        else
            diff -u "$top/test/$f" "$tmp/$f" >&2 || true
            stale="$stale test/$f"
        fi
    done
    [ -z "$stale" ] || {
        echo "not what test/tests.list gives:$stale (test/tests_list.sh update writes them)" >&2
        exit 1
    } ;;
*)
    sed -n '2,/^$/s/^# \{0,1\}//p' "$0" >&2
    exit 2 ;;
esac
