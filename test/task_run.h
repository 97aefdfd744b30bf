/*
 * task_run.h -- what the programs of the task tests share (task_pool.c,
 * task_coro.cc, task_uv.c, task_asio.cc, task_fiber.cc: test/task_pool.sh's
 * checks on each): the three tenants and their jobs' costs, the work that
 * burns a tenant's cost in a function of the tenant's own, the start
 * (arguments, the server), the profile's window and the lines the script
 * reads.  Each program keeps only how its jobs are scheduled, which is
 * what each test is about.  C that compiles as C++ too.
 *
 *   PROGRAM --addr HOST:PORT --profile FILE
 *
 * prints "serving ..." once it serves, then
 *   truth acme=NS globex=NS initech=NS migrations=N
 *   quiet acme=N globex=N initech=N
 */
#ifndef CPPROF_TEST_TASK_RUN_H
#define CPPROF_TEST_TASK_RUN_H

#include <cpprof.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TASK_TENANTS 3
#define TASK_PROFILE_S 8 /* the CPU profile's window */

static const char *const task_tenant_names[TASK_TENANTS] = {"acme", "globex",
                                                            "initech"};
/* Jobs (or connections) per tenant, and each step's CPU. */
static const int task_tenant_jobs[TASK_TENANTS] = {3, 4, 5};
static const int64_t task_tenant_cost_ns[TASK_TENANTS] = {5000000, 10000000,
                                                          25000000};

static inline int64_t task_clock_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static __thread volatile uint64_t task_sink; /* threads race on nothing */

/* Burns `ns` of this thread's CPU. */
static inline void task_spin(int64_t ns)
{
    int64_t end = task_clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
    uint64_t x = task_sink;
    do
        for (int i = 0; i < 20000; i++)
            x = x * 6364136223846793005u + 1442695040888963407u;
    while (task_clock_ns(CLOCK_THREAD_CPUTIME_ID) < end);
    task_sink = x;
}

/* One function per tenant: a sample's stack says whose work it is.  Each
 * keeps its frame (no tail call) and differs from the others (so the
 * compiler does not fold them into one). */
#define TASK_WORK(name, tag)                                       \
    static __attribute__((noinline)) void name(int64_t ns)         \
    {                                                              \
        task_spin(ns);                                             \
        task_sink = task_sink + tag;                               \
        __asm__ volatile("" ::: "memory");                         \
    }
TASK_WORK(work_acme, 1)
TASK_WORK(work_globex, 2)
TASK_WORK(work_initech, 3)

/* Burns `ns` in tenant t's function; returns the CPU it took. */
static inline int64_t task_work_ns(int t, int64_t ns)
{
    static void (*const work[TASK_TENANTS])(int64_t) = {
        work_acme, work_globex, work_initech};
    int64_t start = task_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    work[t](ns);
    return task_clock_ns(CLOCK_THREAD_CPUTIME_ID) - start;
}

/* Burns tenant t's cost in its function; returns the CPU it took. */
static inline int64_t task_work(int t)
{
    return task_work_ns(t, task_tenant_cost_ns[t]);
}

/* Exits, naming `what` and rc's message, unless rc is 0. */
static inline void task_check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what,
                cpprof_strerror(rc));
        exit(1);
    }
}

/* Reads --addr and --profile, blocks SIGTERM (main takes it with
 * task_await_term), samples at 1000 Hz (a tenant's share is then its CPU's,
 * not chance) and serves; returns the profile's path. */
static inline const char *task_start(int argc, char **argv)
{
    const char *addr = NULL, *path = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--addr") == 0)
            addr = argv[i + 1];
        else if (strcmp(argv[i], "--profile") == 0)
            path = argv[i + 1];
    }
    if (!addr || !path) {
        fprintf(stderr, "usage: %s --addr HOST:PORT --profile FILE\n",
                program_invocation_short_name);
        exit(2);
    }
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    task_check(cpprof_set("cpu_hz", "1000"), "cpu_hz");
    task_check(cpprof_http_start(addr), "cpprof_http_start");
    printf("serving http://%s/debug/pprof/\n", addr);
    fflush(stdout);
    return path;
}

static inline void task_await_term(void)
{
    sigset_t term;
    int sig;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigwait(&term, &sig);
}

/* Stops the CPU profile into `path` and prints the truth line: each
 * tenant's CPU between `before` and `after`, and the migrations. */
static inline void task_profile_end(const char *path, const int64_t *before,
                                    const int64_t *after, long migrations)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    task_check(cpprof_cpu_profile_stop(&buf, &len), "profile stop");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    free(buf);
    printf("truth");
    for (int t = 0; t < TASK_TENANTS; t++)
        printf(" %s=%lld", task_tenant_names[t],
               (long long)(after[t] - before[t]));
    printf(" migrations=%ld\n", migrations);
    fflush(stdout);
}

/* The CPU profile's window, the same in every program: the jobs are held
 * (hold(true) returns once none runs) while the profile starts and stops
 * and the truth is read, so that both cover the same work; between, they
 * run for TASK_PROFILE_S.  truth(t): tenant t's CPU so far, ns;
 * migrations(): the moves between threads so far (NULL: one thread). */
static inline void task_profile(const char *path, void (*hold)(bool),
                                int64_t (*truth)(int),
                                long (*migrations)(void))
{
    int64_t before[TASK_TENANTS], after[TASK_TENANTS];
    hold(true);
    task_check(cpprof_cpu_profile_start(), "profile start");
    for (int t = 0; t < TASK_TENANTS; t++)
        before[t] = truth(t);
    long moved = migrations ? migrations() : 0;
    hold(false);
    sleep(TASK_PROFILE_S);
    hold(true);
    for (int t = 0; t < TASK_TENANTS; t++)
        after[t] = truth(t);
    task_profile_end(path, before, after,
                     (migrations ? migrations() : 0) - moved);
    hold(false);
}

/* The quiet line: the tasks parked per tenant. */
static inline void task_print_quiet(const int *parked)
{
    printf("quiet");
    for (int t = 0; t < TASK_TENANTS; t++)
        printf(" %s=%d", task_tenant_names[t], parked[t]);
    printf("\n");
    fflush(stdout);
}

#endif
