/*
 * goroutineleak.c -- how long /debug/pprof/goroutineleak takes to answer
 * with 1,000 blocked threads (the goal: within 25 ms), most of them in
 * the waits it must read and judge healthy.
 *
 *   build/bench/goroutineleak [ROUNDS]
 *
 * The threads: 250 in read on an idle pipe, 250 in a condition variable,
 * 480 on 10 mutexes whose 10 holders sleep (each waiter's lock word and
 * owner are read, and the owner found waiting for no lock), and 5
 * two-thread deadlocks (10 threads: found, walked, named).  The server
 * runs in this process (loopback, port 0).  First the detection alone
 * (census_count_leaked) with every thread new to it, each one's syscall
 * file read; a start that does not find exactly the 10 deadlocked threads
 * stops the benchmark.  Then each round is one request on a new
 * connection for the proto (debug=0) and one for debug=1, timed on the
 * wall from connect to the body's last byte: the threads have not run
 * since, so each costs a clock reading, not its file (census_leak.c).
 * Printed: the first request's time (the symbolizer's first opening of
 * the objects' debug information is most of it), then the minimum,
 * median and maximum of ROUNDS (default 15), and the median of the CPU
 * the process spent on a request (its wall time on an idle machine; a
 * loaded one stretches the wall time, not that), and the count the index
 * shows:
 *
 *   goroutineleak threads 1000 leaked 10 detection, every file read: wall_ms 12.0 cpu_ms 14.1
 *   goroutineleak threads 1000 leaked 10 debug=0 first_ms 188.8 min_ms 5.3 median_ms 9.1 max_ms 11.9 cpu_median_ms 5.2 (goal 25)
 */
#define _GNU_SOURCE
#include "bench.h"
#include "bench_http.h"
#include "census.h"
#include "http.h"

#include <cpprof.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { READERS = 250, CONDS = 250, HOLDERS = 10, PER_HOLDER = 48,
       CYCLES = 5, MAX_ROUNDS = 64 };
#define THREADS (READERS + CONDS + HOLDERS * (1 + PER_HOLDER) + 2 * CYCLES)

static int idle[2];
static pthread_mutex_t cond_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t held[HOLDERS];
static pthread_mutex_t cycle_mu[CYCLES][2];
static pthread_barrier_t cycle_in[CYCLES];
static atomic_int in_place;
static int port;

static void *reader(void *arg)
{
    (void)arg;
    char c;
    atomic_fetch_add(&in_place, 1);
    if (read(idle[0], &c, 1) < 0)
        perror("read");
    return NULL;
}

static void *cond_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&cond_mu);
    atomic_fetch_add(&in_place, 1);
    for (;;)
        pthread_cond_wait(&cond, &cond_mu);
    return NULL;
}

static void *holder(void *arg)
{
    pthread_mutex_lock(&held[(intptr_t)arg]);
    atomic_fetch_add(&in_place, 1);
    for (;;)
        sleep(1000);
    return NULL;
}

static void *mutex_waiter(void *arg)
{
    atomic_fetch_add(&in_place, 1);
    pthread_mutex_lock(&held[(intptr_t)arg]);
    return NULL;
}

static void *cycle_member(void *arg)
{
    intptr_t i = (intptr_t)arg, c = i / 2, k = i % 2;
    pthread_mutex_lock(&cycle_mu[c][k]);
    atomic_fetch_add(&in_place, 1);
    pthread_barrier_wait(&cycle_in[c]);
    pthread_mutex_lock(&cycle_mu[c][1 - k]);
    return NULL;
}

static void start(void *(*fn)(void *), intptr_t arg)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t t;
    if (pthread_create(&t, &attr, fn, (void *)arg) != 0) {
        perror("bench/goroutineleak: pthread_create");
        exit(1);
    }
    pthread_attr_destroy(&attr);
}

static void start_all(void)
{
    for (int i = 0; i < HOLDERS; i++)
        pthread_mutex_init(&held[i], NULL);
    for (int c = 0; c < CYCLES; c++) {
        pthread_mutex_init(&cycle_mu[c][0], NULL);
        pthread_mutex_init(&cycle_mu[c][1], NULL);
        pthread_barrier_init(&cycle_in[c], NULL, 2);
    }
    for (int i = 0; i < READERS; i++)
        start(reader, 0);
    for (int i = 0; i < CONDS; i++)
        start(cond_waiter, 0);
    for (int h = 0; h < HOLDERS; h++)
        start(holder, h);
    while (atomic_load(&in_place) < READERS + CONDS + HOLDERS)
        usleep(1000);
    for (int h = 0; h < HOLDERS; h++)
        for (int i = 0; i < PER_HOLDER; i++)
            start(mutex_waiter, h);
    for (int i = 0; i < 2 * CYCLES; i++)
        start(cycle_member, i);
    while (atomic_load(&in_place) < THREADS)
        usleep(1000);
    sleep(1); /* from in_place to asleep in the call: a few instructions */
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double process_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One request on a new connection: its wall time, and the CPU the
 * process spent meanwhile (*cpu; the server's and this thread's, which
 * only waits), which a loaded machine inflates far less. */
static double timed_get(const char *path, double *cpu)
{
    double t0 = now_ms(), c0 = process_cpu_ms();
    int fd = bench_http_connect(port);
    bench_http_get(fd, path, 0);
    close(fd);
    *cpu = process_cpu_ms() - c0;
    return now_ms() - t0;
}

static void measure(const char *form, const char *path, int rounds)
{
    double first_cpu, ms[MAX_ROUNDS], cpu[MAX_ROUNDS];
    double first = timed_get(path, &first_cpu);
    for (int r = 0; r < rounds; r++)
        ms[r] = timed_get(path, &cpu[r]);
    double median = bench_median(ms, rounds);
    printf("goroutineleak threads %d leaked %ld %s first_ms %.1f min_ms "
           "%.1f median_ms %.1f max_ms %.1f cpu_median_ms %.1f (goal 25)\n",
           THREADS, census_count_leaked(), form, first, ms[0], median,
           ms[rounds - 1], bench_median(cpu, rounds));
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: bench/goroutineleak [ROUNDS (1-%d)]\n",
                MAX_ROUNDS);
        return 2;
    }
    if (pipe(idle) != 0)
        return 1;
    bench_check(cpprof_http_start("127.0.0.1:0"), "cpprof_http_start");
    port = http_port();
    start_all();
    double t0 = now_ms(), c0 = process_cpu_ms();
    long leaked = census_count_leaked();
    printf("goroutineleak threads %d leaked %ld detection, every file "
           "read: wall_ms %.1f cpu_ms %.1f\n",
           THREADS, leaked, now_ms() - t0, process_cpu_ms() - c0);
    if (leaked != 2 * CYCLES) {
        fprintf(stderr, "bench/goroutineleak: %ld threads leaked, want %d\n",
                leaked, 2 * CYCLES);
        return 1;
    }
    measure("debug=0", "/debug/pprof/goroutineleak", rounds);
    measure("debug=1", "/debug/pprof/goroutineleak?debug=1", rounds);
    cpprof_http_stop();
    fflush(stdout);
    _exit(0); /* the deadlocked threads hold their locks for good */
}
