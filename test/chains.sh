#!/bin/sh
# chains.sh -- complete stacks through code built without frame pointers:
# test/chains runs known call chains (its header
# comment lists them) and google/pprof's parser (gocheck -chain) says what
# share of the samples carry the whole chain, from main or the thread's
# start routine down to the hot region.  Each figure must be >= 99%.
#
# Which samples are judged, and why:
#   CPU profiles  every sample labelled chain=WORKLOAD.  test/chains applies
#                 that label around exactly the call whose chain is known,
#                 on the one thread that runs it, and the sampler takes the
#                 label from the thread, not from the stack: a sample whose
#                 walk failed, or whose leaf is anywhere else (glue code,
#                 the vector's fill before std::sort, deflateReset), is
#                 judged all the same and counts against the figure.  At
#                 least MIN_SAMPLES of them, or there is nothing to judge.
#   census        every thread labelled chain=park (goroutine?debug=0
#                 through the parser, and the "# labels:" groups of
#                 ?debug=1): all NPARK parked threads must be there, each
#                 with the chain down to park_wait, its read(2) below.
#   heap          every allocation of HEAP_BYTES (3001) bytes, a size only
#                 the qsort comparator's chain allocates; heap profiles
#                 carry no labels, and the size is recorded whatever the
#                 stack.  With mem_profile_rate 1 nearly all are sampled
#                 (all but those in a countdown drawn before the setting).
# The chains name glue frames too (profile_workload, cpprof_do, run_once):
# a stack that skipped one is not complete.  Frames between the named ones
# are allowed (glibc's msort_with_tmp between qsort and its comparator,
# the unwinder below chain_dt2).  A chain ending at a library's entry
# (qsort, deflate) or above the throw (chain_dt2) is complete only if the
# walk from a leaf deeper down got through the library's frames.
#
# One window no walk gets right, set apart and bounded (docs/stacks.md):
# libgcc's _Unwind_RaiseException, in its last instructions before it
# jumps to the landing pad, has copied the catching frame's registers,
# its return address among them, over its own saved ones, which its CFI
# still describes; a sample there finds the catcher where __cxa_throw
# was (gdb's backtrace does the same).  Such samples of d_throw (leaf
# _Unwind_RaiseException, next frame not __cxa_throw) are counted apart,
# at most APART_MAX% of them (CI, loaded: 16 of 1,523; idle: 0 to 3).
#
# CHAINS_SECONDS (default 1.5) sets each CPU profile's length, in CPU
# seconds of the profiled thread: about 1,500 samples each at 1000 Hz.
set -u
. "$(dirname "$0")/http_lib.sh"
CHAINS=$top_builddir/test/chains
NEED=99
APART_MAX=2
MIN_SAMPLES=200
NPARK=8
failed=0

# judge NAME UNIT MIN GOCHECK-ARGS...: prints NAME's figure; a share under
# NEED%, or fewer than MIN judged, fails the test (after every figure).
# Under a sanitizer, the figures whose chain runs through one of its
# interceptors are printed but not judged: ASan's __cxa_throw interceptor
# (d_throw) and its read interceptor, a frame-pointer frame that a thread
# blocked in read(2) must be walked through without knowing its frame
# pointer (the census, which reads such threads from outside).  The CFI
# walk these figures test is the normal build's.
case ${CPPROF_SANITIZER:-none} in
asan | tsan) unjudged="d_throw census" ;;
*) unjudged= ;;
esac
counts() {
    case " $unjudged " in
    *" $1 "*) echo "$1: not judged under $CPPROF_SANITIZER (its interceptor is on the chain)"; return 1 ;;
    esac
}

judge() {
    name=$1 unit=$2 min=$3
    shift 3
    "$GOCHECK" "$@" >"$tmp/judge.out" ||
        fail "$name: google/pprof's parser rejects the profile"
    line=$(grep '^chain judged ' "$tmp/judge.out")
    judged=$(echo "$line" | cut -d' ' -f3)
    complete=$(echo "$line" | cut -d' ' -f5)
    apart=$(sed -n 's/^chain apart //p' "$tmp/judge.out")
    verdict=$(awk -v c="$complete" -v n="$judged" -v need=$NEED \
        -v min="$min" -v unit="$unit" -v a="${apart:--1}" \
        -v amax=$APART_MAX 'BEGIN { p = n ? 100 * c / n : 0;
                 printf "%.1f%% of %d %s complete, need >= %d%%", p, n, unit, need
                 if (n < min) printf " (and at least %d %s: too few to judge)", min, unit
                 ok = p >= need && n >= min
                 if (a >= 0) {
                     ap = a + n ? 100 * a / (a + n) : 0
                     printf "; %d set apart (%.1f%%, at most %d%%)", a, ap, amax
                     ok = ok && ap <= amax
                 }
                 print ok ? "" : " FAIL" }')
    echo "$name: $verdict"
    case $verdict in
    *FAIL)
        counts "$name" && failed=$((failed + 1))
        sed -n 's/^chain incomplete \([0-9]*\) /    \1 incomplete: /p' "$tmp/judge.out" |
            cut -c1-400
        ;;
    esac
}

# --- CPU profiles ------------------------------------------------------------
top='main;profile_workload;cpprof_do;run_once'
"$CHAINS" cpu "${CHAINS_SECONDS:-1.5}" "$tmp" control a b_qsort b_mem c d_sort \
    d_throw e ||
    fail "test/chains cpu exited with status $?"
# cpu WORKLOAD CHAIN [GOCHECK-ARGS...]
cpu() {
    name=$1 chain=$2
    shift 2
    judge "$name" samples $MIN_SAMPLES -where "chain=$name" -chain "$top;$chain" \
        "$@" "$tmp/$name.pb.gz"
}
# The control is judged from its own first frame: it is the only code of
# the program with frame pointers, so today's walker cannot be asked for the
# frameless frames above it.  It shows the harness can see a whole chain.
judge control samples $MIN_SAMPLES -where chain=control \
    -chain 'control_1;control_2;control_3' "$tmp/control.pb.gz"
cpu a 'chain_a1;chain_a2;chain_a3;chain_a4;chain_a5;chain_a6'
# glibc's qsort tail-calls qsort_r: the frame on the stack is qsort_r's,
# named __GI___qsort_r by libc6-dbg's DWARF, qsort_r by the symbol table.
# Under ASan the program's qsort is ASan's interceptor, which also calls
# the comparator itself (to check the array) before glibc's qsort_r.
libc_qsort='(__GI_)?_*qsort(_r)?|__interceptor_qsort(_r)?'
cpu b_qsort "chain_b1;chain_b2;$libc_qsort"
cpu b_mem 'chain_bm1;chain_bm2'
cpu c 'chain_c1;chain_c2;deflate'
cpu d_sort 'chain_d1;chain_d2<.*>;sort<.*>'
cpu d_throw 'chain_dt1;chain_dt2<.*>' -apart '_Unwind_RaiseException;__cxa_throw'
cpu e 'chain_e1;plugin_e1;plugin_e2;plugin_e3'

# --- Census and heap profile ---------------------------------------------------
start_program "$CHAINS" --park $NPARK
park="park_main;cpprof_do;park_scope;chain_p1;$libc_qsort;cmp_park;park_wait"
code=$(fetch census "$base/goroutine?debug=0")
[ "$code" = 200 ] || fail "goroutine?debug=0: status $code"
judge census threads $NPARK -where chain=park -chain "$park" "$tmp/census.body"

# ?debug=1: the same judgement on Go's text form, whose groups list each
# frame as "#<tab>PC<tab>FUNCTION+OFFSET<tab>FILE:LINE", leaf first.
code=$(fetch census1 "$base/goroutine?debug=1")
[ "$code" = 200 ] || fail "goroutine?debug=1: status $code"
awk -v chain="$park" -v need=$NEED -v min=$NPARK '
    function judge_group(   k, i) {
        if (!labelled) return
        judged += count
        k = 1
        for (i = nf; i >= 1 && k <= n; i--)
            if (fn[i] ~ ("^(" want[k] ")$")) k++
        if (k > n) complete += count
    }
    BEGIN { n = split(chain, want, ";") }
    / @ / { judge_group(); count = $1; nf = 0; labelled = 0 }
    /^# labels: \{"chain":"park"\}$/ { labelled = 1 }
    /^#\t/ { split($0, f, "\t"); sub(/\+0x[0-9a-f]+$/, "", f[3]); fn[++nf] = f[3] }
    END {
        judge_group()
        p = judged ? 100 * complete / judged : 0
        printf "census debug=1: %.1f%% of %d threads complete, need >= %d%%%s\n",
            p, judged, need, (p >= need && judged >= min) ? "" : " FAIL"
    }' "$tmp/census1.body" >"$tmp/census1.figure"
cat "$tmp/census1.figure"
grep -q FAIL "$tmp/census1.figure" && counts census && failed=$((failed + 1))

# In a program linked with ASan or TSan the sanitizer's malloc comes before
# libcpprof's, so nothing reaches the heap profiler (test/http_unlabelled.sh).
figures=11
case ${CPPROF_SANITIZER:-none} in
asan | tsan)
    echo "heap: not judged under $CPPROF_SANITIZER (its malloc comes first)"
    figures=10
    ;;
*)
    code=$(fetch heap "$base/heap")
    [ "$code" = 200 ] || fail "heap: status $code"
    judge "heap (b_qsort's comparator)" allocations 1000 -numwhere bytes=3001 \
        -chain "main;heap_workload;chain_h1;$libc_qsort;cmp_h;alloc_h" \
        "$tmp/heap.body"
    ;;
esac
stop_demo

[ $failed = 0 ] || fail "$failed of $figures figures below $NEED%"
echo "all chains complete"
