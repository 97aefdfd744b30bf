# task_shares.sh -- sourced by test/task_pool.sh and test/asio_echo.sh
# (after http_lib.sh): what a task test judges in a CPU profile against
# the program's own truth, its line "truth acme=NS globex=NS initech=NS
# ..." in $tmp/demo.out.

tenants="acme globex initech"

# value KEY LINE-PREFIX: KEY=VALUE's VALUE on the program's line.
value() {
    sed -n "s/^$2 .*\\b$1=\\([0-9]*\\).*/\\1/p" "$tmp/demo.out"
}

# tenant_cpu CHECK T: the CPU (ns) with tenant=T in gocheck's output CHECK.
tenant_cpu() {
    awk -v t="$2" '$1 == "tag" && $2 == "tenant" && $3 == t && $4 == 1 { print $5 }' "$1"
}

# check_shares CHECK: each tenant's share of the tenant-labelled CPU in
# gocheck's output CHECK against its share of the truth.  A sampled share
# is off from the truth by chance: with n independent draws its standard
# error is sqrt(q(1-q)/n).  The kernel checks CPU-time timers at its tick
# (CONFIG_HZ, Debian's 250), so above that rate a sample is one tick's
# draw weighted by its overruns: n is the profile's CPU time over the
# tick.  Each share may be off by 2 points or by 4 standard errors,
# whichever is more.
check_shares() {
    kernel_hz=$( { zcat /proc/config.gz 2>/dev/null || cat "/boot/config-$(uname -r)" 2>/dev/null; } |
        sed -n 's/^CONFIG_HZ=\([0-9]*\)$/\1/p')
    kernel_hz=${kernel_hz:-250}
    true_total=0 seen_total=0
    for t in $tenants; do
        true_total=$((true_total + $(value $t truth)))
        seen=$(tenant_cpu "$1" $t)
        seen_total=$((seen_total + ${seen:-0}))
    done
    [ "$seen_total" -gt 0 ] || fail "no tenant-labelled CPU: $(cat "$1")"
    for t in $tenants; do
        truth=$(value $t truth)
        seen=$(tenant_cpu "$1" $t)
        awk -v t=$t -v a="${seen:-0}" -v b="$truth" -v sa=$seen_total -v sb=$true_total -v hz=$kernel_hz '
            BEGIN { p = 100 * a / sa; q = 100 * b / sb; n = sa * hz / 1e9
                    bound = 4 * sqrt(q * (100 - q) / n); if (bound < 2) bound = 2
                    printf "%s: profile %.1f%%, truth %.1f%% (%d ticks: within %.1f points)\n", t, p, q, n, bound
                    exit !(p - q <= bound && q - p <= bound) }' ||
            fail "$t's CPU share is off by more than the bound"
    done
}

# check_work_labels PROFILE: a sample in work_T carries tenant=T only,
# and some do.
check_work_labels() {
    for t in $tenants; do
        for other in $tenants '!tenant'; do
            [ "$other" = $t ] && continue
            case $other in '!tenant') where='!tenant' ;; *) where=tenant=$other ;; esac
            "$GOCHECK" -chain "work_$t" -where "$where" "$1" >"$tmp/cross.check" ||
                fail "gocheck -chain work_$t -where $where"
            awk '$1 == "chain" && $2 == "judged" { exit !($5 == 0) }' "$tmp/cross.check" ||
                fail "samples in work_$t with $where: $(cat "$tmp/cross.check")"
        done
        "$GOCHECK" -chain "work_$t" -where tenant=$t "$1" >"$tmp/own.check" ||
            fail "gocheck -chain work_$t"
        awk '$1 == "chain" && $2 == "judged" { exit !($5 > 0) }' "$tmp/own.check" ||
            fail "no sample of work_$t with tenant=$t: $(cat "$tmp/own.check")"
    done
    echo "ok: no sample in a tenant's work carries another tenant's labels, or none"
}
