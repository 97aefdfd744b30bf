# ports.sh -- sourced by http_lib.sh and install_consumers.sh: where a test
# server may listen.
#
# random_port: sets $port to a random loopback port for a test server, and
# $port_span so that $((port + port_span)) is one for a second server of
# the same test (redis, nginx, PostgreSQL beside cpprof's).  Both lie below
# the kernel's ephemeral range (net.ipv4.ip_local_port_range), from which
# every client connection takes its local port: with the fuzzers' tens of
# thousands of loopback connections beside the tests, a port picked inside
# that range was already taken (EADDRINUSE on 32844, 2026-12-06).  The
# callers still try another port when one is taken: tests run side by side.
random_port() {
    eph_lo=32768
    read -r eph_lo _ 2>/dev/null </proc/sys/net/ipv4/ip_local_port_range || :
    # A range starting below 12000 leaves no room beneath it: pick beneath
    # the default start anyway, which the kernel then may hand out too.
    [ "$eph_lo" -ge 12000 ] || eph_lo=32768
    port_span=$(((eph_lo - 10000) / 2))
    port=$((10000 + $(od -An -N2 -tu2 /dev/urandom) % port_span))
}
