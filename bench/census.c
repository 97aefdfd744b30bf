/*
 * bench/census -- how long a thread census takes, and what it costs the
 * process, with 100 and 1,000 labelled threads parked in a blocking read
 * (walked from outside: the goal is at most 10 ms at 1,000) and with 1,000
 * busy threads at nice 19 (signalled: each walks its own stack, when it
 * gets the CPU; an answer later than census_timeout_ms is no stack).
 * Both kinds of census: `stacks` (census_take_stacks: what the goroutine
 * profile's proto, debug=1 and delta take) and `details` (census_take:
 * names, states and wait channels too, for debug=2).
 *
 * The first census of new threads reads every thread's /proc files; the
 * next ones take a thread that has not run since (its CPU clock
 * unchanged) from the last (census_still.c, "still" threads), which is
 * what parked threads are.  So the parked cases start FIRSTS batches of new
 * threads, one after the other, and census each batch once as it stands
 * (every one of its threads new); the last batch is then censused ROUNDS
 * more times.  Per case: the fastest and median wall time of the first
 * censuses and their median CPU time (the whole process: the collector's
 * /proc reads and walks, plus the handlers of signalled threads); the
 * same for the repeats; how many threads had a stack in the last census:
 *
 *   parked 1000 stacks first_ms min 17.0 median 18.1 first_cpu_ms 17.5 repeat_ms min 0.8 median 0.9 repeat_cpu_ms 0.9 stacks 1001/1001
 *
 * On a machine shared with other work the wall times vary with the load;
 * the CPU figure much less.  `bench/census parked busy mixed timers` picks cases
 * (default: all).  The last line measures the one interruption
 * left: threads that alternate 200 us of work with a 1 ms nanosleep are
 * signalled when found running, and a few enter their nanosleep before
 * the signal lands; it prints the EINTRs per census and per signal sent.
 * `timers` runs the same threads under the CPU sampler and the accounting
 * tick, without censuses, and prints their EINTRs.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "census.h"

#define ROUNDS 15
#define FIRSTS 5
/* 1,000 spinning threads crowd everything else off a small machine:
 * fewer rounds of them. */
#define BUSY_ROUNDS 3
#define MIXED_THREADS 8
#define MIXED_CENSUSES 200

static int pipe_fds[2];
static atomic_int started_threads;
static atomic_bool stop_busy, stop_mixed;
static atomic_long mixed_eintr;

static void block_in_read(void *arg, const cpprof_labelset *labels)
{
    (void)arg;
    (void)labels;
    char c;
    atomic_fetch_add(&started_threads, 1);
    while (read(pipe_fds[0], &c, 1) != 0)
        ;
}

static void *parked_thread(void *arg)
{
    cpprof_do(NULL, arg, block_in_read, NULL);
    return NULL;
}

/* Spins, at nice 19 so that a small machine's other work (and the
 * collector) still runs; from the start barrier on, so that creating the
 * next thread does not wait for a timeslice among those already spinning. */
static pthread_barrier_t busy_start;

static void *busy_thread(void *arg)
{
    cpprof_set_thread_labels(arg);
    setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
    atomic_fetch_add(&started_threads, 1);
    pthread_barrier_wait(&busy_start);
    while (!atomic_load_explicit(&stop_busy, memory_order_relaxed))
        ;
    return NULL;
}

static double clock_ms(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* 200 us of work, then 1 ms of nanosleep, counting the EINTRs. */
static void *mixed_thread(void *arg)
{
    cpprof_set_thread_labels(arg); /* accounted: the tick's timer */
    atomic_fetch_add(&started_threads, 1);
    while (!atomic_load(&stop_mixed)) {
        double end = clock_ms(CLOCK_THREAD_CPUTIME_ID) + 0.2;
        while (clock_ms(CLOCK_THREAD_CPUTIME_ID) < end)
            ;
        struct timespec ms = {0, 1000000};
        if (nanosleep(&ms, NULL) != 0 && errno == EINTR)
            atomic_fetch_add(&mixed_eintr, 1);
    }
    return NULL;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Wall and CPU times of some censuses. */
struct figures {
    double ms[ROUNDS], cpu[ROUNDS];
    int n;
};

/* Takes one census of the kind asked for, into f's times; *stacks and
 * *total count its threads with a stack and all of them. */
static int timed_census(bool details, struct figures *f, size_t *stacks,
                        size_t *total)
{
    census c;
    double start = clock_ms(CLOCK_MONOTONIC);
    double cpu_start = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    int rc = details ? census_take(&c) : census_take_stacks(&c);
    f->ms[f->n] = clock_ms(CLOCK_MONOTONIC) - start;
    f->cpu[f->n] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu_start;
    f->n++;
    if (rc) {
        fprintf(stderr, "census: %s\n", cpprof_strerror(rc));
        return 1;
    }
    *stacks = 0;
    for (size_t i = 0; i < c.n; i++)
        *stacks += c.threads[i].missing[0] == '\0';
    *total = c.n;
    census_release(&c);
    return 0;
}

/* " NAME_ms min M median M [NAME_cpu_ms M]".  Busy threads burn the CPU
 * the process figure counts: there it would say nothing about the
 * census. */
static void print_figures(const char *name, struct figures *f,
                          bool show_cpu)
{
    qsort(f->ms, f->n, sizeof *f->ms, by_value);
    qsort(f->cpu, f->n, sizeof *f->cpu, by_value);
    printf(" %s_ms min %.1f median %.1f", name, f->ms[0], f->ms[f->n / 2]);
    if (show_cpu)
        printf(" %s_cpu_ms %.1f", name, f->cpu[f->n / 2]);
}

static const char *kind(bool details)
{
    return details ? "details" : "stacks";
}

static int start_threads(pthread_t *t, size_t from, size_t to,
                         void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (size_t i = from; i < to; i++)
        if (pthread_create(&t[i], &attr, fn, arg) != 0) {
            perror("pthread_create");
            return 1;
        }
    pthread_attr_destroy(&attr);
    while ((size_t)atomic_load(&started_threads) < to)
        sched_yield();
    return 0;
}

static void join_threads(pthread_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    atomic_store(&started_threads, 0);
}

static pthread_t threads[1000];

/* FIRSTS batches of `size` new threads parked in a read, each censused
 * once; the last one ROUNDS more times. */
static int measure_parked(size_t size, bool details,
                          const cpprof_labelset *labels)
{
    struct figures first = {0}, repeat = {0};
    size_t stacks = 0, total = 0;
    int rc = 0;
    for (int batch = 0; rc == 0 && batch < FIRSTS; batch++) {
        if (pipe(pipe_fds) != 0)
            return 1;
        rc = start_threads(threads, 0, size, parked_thread, (void *)labels);
        /* So that the census meets them in their read rather than on
         * their way to it (those it would signal). */
        struct timespec settle = {0, 20000000};
        nanosleep(&settle, NULL);
        if (rc == 0)
            rc = timed_census(details, &first, &stacks, &total);
        for (int r = 0; rc == 0 && batch == FIRSTS - 1 && r < ROUNDS; r++)
            rc = timed_census(details, &repeat, &stacks, &total);
        close(pipe_fds[1]);
        join_threads(threads, size);
        close(pipe_fds[0]);
    }
    if (rc)
        return rc;
    printf("parked %zu %s", size, kind(details));
    print_figures("first", &first, true);
    print_figures("repeat", &repeat, true);
    printf(" stacks %zu/%zu\n", stacks, total);
    return 0;
}

/* 1,000 busy threads, censused BUSY_ROUNDS times by each kind of census
 * (stacks first, then details, on the same threads). */
static int measure_busy(const cpprof_labelset *labels)
{
    pthread_barrier_init(&busy_start, NULL, 1000 + 1);
    int rc = start_threads(threads, 0, 1000, busy_thread, (void *)labels);
    if (rc)
        return rc; /* the barrier never opens: the threads wait there */
    pthread_barrier_wait(&busy_start);
    for (int details = 0; rc == 0 && details <= 1; details++) {
        struct figures first = {0}, repeat = {0};
        size_t stacks = 0, total = 0;
        rc = timed_census(details, &first, &stacks, &total);
        for (int r = 1; rc == 0 && r < BUSY_ROUNDS; r++)
            rc = timed_census(details, &repeat, &stacks, &total);
        if (rc == 0) {
            printf("busy 1000 %s", kind(details));
            print_figures("first", &first, false);
            print_figures("repeat", &repeat, false);
            printf(" stacks %zu/%zu\n", stacks, total);
        }
    }
    atomic_store(&stop_busy, true);
    join_threads(threads, 1000);
    pthread_barrier_destroy(&busy_start);
    return rc;
}

/* The race a running thread's signal leaves open, counted. */
static int measure_mixed(const cpprof_labelset *labels)
{
    pthread_t t[MIXED_THREADS];
    atomic_store(&stop_mixed, false);
    atomic_store(&mixed_eintr, 0);
    if (start_threads(t, 0, MIXED_THREADS, mixed_thread, (void *)labels))
        return 1;
    long signalled = 0;
    for (int r = 0; r < MIXED_CENSUSES; r++) {
        census c;
        if (census_take(&c) != 0)
            return 1;
        for (size_t i = 0; i < c.n; i++)
            signalled += c.threads[i].state == 'R';
        census_release(&c);
    }
    atomic_store(&stop_mixed, true);
    join_threads(t, MIXED_THREADS);
    long eintr = atomic_load(&mixed_eintr);
    printf("mixed %d censuses %d signalled %ld eintr %ld per_census %.3f "
           "per_signal %.4f\n",
           MIXED_THREADS, MIXED_CENSUSES, signalled, eintr,
           (double)eintr / MIXED_CENSUSES,
           signalled ? (double)eintr / signalled : 0.0);
    return 0;
}

/* The same threads without censuses, under the CPU sampler at 1,000 Hz
 * and the accounting tick: both are timers on each thread's CPU-time
 * clock, which advances only while the thread runs.  Prints the EINTRs
 * and about how many of those timers' signals came (one per 1 ms and per
 * 1/19 s of the threads' CPU time). */
static int measure_timers(const cpprof_labelset *labels)
{
    if (cpprof_accounting_enable() != 0 || cpprof_set("cpu_hz", "1000") ||
        cpprof_cpu_profile_start() != 0)
        return 1;
    pthread_t t[MIXED_THREADS];
    atomic_store(&stop_mixed, false);
    atomic_store(&mixed_eintr, 0);
    double cpu0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    if (start_threads(t, 0, MIXED_THREADS, mixed_thread, (void *)labels))
        return 1;
    struct timespec five = {5, 0};
    nanosleep(&five, NULL);
    atomic_store(&stop_mixed, true);
    join_threads(t, MIXED_THREADS);
    double cpu_s = (clock_ms(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / 1e3;
    unsigned char *buf;
    size_t len;
    if (cpprof_cpu_profile_stop(&buf, &len) != 0)
        return 1;
    free(buf);
    printf("timers %d threads cpu_s %.2f signals ~%.0f eintr %ld\n",
           MIXED_THREADS, cpu_s, cpu_s * (1000 + 19),
           atomic_load(&mixed_eintr));
    return 0;
}

static bool wanted(int argc, char **argv, const char *what)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], what) == 0)
            return true;
    return argc == 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *kv[] = {"tenant", "bench"};
    cpprof_labelset *labels;
    if (cpprof_labels(&labels, 2, kv) != 0)
        return 1;
    int rc = 0;
    for (size_t size = 100; wanted(argc, argv, "parked") && size <= 1000;
         size *= 10)
        for (int details = 0; rc == 0 && details <= 1; details++)
            rc = measure_parked(size, details, labels);
    if (rc == 0 && wanted(argc, argv, "busy"))
        rc = measure_busy(labels);
    if (rc == 0 && wanted(argc, argv, "mixed"))
        rc = measure_mixed(labels);
    if (rc == 0 && wanted(argc, argv, "timers"))
        rc = measure_timers(labels);
    cpprof_labelset_release(labels);
    return rc;
}
