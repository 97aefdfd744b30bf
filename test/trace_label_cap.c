/*
 * trace_label_cap.c -- the program of test/trace_label_cap.sh: a job
 * runner that labels each job with a value of its own, as a program that
 * labels by span or by job id does, so that it makes a new label set per
 * job, tens of thousands a second.
 *
 *   trace_label_cap --addr HOST:PORT [--keep]
 *
 * One worker runs jobs back to back, each labelled {tenant: t0..t3, job:
 * its number}, some 10 microseconds of arithmetic in burn(); the set is
 * released when the job ends, so the program itself holds only the set
 * it runs.  With --keep it keeps every set instead: more sets than the
 * label cap alive at once, which cpprof must fold and say so.
 *
 * On stdout: "serving URL" once the server answers, then "labelled N"
 * at each 10,000 distinct sets.  SIGTERM ends the run.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include "serve.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_bool stopping;
static bool keep;

/* Some 10 microseconds of work the CPU profile sees. */
__attribute__((noinline)) static void burn(void *arg,
                                           const cpprof_labelset *labels)
{
    (void)labels;
    volatile unsigned long *sink = arg;
    unsigned long x = *sink;
    for (int i = 0; i < 10000; i++)
        x = x * 6364136223846793005UL + 1442695040888963407UL;
    *sink = x;
}

static void *worker(void *arg)
{
    (void)arg;
    static const char *const tenants[] = {"t0", "t1", "t2", "t3"};
    volatile unsigned long sink = 1;
    for (unsigned long job = 1; !atomic_load(&stopping); job++) {
        char id[24];
        snprintf(id, sizeof id, "%lu", job);
        const char *kv[] = {"tenant", tenants[job % 4], "job", id};
        cpprof_labelset *set;
        if (cpprof_labels(&set, 4, kv) != 0)
            abort();
        cpprof_do(NULL, set, burn, (void *)&sink);
        if (!keep)
            cpprof_labelset_release(set);
        if (job % 10000 == 0) {
            printf("labelled %lu\n", job);
            fflush(stdout);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: trace_label_cap --addr HOST:PORT [--keep]\n");
        return 2;
    }
    keep = argc > 3 && strcmp(argv[3], "--keep") == 0;
    sigset_t term;
    if (serve_start("trace_label_cap", argv[2], &term) != 0)
        return 1;
    serve_announce(argv[2]);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    int sig;
    sigwait(&term, &sig);
    atomic_store(&stopping, true);
    pthread_join(t, NULL);
    return 0;
}
