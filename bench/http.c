/*
 * http.c -- what a request to cpprof's server costs its client, with some
 * connections held open and idle, as scrapers and browser tabs hold them.
 *
 *   build/bench/http [IDLE [ROUNDS]]
 *
 * The server runs in this process (loopback, port 0).  Each round holds
 * IDLE connections open that have sent nothing (default 0 and 200), then
 * times 500 requests for /debug/pprof/cmdline, each on a new connection
 * (Connection: close), and 500 on one keep-alive connection.  Figures are
 * wall-clock microseconds per request, the minimum and median of ROUNDS
 * rounds (default 9): the server's pool threads do their share of the
 * work, so CPU time of this thread alone would miss it.  Every request
 * must get a 200, or the benchmark stops and says which did not.
 */
#define _GNU_SOURCE
#include "http.h"
#include "bench_http.h"

#include <cpprof.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { REQUESTS = 500, MAX_IDLE = 1000 };

static int port;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double per_request_new_connections(void)
{
    double t0 = now_us();
    for (int i = 0; i < REQUESTS; i++) {
        int fd = bench_http_connect(port);
        bench_http_get(fd, "/debug/pprof/cmdline", 0);
        close(fd);
    }
    return (now_us() - t0) / REQUESTS;
}

static double per_request_keep_alive(void)
{
    int fd = bench_http_connect(port);
    double t0 = now_us();
    for (int i = 0; i < REQUESTS; i++)
        bench_http_get(fd, "/debug/pprof/cmdline", 1);
    double us = (now_us() - t0) / REQUESTS;
    close(fd);
    return us;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, int idle, double *us, int rounds)
{
    qsort(us, (size_t)rounds, sizeof *us, by_value);
    printf("%-16s idle %4d: min %7.1f us, median %7.1f us per request\n",
           what, idle, us[0], us[rounds / 2]);
}

static void run(int idle, int rounds)
{
    static int idle_fds[MAX_IDLE];
    for (int i = 0; i < idle; i++)
        idle_fds[i] = bench_http_connect(port);
    double fresh[64], kept[64];
    for (int r = 0; r < rounds; r++) {
        fresh[r] = per_request_new_connections();
        kept[r] = per_request_keep_alive();
    }
    report("new connection", idle, fresh, rounds);
    report("keep-alive", idle, kept, rounds);
    for (int i = 0; i < idle; i++)
        close(idle_fds[i]);
}

int main(int argc, char **argv)
{
    int idle = argc > 1 ? atoi(argv[1]) : -1;
    int rounds = argc > 2 ? atoi(argv[2]) : 9;
    if (idle > MAX_IDLE || idle < -1 || rounds < 1 || rounds > 64) {
        fprintf(stderr, "usage: bench/http [IDLE (0-%d) [ROUNDS (1-64)]]\n",
                MAX_IDLE);
        return 2;
    }
    char limit[16];
    snprintf(limit, sizeof limit, "%d", MAX_IDLE + 100);
    int rc = cpprof_set("http_max_connections", limit);
    if (rc == 0)
        rc = cpprof_set("http_connection_timeout", "600");
    if (rc == 0)
        rc = cpprof_http_start("127.0.0.1:0");
    if (rc != 0) {
        fprintf(stderr, "bench/http: %s\n", cpprof_strerror(rc));
        return 1;
    }
    port = http_port();
    if (idle >= 0) {
        run(idle, rounds);
    } else {
        run(0, rounds);
        run(200, rounds);
    }
    cpprof_http_stop();
    return 0;
}
