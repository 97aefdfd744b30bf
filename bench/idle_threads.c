/*
 * idle_threads.c -- what a CPU profile costs a process with many idle
 * threads (a server's connection threads waiting for their next request),
 * against the same process without them.
 *
 * One worker thread runs labelled jobs of a fixed CPU loop without pause.
 * Each round has two halves: without idle threads, then with IDLE of them
 * (default 1,000) parked in a blocking read of a pipe, started before the
 * half and ended after it.  Each half measures one window of SECONDS
 * without a profile and one with a CPU profile, the profile's start and its
 * stop (building and encoding it) inside the window, so that what the
 * sampler does per thread at either end counts too.  Each window counts
 * jobs per CPU second of the whole process (the worker, the signal handler,
 * the collector): the profile's cost is how much fewer of them there are.
 * On a loaded machine that ratio swings by several points from window to
 * window, so each window also counts the process's CPU time outside the
 * worker thread: the collector's, the profile's start and stop, and any
 * the idle threads were made to use.  Without a profile that is next to
 * nothing, so the profiled window's extra is what the profile cost beyond
 * its signal handler (which runs on the worker), in CPU milliseconds.
 *
 * Usage: idle_threads [IDLE [SECONDS [ROUNDS]]]   (1000, 5, 3)
 * Prints each round, then the medians:
 *   cost_percent_idle_0 P       the profile's cost without idle threads
 *   cost_percent_idle_N P       and with N idle threads
 *   cpu_ms_idle_0 C, cpu_ms_idle_N C     the profile's CPU outside the
 *                                        worker (ms per window)
 *   stop_ms_idle_0 M, stop_ms_idle_N M   the profile's stop, wall
 * Goal: the two costs within the noise the rounds show.
 */
#define _GNU_SOURCE
#include "bench.h"
#include <cpprof.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_IDLE 10000
#define MAX_ROUNDS 32

static atomic_llong jobs_done;
static atomic_bool stopping;
static atomic_int parked;
static clockid_t worker_clock;
static volatile uint32_t sink;

static double clock_seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) static void job(void *arg,
                                          const cpprof_labelset *labels)
{
    (void)arg, (void)labels;
    uint32_t h = 2166136261u;
    for (int i = 0; i < 20000; i++)
        h = (h ^ (uint32_t)i) * 16777619u;
    sink = h;
}

static void *worker(void *arg)
{
    (void)arg;
    const char *kv[] = {"tenant", "acme"};
    cpprof_labelset *set;
    if (cpprof_labels(&set, 2, kv) != 0)
        abort();
    while (!atomic_load(&stopping)) {
        cpprof_do(NULL, set, job, NULL);
        atomic_fetch_add(&jobs_done, 1);
    }
    cpprof_labelset_release(set);
    return NULL;
}

/* An idle thread: blocked in read until the pipe's write end closes. */
static void *idle_thread(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char c;
    atomic_fetch_add(&parked, 1);
    while (read(fd, &c, 1) > 0)
        ;
    return NULL;
}

struct idlers {
    pthread_t t[MAX_IDLE];
    int n, pipe[2];
};

/* Starts n idle threads on small stacks and returns once each has
 * started (it then blocks in read at once). */
static void idlers_start(struct idlers *s, int n)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    if (pipe(s->pipe) != 0)
        abort();
    atomic_store(&parked, 0);
    for (s->n = 0; s->n < n; s->n++)
        if (pthread_create(&s->t[s->n], &attr, idle_thread,
                           (void *)(intptr_t)s->pipe[0]) != 0) {
            perror("idle_threads: pthread_create");
            exit(1);
        }
    pthread_attr_destroy(&attr);
    while (atomic_load(&parked) < n)
        usleep(1000);
    usleep(100000); /* each into its read */
}

static void idlers_stop(struct idlers *s)
{
    close(s->pipe[1]);
    for (int i = 0; i < s->n; i++)
        pthread_join(s->t[i], NULL);
    close(s->pipe[0]);
    s->n = 0;
}

/* Jobs per CPU second of the process over a window of `seconds`, with a
 * CPU profile from its start to its end when `profiled`; *stop_ms gets the
 * profile's stop's wall time, *other_ms the process's CPU outside the
 * worker. */
static double window(double seconds, bool profiled, double *stop_ms,
                     double *other_ms)
{
    long long j0 = atomic_load(&jobs_done);
    double c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    double w0 = clock_seconds(worker_clock);
    if (profiled && cpprof_cpu_profile_start() != 0)
        exit(1);
    usleep((useconds_t)(seconds * 1e6));
    if (profiled) {
        unsigned char *buf;
        size_t len;
        double t0 = clock_seconds(CLOCK_MONOTONIC);
        if (cpprof_cpu_profile_stop(&buf, &len) != 0)
            exit(1);
        *stop_ms = (clock_seconds(CLOCK_MONOTONIC) - t0) * 1e3;
        free(buf);
    }
    long long jobs = atomic_load(&jobs_done) - j0;
    double cpu = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (other_ms)
        *other_ms = (cpu - (clock_seconds(worker_clock) - w0)) * 1e3;
    return jobs / cpu;
}

/* The profile's cost in percent of the unprofiled window's jobs per CPU
 * second; *cpu_ms gets its CPU outside the worker. */
static double profile_cost(double seconds, double *stop_ms, double *cpu_ms)
{
    double other_off, other_on;
    double off = window(seconds, false, NULL, &other_off);
    double on = window(seconds, true, stop_ms, &other_on);
    *cpu_ms = other_on - other_off;
    return 100 * (off - on) / off;
}

int main(int argc, char **argv)
{
    int idle = argc > 1 ? atoi(argv[1]) : 1000;
    double seconds = argc > 2 ? atof(argv[2]) : 5;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    if (idle < 1 || idle > MAX_IDLE || seconds <= 0 || rounds < 1 ||
        rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: idle_threads [IDLE [SECONDS [ROUNDS]]]\n");
        return 2;
    }
    static struct idlers idlers;
    pthread_t w;
    pthread_create(&w, NULL, worker, NULL);
    if (pthread_getcpuclockid(w, &worker_clock) != 0)
        abort();
    printf("idle threads %d window %.1f s rounds %d\n", idle, seconds, rounds);
    double none[MAX_ROUNDS], many[MAX_ROUNDS], stop_none[MAX_ROUNDS],
        stop_many[MAX_ROUNDS], cpu_none[MAX_ROUNDS], cpu_many[MAX_ROUNDS];
    window(1, false, NULL, NULL); /* warm up */
    for (int r = 0; r < rounds; r++) {
        none[r] = profile_cost(seconds, &stop_none[r], &cpu_none[r]);
        idlers_start(&idlers, idle);
        many[r] = profile_cost(seconds, &stop_many[r], &cpu_many[r]);
        idlers_stop(&idlers);
        printf("round %d: cost %.2f%% (%.1f CPU ms, stop %.1f ms) without "
               "idle threads, %.2f%% (%.1f CPU ms, stop %.1f ms) with %d\n",
               r + 1, none[r], cpu_none[r], stop_none[r], many[r],
               cpu_many[r], stop_many[r], idle);
        fflush(stdout);
    }
    atomic_store(&stopping, true);
    pthread_join(w, NULL);
    printf("cost_percent_idle_0 %.2f\n", bench_median(none, rounds));
    printf("cost_percent_idle_%d %.2f\n", idle, bench_median(many, rounds));
    printf("cpu_ms_idle_0 %.1f\n", bench_median(cpu_none, rounds));
    printf("cpu_ms_idle_%d %.1f\n", idle, bench_median(cpu_many, rounds));
    printf("stop_ms_idle_0 %.1f\n", bench_median(stop_none, rounds));
    printf("stop_ms_idle_%d %.1f\n", idle, bench_median(stop_many, rounds));
    return 0;
}
