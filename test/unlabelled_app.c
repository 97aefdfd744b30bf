/*
 * unlabelled_app.c -- the program test/http_unlabelled.sh profiles: every
 * piece of work runs inside cpprof_do with tenant=acme, at allocation,
 * lock and thread-creation sites of known size and cost, so the test can
 * check both the figures and that no label reaches these profiles.
 *
 *   retain_site  keeps RETAIN_MIB MiB live in 4 KiB objects
 *   freed_site   allocates FREED_MIB MiB in 4 KiB objects and frees them
 *   churn_site   allocates and frees 10 MiB per second, for ever
 *   waiter_site  waits CYCLES times on a mutex that holder_site holds for
 *                HOLD_MS ms, measuring the true wait with its own clock
 *   spawn_site   creates SPAWNED threads
 *
 * Prints "wait_ns N" (the true total wait) and then "serving ADDR".
 * Usage: unlabelled_app --addr HOST:PORT
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OBJ 4096
#define RETAIN_MIB 32
#define FREED_MIB 32
#define CHURN_MIB_PER_S 10
#define CYCLES 25
#define HOLD_MS 20
#define SPAWNED 3

static void *retained[RETAIN_MIB * 256];
static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;
static sem_t go, done;
static long long true_wait_ns;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void sleep_ns(long long ns)
{
    struct timespec t = {ns / 1000000000, ns % 1000000000};
    while (nanosleep(&t, &t) != 0)
        ;
}

/* Touches a block so that the allocation cannot be optimised away. */
static void *use(void *p)
{
    if (!p)
        abort();
    memset(p, 1, 64);
    return p;
}

__attribute__((noinline)) static void retain_site(void)
{
    for (size_t i = 0; i < sizeof retained / sizeof *retained; i++)
        retained[i] = use(malloc(OBJ));
}

__attribute__((noinline)) static void freed_site(void)
{
    static void *tmp[FREED_MIB * 256];
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tmp[i] = use(malloc(OBJ));
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        free(tmp[i]);
}

/* 1/10 of a second's worth of the churn rate. */
__attribute__((noinline)) static void churn_site(void)
{
    for (int i = 0; i < CHURN_MIB_PER_S * 256 / 10; i++)
        free(use(malloc(OBJ)));
}

static void *churn(void *arg)
{
    (void)arg;
    long long next = now_ns();
    for (;;) {
        churn_site();
        next += 100000000;
        long long left = next - now_ns();
        if (left > 0)
            sleep_ns(left);
    }
    return NULL;
}

__attribute__((noinline)) static void holder_site(void)
{
    for (int i = 0; i < CYCLES; i++) {
        pthread_mutex_lock(&contended);
        sem_post(&go);
        sleep_ns(HOLD_MS * 1000000LL);
        pthread_mutex_unlock(&contended);
        sem_wait(&done);
    }
}

__attribute__((noinline)) static void waiter_site(void)
{
    for (int i = 0; i < CYCLES; i++) {
        sem_wait(&go);
        long long t0 = now_ns();
        pthread_mutex_lock(&contended);
        true_wait_ns += now_ns() - t0;
        pthread_mutex_unlock(&contended);
        sem_post(&done);
    }
}

static void *waiter(void *arg)
{
    (void)arg;
    waiter_site();
    return NULL;
}

static void *idle(void *arg)
{
    (void)arg;
    return NULL;
}

__attribute__((noinline)) static void spawn_site(pthread_t *t)
{
    for (int i = 0; i < SPAWNED; i++)
        if (cpprof_thread_create(&t[i], NULL, idle, NULL) != 0)
            abort();
}

static void work(void *arg, const cpprof_labelset *labels)
{
    (void)arg, (void)labels;
    pthread_t w, spawned[SPAWNED], churner;
    retain_site();
    freed_site();
    sem_init(&go, 0, 0);
    sem_init(&done, 0, 0);
    if (cpprof_thread_create(&w, NULL, waiter, NULL) != 0)
        abort();
    holder_site();
    pthread_join(w, NULL);
    spawn_site(spawned);
    for (int i = 0; i < SPAWNED; i++)
        pthread_join(spawned[i], NULL);
    if (cpprof_thread_create(&churner, NULL, churn, NULL) != 0)
        abort();
}

int main(int argc, char **argv)
{
    const char *addr = argc == 3 && !strcmp(argv[1], "--addr") ? argv[2]
                                                                : NULL;
    const char *kv[] = {"tenant", "acme"};
    cpprof_labelset *acme;
    sigset_t term;
    int sig;

    if (!addr) {
        fprintf(stderr, "usage: %s --addr HOST:PORT\n", argv[0]);
        return 2;
    }
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigaddset(&term, SIGINT);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    cpprof_set_block_profile_rate(1);
    cpprof_set_mutex_profile_fraction(1);
    if (cpprof_labels(&acme, 2, kv) != 0 ||
        cpprof_do(NULL, acme, work, NULL) != 0)
        return 1;
    printf("wait_ns %lld\n", true_wait_ns);
    int rc = cpprof_http_start(addr);
    if (rc != 0) {
        fprintf(stderr, "cpprof_http_start: %s\n", cpprof_strerror(rc));
        return 1;
    }
    printf("serving %s\n", addr);
    fflush(stdout);
    sigwait(&term, &sig);
    cpprof_http_stop();
    return 0;
}
