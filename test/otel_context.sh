#!/bin/sh
# otel_context.sh -- the demo's labels as a fleet profiler reads them.
#
# Runs the job runner with CPPROF_OTEL_CONTEXT=1 while its workers churn
# label sets at full speed, and points test/otel_reader (a separate process
# written from OTEP 4719, OTEP 4947 and custom-labels v1, not from cpprof's
# structs) at it: the reader finds OTEL_CTX in /proc/PID/maps, decodes the
# process context, finds otel_thread_ctx_v1 through libcpprof.so's dynamic
# symbols and TLS descriptor, stops each thread with ptrace and reads its
# record with process_vm_readv.  20,000 reads (a third under a
# sanitizer): each must be empty (the producer thread has no labels) or a
# record whose attributes are a set the
# demo applies (tenant acme/globex/initech, kind reindex/export); a record
# whose valid byte is not 1 is retried, and anything else is torn.  Then
# the same against test/otel_churn, whose threads apply sets millions of
# times a second, including a value past the record's 255-byte entry limit
# (truncated on a UTF-8 boundary; whole in custom-labels) and a trace
# context.  Without the setting the process publishes nothing.
set -u
: "${top_builddir:=.}"
DEMO=$top_builddir/examples/jobrunner
CHURN=$top_builddir/test/otel_churn
READER=$top_builddir/test/otel_reader
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpprof-otel.XXXXXX")
demo=
cleanup() {
    [ -n "$demo" ] && kill "$demo" 2>/dev/null && wait "$demo" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# ptrace is how the reader stops a thread; where it is refused (a
# container without CAP_SYS_PTRACE, Yama scope 3) the test cannot run.
scope=$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)
[ "$scope" -ge 3 ] && { echo "SKIP: ptrace disabled (Yama scope 3)"; exit 77; }

allow=
for tenant in acme globex initech; do
    for kind in export reindex; do
        allow="$allow --allow kind=$kind,tenant=$tenant"
    done
done

# field NAME LINE: the number after NAME in the reader's summary line.
field() {
    echo "$2" | sed "s/.* $1 \([0-9]*\).*/\1/"
}

# read_labels PID READS MIN_RECORDS ALLOW...: runs the reader; it must read
# no torn record, at least MIN_RECORDS records (and as many custom-labels
# sets), every allowed set at least once, and the process context.
read_labels() {
    target=$1 reads=$2 min=$3
    shift 3
    "$READER" "$target" --reads "$reads" --timeout 240 "$@" >"$tmp/reader.out" 2>&1
    status=$?
    line=$(grep '^reads ' "$tmp/reader.out")
    echo "$line"
    grep TORN "$tmp/reader.out" | head -n 5 >&2
    [ "$status" = 0 ] || fail "reader exit status $status: $(tail -n 5 "$tmp/reader.out")"
    grep -q "^process context: service.name=$SERVICE process.pid=$target threadlocal.schema_version=tlsdesc_v1_dev keys=[0-9]*\$" \
        "$tmp/reader.out" || fail "process context: $(head -n 1 "$tmp/reader.out")"
    grep -q '^key [0-9]* tenant$' "$tmp/reader.out" || fail "no tenant key"
    ! grep '^never read' "$tmp/reader.out" >&2 || fail "sets never read"
    [ "$(field records "$line")" -ge "$min" ] || fail "too few records: $line"
    [ "$(field custom_labels "$line")" -ge "$min" ] ||
        fail "too few custom-labels sets: $line"
}

# 20,000 reads of the demo and 10,000 of the churn: about 20 s on a
# loaded two-core machine, and a torn read shows in the first thousands.
# Under a sanitizer what is tested is the memory of the writer and the
# reader, not the rate of torn reads: a third of the reads.
demo_reads=20000 demo_min=200 churn_reads=10000 churn_min=400
case ${CPPROF_SANITIZER:-none} in
asan | tsan) demo_reads=7000 demo_min=70 churn_reads=3500 churn_min=140 ;;
esac

SERVICE=jobrunner-otel-test
# --- The demo: 20,000 reads (7,000 under a sanitizer) --------------------
# Its workers wait for the producer part of the time (more so on a loaded
# two-core machine, where the reader takes a core), so the floor on records
# is low; every one of them must still be right.
CPPROF_OTEL_CONTEXT=1 CPPROF_SERVICE_NAME=$SERVICE \
    "$DEMO" --workers 2 --for 300 >"$tmp/demo.out" 2>&1 &
demo=$!
# shellcheck disable=SC2086  # $allow is a list of arguments
read_labels "$demo" "$demo_reads" "$demo_min" $allow
grep -q '^key [0-9]* kind$' "$tmp/reader.out" || fail "no kind key"
kill "$demo" && wait "$demo"
demo=

# --- Tight churn, with truncated values and a trace context ---------------
SERVICE=churn
e127=$(printf '\303\251%.0s' $(seq 127))
e200=$(printf '\303\251%.0s' $(seq 200))
trace=span_id=a1a2a3a4a5a6a7a8,tenant=globex,trace_flags=01,trace_id=0102030405060708090a0b0c0d0e0f10
CPPROF_OTEL_CONTEXT=1 CPPROF_SERVICE_NAME=$SERVICE "$CHURN" 2 \
    >"$tmp/churn.out" 2>&1 &
demo=$!
# shellcheck disable=SC2086
read_labels "$demo" "$churn_reads" "$churn_min" $allow --allow "note=$e127,tenant=acme" \
    --allow "note=$e200,tenant=acme" --allow "$trace"
kill "$demo" && wait "$demo"
demo=

# --- Without it: no mapping, and the reader finds nothing -----------------
"$DEMO" --workers 1 --for 60 >"$tmp/off.out" 2>&1 &
demo=$!
"$READER" "$demo" --reads 10 --timeout 2 >"$tmp/off-reader.out" 2>&1
status=$?
[ "$status" = 2 ] || fail "context off: reader status $status: $(cat "$tmp/off-reader.out")"
grep -q 'no OTEL_CTX process context' "$tmp/off-reader.out" ||
    fail "context off: $(cat "$tmp/off-reader.out")"
! grep -q OTEL_CTX "/proc/$demo/maps" || fail "context off, yet OTEL_CTX is mapped"
exit 0
