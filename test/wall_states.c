/*
 * wall_states.c -- the wall profile's truth: three tenants' jobs whose
 * time goes to computing and to waiting in nanosleep, poll, read on a
 * pipe, a contended mutex and a condition variable, in known proportions
 * per tenant, each measured by the program itself.
 *
 * Usage: wall_states --addr HOST:PORT
 *
 * Serves cpprof on HOST:PORT and prints "serving ..." once its threads
 * run.  Each tenant has WORKERS threads labelled tenant=NAME; each runs
 * run_job in a loop, whose phases are the functions compute_for and
 * wait_in_CALL, so a profile's stacks tell the phase.  A worker's partner
 * (an unlabelled thread) makes its waits: it writes the pipe the worker
 * reads after the phase's time, holds the mutex the worker locks for it,
 * and signals the condition the worker waits on after it.
 *
 * SIGUSR1 prints one line per (tenant, phase): "time TENANT PHASE NS",
 * the wall time all that tenant's workers spent in the phase so far.
 * SIGTERM stops the jobs and prints "calls N eintr N early N", the waits
 * that returned with EINTR or before their time (or with a wrong result),
 * and exits 0 only when both are 0.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 3
enum { TENANTS = 3 };
enum phase { COMPUTE, NANOSLEEP, POLL, READ, MUTEX, COND, NPHASES };
static const char *const phase_names[NPHASES] = {
    "compute", "nanosleep", "poll", "read", "mutex", "cond"};
static const char *const tenant_names[TENANTS] = {"acme", "globex",
                                                  "initech"};
/* Milliseconds per job in each phase, per tenant: every tenant's profile
 * differs, and none is even.  A running thread answers the census at a
 * scheduler tick of its own CPU time (4 ms at HZ=250): phases of a few ms
 * would be seen as the phase that follows, so none is shorter than 15. */
static const int phase_ms[TENANTS][NPHASES] = {
    {15, 75, 45, 30, 20, 30},
    {15, 30, 20, 75, 45, 30},
    {20, 20, 30, 20, 35, 80},
};

static _Atomic int64_t spent_ns[TENANTS][NPHASES];
static atomic_long calls, eintrs, earlies;
static atomic_bool stopping;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static struct timespec ns_to_ts(int64_t ns)
{
    return (struct timespec){ns / 1000000000LL, ns % 1000000000LL};
}

/* A worker and its partner. */
struct pair {
    int tenant, offset_ms;
    int request[2]; /* worker -> partner: one struct order */
    int data[2];    /* partner -> worker: the byte read() waits for */
    int ack[2];     /* partner -> worker: the mutex is held */
    int idle[2];    /* nobody writes: poll() waits it out */
    pthread_mutex_t held;
    pthread_mutex_t cmu;
    pthread_cond_t cv;
    bool signalled; /* under cmu */
};

struct order {
    enum phase phase;
    int64_t ns;
};

static void count_result(bool eintr, bool early)
{
    atomic_fetch_add(&calls, 1);
    if (eintr)
        atomic_fetch_add(&eintrs, 1);
    else if (early)
        atomic_fetch_add(&earlies, 1);
}

static void send_order(struct pair *p, enum phase phase, int64_t ns)
{
    struct order o = {phase, ns};
    if (write(p->request[1], &o, sizeof o) != sizeof o)
        abort();
}

/* The partner's sleep: absolute, so that nothing can make it short. */
static void sleep_until(int64_t at)
{
    struct timespec ts = ns_to_ts(at);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
        ;
}

__attribute__((noinline)) static void compute_for(int64_t ns)
{
    volatile unsigned long sum = 0;
    int64_t end = now_ns() + ns;
    while (now_ns() < end)
        for (int i = 0; i < 1000; i++)
            sum += (unsigned long)i * i;
}

__attribute__((noinline)) static void wait_in_nanosleep(int64_t ns)
{
    struct timespec ts = ns_to_ts(ns);
    int64_t start = now_ns();
    int rc = nanosleep(&ts, NULL);
    count_result(rc != 0 && errno == EINTR,
                 rc != 0 || now_ns() - start < ns);
}

__attribute__((noinline)) static void wait_in_poll(struct pair *p,
                                                   int64_t ns)
{
    struct pollfd pfd = {.fd = p->idle[0], .events = POLLIN};
    int ms = (int)(ns / 1000000);
    int64_t start = now_ns();
    int n = poll(&pfd, 1, ms);
    count_result(n < 0 && errno == EINTR,
                 n != 0 || now_ns() - start < ms * 1000000LL);
}

__attribute__((noinline)) static void wait_in_read(struct pair *p,
                                                   int64_t ns)
{
    int64_t due = now_ns() + ns;
    send_order(p, READ, due);
    char c;
    ssize_t n = read(p->data[0], &c, 1);
    count_result(n < 0 && errno == EINTR, n != 1 || now_ns() < due);
}

__attribute__((noinline)) static void wait_in_mutex(struct pair *p,
                                                    int64_t ns)
{
    int64_t due = now_ns() + ns;
    send_order(p, MUTEX, due);
    char c;
    ssize_t n = read(p->ack[0], &c, 1); /* the partner holds it now */
    int rc = pthread_mutex_lock(&p->held);
    count_result((n < 0 && errno == EINTR) || rc == EINTR,
                 n != 1 || rc != 0 || now_ns() < due);
    pthread_mutex_unlock(&p->held);
}

__attribute__((noinline)) static void wait_in_cond(struct pair *p,
                                                   int64_t ns)
{
    int64_t due = now_ns() + ns;
    pthread_mutex_lock(&p->cmu);
    send_order(p, COND, due);
    int rc = 0;
    while (!p->signalled && rc == 0)
        rc = pthread_cond_wait(&p->cv, &p->cmu);
    p->signalled = false;
    pthread_mutex_unlock(&p->cmu);
    count_result(rc == EINTR, rc != 0 || now_ns() < due);
}

static void run_phase(struct pair *p, enum phase phase, int64_t ns)
{
    switch (phase) {
    case COMPUTE: compute_for(ns); break;
    case NANOSLEEP: wait_in_nanosleep(ns); break;
    case POLL: wait_in_poll(p, ns); break;
    case READ: wait_in_read(p, ns); break;
    case MUTEX: wait_in_mutex(p, ns); break;
    default: wait_in_cond(p, ns); break;
    }
}

/* One job: every phase once, each timed. */
__attribute__((noinline)) static void run_job(struct pair *p)
{
    for (int ph = 0; ph < NPHASES; ph++) {
        int64_t start = now_ns();
        run_phase(p, (enum phase)ph, phase_ms[p->tenant][ph] * 1000000LL);
        atomic_fetch_add(&spent_ns[p->tenant][ph], now_ns() - start);
    }
}

static void *worker_main(void *arg)
{
    struct pair *p = arg;
    const char *kv[] = {"tenant", tenant_names[p->tenant]};
    cpprof_labelset *labels = NULL;
    if (cpprof_labels(&labels, 2, kv) == 0)
        cpprof_set_thread_labels(labels);
    cpprof_labelset_release(labels);
    /* The workers of a tenant would run in step, as one: each starts at
     * its own point of the job's cycle. */
    struct timespec offset = {0, p->offset_ms * 1000000L};
    nanosleep(&offset, NULL);
    while (!atomic_load(&stopping))
        run_job(p);
    struct order quit = {NPHASES, 0};
    if (write(p->request[1], &quit, sizeof quit) != sizeof quit)
        abort();
    return NULL;
}

static void *partner_main(void *arg)
{
    struct pair *p = arg;
    struct order o;
    while (read(p->request[0], &o, sizeof o) == sizeof o &&
           o.phase != NPHASES) {
        if (o.phase == MUTEX) {
            pthread_mutex_lock(&p->held);
            if (write(p->ack[1], "a", 1) != 1)
                abort();
            sleep_until(o.ns);
            pthread_mutex_unlock(&p->held);
        } else if (o.phase == READ) {
            sleep_until(o.ns);
            if (write(p->data[1], "d", 1) != 1)
                abort();
        } else {
            sleep_until(o.ns);
            pthread_mutex_lock(&p->cmu);
            p->signalled = true;
            pthread_cond_signal(&p->cv);
            pthread_mutex_unlock(&p->cmu);
        }
    }
    return NULL;
}

static void print_times(void)
{
    for (int t = 0; t < TENANTS; t++)
        for (int ph = 0; ph < NPHASES; ph++)
            printf("time %s %s %lld\n", tenant_names[t], phase_names[ph],
                   (long long)atomic_load(&spent_ns[t][ph]));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: wall_states --addr HOST:PORT\n");
        return 2;
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    int rc = cpprof_http_start(argv[2]);
    if (rc) {
        fprintf(stderr, "wall_states: %s\n", cpprof_strerror(rc));
        return 1;
    }
    static struct pair pairs[TENANTS * WORKERS];
    pthread_t workers[TENANTS * WORKERS], partners[TENANTS * WORKERS];
    for (int i = 0; i < TENANTS * WORKERS; i++) {
        struct pair *p = &pairs[i];
        p->tenant = i % TENANTS;
        p->offset_ms = (i / TENANTS) * 200 / WORKERS + 7 * p->tenant;
        if (pipe(p->request) || pipe(p->data) || pipe(p->ack) ||
            pipe(p->idle))
            return 1;
        pthread_mutex_init(&p->held, NULL);
        pthread_mutex_init(&p->cmu, NULL);
        pthread_cond_init(&p->cv, NULL);
        pthread_create(&partners[i], NULL, partner_main, p);
        pthread_create(&workers[i], NULL, worker_main, p);
    }
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);

    for (;;) {
        int sig;
        sigwait(&set, &sig);
        if (sig == SIGTERM)
            break;
        print_times();
    }
    atomic_store(&stopping, true);
    for (int i = 0; i < TENANTS * WORKERS; i++) {
        pthread_join(workers[i], NULL);
        pthread_join(partners[i], NULL);
    }
    cpprof_http_stop();
    printf("calls %ld eintr %ld early %ld\n", atomic_load(&calls),
           atomic_load(&eintrs), atomic_load(&earlies));
    return atomic_load(&eintrs) || atomic_load(&earlies) ? 1 : 0;
}
