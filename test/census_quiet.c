/*
 * census_quiet.c -- the program of test/census_quiet.sh: threads
 * blocked in the calls a signal cuts short, each call made over and over
 * for 5 s, while the script takes censuses and a browser shows the index.
 *
 *   census_quiet --addr HOST:PORT
 *
 * One thread per call: nanosleep, sleep, poll, epoll_wait, select,
 * sigtimedwait, read on an idle pipe, and a futex wait (pthread_cond_wait);
 * the pipe's byte and the condition come from a waker thread 5 s after the
 * round began.  Each thread is named "q-CALL", labelled call=CALL, and
 * waits in a function of its own, wait_in_CALL, called by run_rounds from
 * the start routine blocker_main: the script looks for those names, in
 * that order, on each thread's census stack.  The accounting tick runs
 * (cpprof_accounting_enable), so its timers are armed on every thread.
 * One more thread, q-busy (call=busy), only computes: the census signals
 * it, and the page's CPU view has a label to show.
 *
 * SIGTERM (blocked in every thread, taken by main with sigwait) ends the
 * run after the rounds in progress.  Then one line per call:
 *
 *   call nanosleep rounds 3 early 0 eintr 0 wrong 0
 *
 * early: the call returned before 5 s; eintr: it failed with EINTR;
 * wrong: any other result than the call's timeout or wake-up.  The exit
 * status is 1 if any of them is not 0 or a call never completed a round.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#define ROUND_S 5

enum call { NANOSLEEP, SLEEP, POLL, EPOLL_WAIT, SELECT, SIGTIMEDWAIT, READ,
            FUTEX, NCALLS };
static const char *const call_names[NCALLS] = {
    "nanosleep", "sleep", "poll", "epoll_wait", "select", "sigtimedwait",
    "read", "futex"};

struct result {
    atomic_int rounds, early, eintr, wrong;
};
static struct result results[NCALLS];
static atomic_bool stopping;

/* The waker's pipe and condition, renewed each round. */
static int idle_pipe[2];       /* poll/epoll/select wait on its read end */
static int wake_pipe[2];       /* read() waits for the waker's byte */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static unsigned long woken_round; /* under mu */
static atomic_int waiters_left = 2; /* the read and futex threads */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Each returns 0 when the call ended as it should after its full time,
 * else the errno it failed with (or -1 for any other wrong result). */

__attribute__((noinline)) static int wait_in_nanosleep(void)
{
    struct timespec ts = {ROUND_S, 0};
    return nanosleep(&ts, NULL) == 0 ? 0 : errno;
}

__attribute__((noinline)) static int wait_in_sleep(void)
{
    /* sleep() hides EINTR: it returns the seconds left. */
    return sleep(ROUND_S) == 0 ? 0 : EINTR;
}

__attribute__((noinline)) static int wait_in_poll(void)
{
    struct pollfd p = {.fd = idle_pipe[0], .events = POLLIN};
    int n = poll(&p, 1, ROUND_S * 1000);
    return n == 0 ? 0 : n < 0 ? errno : -1;
}

__attribute__((noinline)) static int wait_in_epoll_wait(int ep)
{
    struct epoll_event ev;
    int n = epoll_wait(ep, &ev, 1, ROUND_S * 1000);
    return n == 0 ? 0 : n < 0 ? errno : -1;
}

__attribute__((noinline)) static int wait_in_select(void)
{
    fd_set r;
    FD_ZERO(&r);
    FD_SET(idle_pipe[0], &r);
    struct timeval tv = {ROUND_S, 0};
    int n = select(idle_pipe[0] + 1, &r, NULL, NULL, &tv);
    return n == 0 ? 0 : n < 0 ? errno : -1;
}

__attribute__((noinline)) static int wait_in_sigtimedwait(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2); /* nobody sends it: the call times out */
    struct timespec ts = {ROUND_S, 0};
    int n = sigtimedwait(&set, NULL, &ts);
    return n < 0 && errno == EAGAIN ? 0 : n < 0 ? errno : -1;
}

__attribute__((noinline)) static int wait_in_read(void)
{
    char c;
    ssize_t n = read(wake_pipe[0], &c, 1);
    return n == 1 ? 0 : n < 0 ? errno : -1;
}

/* A spurious wake-up (the condition not yet set) is a wrong result: the
 * wait is not looped, so that an interrupted futex shows. */
__attribute__((noinline)) static int wait_in_futex(unsigned long round)
{
    pthread_mutex_lock(&mu);
    int rc = 0;
    if (woken_round < round)
        rc = pthread_cond_wait(&cond, &mu);
    bool woken = woken_round >= round;
    pthread_mutex_unlock(&mu);
    return rc ? rc : woken ? 0 : -1;
}

static int wait_once(enum call call, int ep, unsigned long round)
{
    switch (call) {
    case NANOSLEEP: return wait_in_nanosleep();
    case SLEEP: return wait_in_sleep();
    case POLL: return wait_in_poll();
    case EPOLL_WAIT: return wait_in_epoll_wait(ep);
    case SELECT: return wait_in_select();
    case SIGTIMEDWAIT: return wait_in_sigtimedwait();
    case READ: return wait_in_read();
    default: return wait_in_futex(round);
    }
}

/* Rounds start every ROUND_S seconds from the program's start, so that the
 * waker and the waiters agree on which round is which. */
static double t0;

__attribute__((noinline)) static void run_rounds(enum call call, int ep)
{
    unsigned long round = 1;
    while (!atomic_load(&stopping)) {
        double start = now_s();
        int rc = wait_once(call, ep, round);
        double took = now_s() - start;
        struct result *r = &results[call];
        if (rc == EINTR)
            atomic_fetch_add(&r->eintr, 1);
        else if (rc != 0)
            atomic_fetch_add(&r->wrong, 1);
        /* The waker's calls end at the round's end, which may be a little
         * less than 5 s after this one began; the timed ones must last
         * 5 s (the kernel never ends a timeout early). */
        else if (took < (call == READ || call == FUTEX
                             ? t0 + round * ROUND_S - start - 0.01
                             : ROUND_S))
            atomic_fetch_add(&r->early, 1);
        atomic_fetch_add(&r->rounds, 1);
        round++;
    }
}

static void *blocker_main(void *arg)
{
    enum call call = (enum call)(intptr_t)arg;
    char name[16];
    snprintf(name, sizeof name, "q-%s", call_names[call]);
    pthread_setname_np(pthread_self(), name);
    const char *kv[] = {"call", call_names[call]};
    cpprof_labelset *labels = NULL;
    if (cpprof_labels(&labels, 2, kv) == 0)
        cpprof_set_thread_labels(labels);
    cpprof_labelset_release(labels);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, idle_pipe[0], &ev);
    run_rounds(call, ep);
    if (call == READ || call == FUTEX)
        atomic_fetch_sub(&waiters_left, 1);
    close(ep);
    return NULL;
}

/* Runs until the end, so that it is running whenever a census comes. */
static void *busy(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "q-busy");
    const char *kv[] = {"call", "busy"};
    cpprof_labelset *labels = NULL;
    if (cpprof_labels(&labels, 2, kv) == 0)
        cpprof_set_thread_labels(labels);
    cpprof_labelset_release(labels);
    volatile unsigned long sum = 0;
    while (!atomic_load(&stopping))
        for (int i = 0; i < 1000000; i++)
            sum += (unsigned long)i * i;
    return NULL;
}

/* Sleeps to the end of each round (absolute, so a signal could not make
 * it late or early), then wakes the read and futex waiters. */
static void *waker(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "q-waker");
    for (unsigned long round = 1; atomic_load(&waiters_left) > 0; round++) {
        double end = t0 + round * ROUND_S;
        struct timespec ts = {(time_t)end, (long)((end - (time_t)end) * 1e9)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
            ;
        if (write(wake_pipe[1], "x", 1) != 1)
            return NULL;
        pthread_mutex_lock(&mu);
        woken_round = round;
        pthread_cond_broadcast(&cond);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: census_quiet --addr HOST:PORT\n");
        return 2;
    }
    /* Blocked in every thread: SIGTERM is main's, SIGUSR2 sigtimedwait's. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    if (pipe(idle_pipe) || pipe(wake_pipe))
        return 1;
    int rc = cpprof_accounting_enable();
    if (rc == 0)
        rc = cpprof_http_start(argv[2]);
    if (rc) {
        fprintf(stderr, "census_quiet: %s\n", cpprof_strerror(rc));
        return 1;
    }
    t0 = now_s();
    pthread_t threads[NCALLS], wake, spinner;
    for (int i = 0; i < NCALLS; i++)
        pthread_create(&threads[i], NULL, blocker_main, (void *)(intptr_t)i);
    pthread_create(&wake, NULL, waker, NULL);
    pthread_create(&spinner, NULL, busy, NULL);
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);

    sigdelset(&set, SIGUSR2);
    int sig;
    sigwait(&set, &sig);
    atomic_store(&stopping, true);
    for (int i = 0; i < NCALLS; i++)
        pthread_join(threads[i], NULL);
    pthread_join(wake, NULL);
    pthread_join(spinner, NULL);
    cpprof_http_stop();

    int bad = 0;
    for (int i = 0; i < NCALLS; i++) {
        struct result *r = &results[i];
        printf("call %s rounds %d early %d eintr %d wrong %d\n", call_names[i],
               r->rounds, r->early, r->eintr, r->wrong);
        bad |= r->rounds == 0 || r->early || r->eintr || r->wrong;
    }
    return bad;
}
