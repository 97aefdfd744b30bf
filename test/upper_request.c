/*
 * upper_request -- a program linked with libcpprof that asks for what
 * needs cpprof's upper object (a CPU profile, the HTTP server) once it
 * has run a while, as a program may days into its life, for
 * test/upper_checked.sh, which gives it a damaged upper object.
 *
 * Prints each call's result ("cpu_profile_start: CODE MESSAGE"), stops
 * what started, and prints "alive" before it exits 0.
 */
#include <cpprof.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void report(const char *call, int rc)
{
    printf("%s: %d %s\n", call, rc, rc ? cpprof_strerror(rc) : "ok");
    fflush(stdout); /* what it said before any crash */
}

int main(void)
{
    volatile uint64_t sink = 0;
    for (uint64_t i = 0; i < 20000000; i++) /* a while of its own work */
        sink += i * i;
    int rc = cpprof_cpu_profile_start();
    report("cpu_profile_start", rc);
    if (rc == 0) {
        unsigned char *buf;
        size_t len;
        report("cpu_profile_stop", cpprof_cpu_profile_stop(&buf, &len));
        free(buf);
    }
    rc = cpprof_http_start("127.0.0.1:0");
    report("http_start", rc);
    if (rc == 0)
        report("http_stop", cpprof_http_stop());
    puts("alive");
    return 0;
}
