/*
 * bench/wall -- what a wall profile costs per second of window with 10,
 * 100 and 1,000 labelled threads parked in a blocking read (mostly
 * blocked: the case the still-thread cache is for), and two threads that
 * alternate 1 ms of work with 4 ms of nanosleep (signalled when found
 * running).  Per case: the process's CPU over a window of WINDOW_S
 * seconds with a wall profile running, less the same window without,
 * as a percentage of one CPU; the censuses' own measure (wall.c's); and
 * the rate achieved:
 *
 *   threads 100 hz 50 cpu_pct 1.50 censuses_cpu_pct 3.41 achieved_hz 39.3
 *
 * (CPPROF_WALL_HZ=50 CPPROF_WALL_CPU_PERCENT=100 on a loaded 2-core VM:
 * 0.9 ms of CPU a census; the process's CPU, which includes the two
 * workers', varies more than the censuses' own measure.)
 *
 * wall_hz and wall_cpu_percent are the defaults unless CPPROF_WALL_HZ and
 * CPPROF_WALL_CPU_PERCENT say otherwise; `bench/wall 10 100` picks cases.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "wall.h"

#define WINDOW_S 3
#define WORKERS 2

static int pipe_fds[2];
static atomic_int started;
static atomic_bool stop_workers;

static void *parked(void *arg)
{
    (void)arg;
    const char *kv[] = {"tenant", "parked"};
    cpprof_labelset *set = NULL;
    if (cpprof_labels(&set, 2, kv) == 0)
        cpprof_set_thread_labels(set);
    cpprof_labelset_release(set);
    atomic_fetch_add(&started, 1);
    char c;
    while (read(pipe_fds[0], &c, 1) < 0)
        ;
    return NULL;
}

static void *worker(void *arg)
{
    (void)arg;
    struct timespec rest = {0, 4000000};
    while (!atomic_load(&stop_workers)) {
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do
            clock_gettime(CLOCK_MONOTONIC, &t);
        while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec -
                   t0.tv_nsec < 1000000L);
        nanosleep(&rest, NULL);
    }
    return NULL;
}

static double process_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int go_on(void *arg)
{
    (void)arg;
    return 0;
}

static void one_case(int n)
{
    pthread_t *threads = malloc(n * sizeof *threads);
    atomic_store(&started, 0);
    for (int i = 0; i < n; i++)
        pthread_create(&threads[i], NULL, parked, NULL);
    while (atomic_load(&started) < n)
        usleep(1000);

    double cpu = process_cpu_s();
    sleep(WINDOW_S);
    double idle = process_cpu_s() - cpu;

    wall_profile *w;
    if (wall_start(&w) != 0) {
        fprintf(stderr, "bench/wall: wall_start failed\n");
        exit(1);
    }
    cpu = process_cpu_s();
    wall_run(w, WINDOW_S, go_on, NULL);
    double busy = process_cpu_s() - cpu;
    wall_stats s;
    wall_get_stats(w, &s);
    wall_end(w);
    printf("threads %d hz %ld cpu_pct %.2f censuses_cpu_pct %.2f "
           "achieved_hz %.1f\n",
           n, s.hz, (busy - idle) * 100 / WINDOW_S,
           s.cpu_ns / 1e7 / WINDOW_S, s.achieved_hz);
    fflush(stdout);

    if (write(pipe_fds[1], threads, n) != n)
        exit(1);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    free(threads);
}

int main(int argc, char **argv)
{
    if (pipe(pipe_fds) != 0)
        return 1;
    pthread_t workers[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&workers[i], NULL, worker, NULL);
    static const int cases[] = {10, 100, 1000};
    if (argc > 1)
        for (int i = 1; i < argc; i++)
            one_case(atoi(argv[i]));
    else
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            one_case(cases[i]);
    atomic_store(&stop_workers, true);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(workers[i], NULL);
    return 0;
}
