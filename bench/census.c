/*
 * bench/census -- how long a thread census takes, with 100 and with 1,000
 * labelled threads parked in a blocking read (the goal: 1,000 threads in at
 * most 50 ms).  Prints, per size, the fastest, median and slowest of
 * ROUNDS censuses, and how many threads answered in the last one:
 *
 *   threads 1000 census_ms min 21.3 median 23.0 max 30.2 answered 1000/1001
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "census.h"

#define ROUNDS 15

static int pipe_fds[2];
static atomic_int parked;

static void block_in_read(void *arg, const cpprof_labelset *labels)
{
    (void)arg;
    (void)labels;
    char c;
    atomic_fetch_add(&parked, 1);
    while (read(pipe_fds[0], &c, 1) != 0)
        ;
}

static void *parked_thread(void *arg)
{
    cpprof_do(NULL, arg, block_in_read, NULL);
    return NULL;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Censuses ROUNDS times and prints the figures. */
static int measure(size_t nthreads)
{
    double ms[ROUNDS];
    size_t answered = 0, total = 0;
    for (int r = 0; r < ROUNDS; r++) {
        census c;
        double start = now_ms();
        int rc = census_take(&c);
        ms[r] = now_ms() - start;
        if (rc) {
            fprintf(stderr, "census: %s\n", cpprof_strerror(rc));
            return 1;
        }
        answered = 0;
        for (size_t i = 0; i < c.n; i++)
            answered += c.threads[i].missing[0] == '\0';
        total = c.n;
        census_release(&c);
    }
    qsort(ms, ROUNDS, sizeof *ms, by_value);
    printf("threads %zu census_ms min %.1f median %.1f max %.1f answered "
           "%zu/%zu\n",
           nthreads, ms[0], ms[ROUNDS / 2], ms[ROUNDS - 1], answered, total);
    return 0;
}

int main(void)
{
    const char *kv[] = {"tenant", "bench"};
    cpprof_labelset *labels;
    if (cpprof_labels(&labels, 2, kv) != 0 || pipe(pipe_fds) != 0)
        return 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    static pthread_t threads[1000];
    size_t started = 0;
    int rc = 0;
    for (size_t size = 100; rc == 0 && size <= 1000; size *= 10) {
        for (; started < size; started++)
            if (pthread_create(&threads[started], &attr, parked_thread,
                               labels) != 0) {
                perror("pthread_create");
                return 1;
            }
        while ((size_t)atomic_load(&parked) < size)
            sched_yield();
        rc = measure(size);
    }
    close(pipe_fds[1]);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    cpprof_labelset_release(labels);
    return rc;
}
