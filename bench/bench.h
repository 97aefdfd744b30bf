/*
 * bench.h -- what the label benchmarks (labels, otel, accounting) share:
 * the clock they time with, a median, the empty job of a scoped apply, the error
 * check, the timed loop of scoped applies, and the off/on comparison of a
 * feature that cannot be switched off again once on.
 *
 * The comparison runs every round in a child process of its own, off and
 * on rounds alternating, and keeps each side's best round: a busy machine
 * slows both sides alike, and an interruption is dropped rather than
 * averaged in.  Times are the thread's CPU time, which a preemption does
 * not advance.
 */
#ifndef CPPROF_BENCH_H
#define CPPROF_BENCH_H

#include <cpprof.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline int bench_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorting v). */
static inline double bench_median(double *v, int n)
{
    qsort(v, n, sizeof *v, bench_compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The calling thread's CPU time, ns. */
static inline double bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The job of an empty scoped apply: counts its calls in *(long *)arg. */
static inline void bench_empty_job(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    ++*(volatile long *)arg;
}

/* Exits, naming the program and rc's message, unless rc is 0. */
static inline void bench_check(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
                cpprof_strerror(rc));
        exit(1);
    }
}

/* VmRSS of this process in KiB, or -1. */
static inline long bench_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

/* ns per cpprof_do(NULL, set, job, &counter), over `iters` of them;
 * exits if one fails. */
static inline double bench_apply_ns(const cpprof_labelset *set,
                                    cpprof_do_fn job, long iters)
{
    volatile long counter = 0;
    int rc = 0;
    double t0 = bench_now_ns();
    for (long i = 0; i < iters; i++)
        rc |= cpprof_do(NULL, set, job, (void *)&counter);
    double ns = (bench_now_ns() - t0) / iters;
    bench_check(rc, "cpprof_do");
    return ns;
}

/* measure(arg) in a child process, after enable() when `on`; -1 when the
 * child fails. */
static inline double bench_round(int (*enable)(void), int on,
                                 double (*measure)(void *), void *arg)
{
    int fd[2];
    double figure = -1;
    if (pipe(fd) != 0)
        return -1;
    pid_t child = fork();
    if (child == 0) {
        if (on)
            bench_check(enable(), "enable");
        figure = measure(arg);
        _exit(write(fd[1], &figure, sizeof figure) == sizeof figure ? 0 : 1);
    }
    close(fd[1]);
    if (child < 0 || read(fd[0], &figure, sizeof figure) != sizeof figure)
        figure = -1;
    close(fd[0]);
    if (child > 0)
        waitpid(child, NULL, 0);
    return figure;
}

/* The best of `rounds` rounds of measure(arg) without and with enable(),
 * alternating, into *off and *on; exits when a round fails. */
static inline void bench_off_on(int (*enable)(void), int rounds,
                                double (*measure)(void *), void *arg,
                                double *off, double *on)
{
    *off = *on = 1e30;
    for (int r = 0; r < rounds; r++) {
        double a = bench_round(enable, 0, measure, arg);
        double b = bench_round(enable, 1, measure, arg);
        if (a < 0 || b < 0)
            bench_check(-ECHILD, "a round");
        *off = a < *off ? a : *off;
        *on = b < *on ? b : *on;
    }
}

#endif
