/*
 * host_threads.c -- a real-time program that takes its signals with
 * sigwait(), the way many servers shut down cleanly, for host_threads.sh.
 *
 * Its main thread first moves to SCHED_FIFO (priority 1; when the system
 * refuses, it says "realtime: refused" and goes on), then starts cpprof's
 * HTTP server and a CPU profile with every signal still open (as a
 * program does that starts its debug server at the top of main), so that
 * cpprof's threads are created by a real-time thread that blocks nothing.
 * Only then does it block SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2,
 * SIGPIPE, SIGALRM, SIGTERM, SIGCHLD and SIGWINCH and create its own
 * threads, which inherit the mask and the policy: PARKED parked threads
 * (enough for the census to share its work with helper threads) and
 * "taker", which takes those signals with sigwait and prints "took NAME"
 * for each.  SIGTERM ends the program with status 0.  A signal sent to the
 * process that reaches one of cpprof's threads instead runs its default
 * action there, which for all but SIGCHLD and SIGWINCH kills the program.
 *
 * It prints "program threads: TID ..." (its own threads, main's first)
 * before "serving", so that every other thread of the process is cpprof's.
 */
#define _GNU_SOURCE
#include "cpprof.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PARKED = 140 };

static const int taken[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGUSR1, SIGUSR2,
                            SIGPIPE, SIGALRM, SIGTERM, SIGCHLD, SIGWINCH};
static sigset_t taken_set;
static int park_pipe[2];
static pid_t tids[PARKED + 1];

static void *park(void *arg)
{
    __atomic_store_n(&tids[(size_t)(intptr_t)arg], gettid(),
                     __ATOMIC_RELEASE);
    char c;
    while (read(park_pipe[0], &c, 1) < 0)
        ;
    return NULL;
}

static void *take(void *arg)
{
    (void)arg;
    __atomic_store_n(&tids[PARKED], gettid(), __ATOMIC_RELEASE);
    for (;;) {
        int sig;
        if (sigwait(&taken_set, &sig) != 0)
            continue;
        printf("took %s\n", sigabbrev_np(sig));
        fflush(stdout);
        if (sig == SIGTERM) {
            unsigned char *buf;
            size_t len;
            int rc = cpprof_cpu_profile_stop(&buf, &len);
            if (rc == 0)
                free(buf);
            cpprof_http_stop();
            exit(rc == 0 ? 0 : 3);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: host_threads --addr HOST:PORT\n");
        return 2;
    }
    struct sched_param fifo = {.sched_priority = 1};
    if (sched_setscheduler(0, SCHED_FIFO, &fifo) != 0)
        printf("realtime: refused (%s)\n", strerror(errno));
    int rc = cpprof_http_start(argv[2]);
    if (rc == 0)
        rc = cpprof_cpu_profile_start();
    if (rc != 0) {
        fprintf(stderr, "host_threads: %s\n", cpprof_strerror(rc));
        return 1;
    }
    sigemptyset(&taken_set);
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++)
        sigaddset(&taken_set, taken[i]);
    pthread_sigmask(SIG_BLOCK, &taken_set, NULL);
    if (pipe(park_pipe) != 0)
        return 1;

    pthread_t t;
    for (intptr_t i = 0; i < PARKED; i++)
        if (pthread_create(&t, NULL, park, (void *)i) != 0)
            return 1;
    if (pthread_create(&t, NULL, take, NULL) != 0)
        return 1;
    for (size_t i = 0; i <= PARKED; i++)
        while (__atomic_load_n(&tids[i], __ATOMIC_ACQUIRE) == 0)
            usleep(1000);
    printf("program threads: %d", (int)getpid());
    for (size_t i = 0; i <= PARKED; i++)
        printf(" %d", (int)tids[i]);
    printf("\n");
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);
    for (;;)
        pause();
}
