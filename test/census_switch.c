/*
 * census_switch.c -- the program of test/census_switch.sh: threads that
 * switch between tasks all the time, for censuses taken meanwhile.
 *
 *   census_switch --addr HOST:PORT
 *
 * Four threads, each with two tasks of its own labelled tenant=acme,
 * globex, initech or umbrella (the thread's): a thread enters one, works
 * in it for about 20 us, leaves it, works 20 us outside any task (or,
 * every eighth time, sleeps 200 us), and so on with the other, until
 * SIGTERM.  So a census finds each thread in a
 * task, between two, or in a switch.  Prints "serving ..." once it serves.
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 4

static const char *const tenants[THREADS] = {"acme", "globex", "initech",
                                             "umbrella"};
static volatile unsigned long sink;

static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "census_switch: %s: %s\n", what, cpprof_strerror(rc));
        exit(1);
    }
}

static void work_us(long us)
{
    struct timespec t, end;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end);
    end.tv_nsec += us * 1000;
    unsigned long x = sink;
    do {
        for (int i = 0; i < 200; i++)
            x = x * 6364136223846793005u + 1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while (t.tv_sec < end.tv_sec ||
             (t.tv_sec == end.tv_sec && t.tv_nsec < end.tv_nsec));
    sink = x;
}

static void *switcher(void *arg)
{
    const char *kv[] = {"tenant", tenants[(long)arg]};
    cpprof_labelset *set;
    cpprof_task tasks[2];
    check(cpprof_labels(&set, 2, kv), "labels");
    for (int i = 0; i < 2; i++)
        check(cpprof_task_create(&tasks[i], set), "task");
    struct timespec pause = {0, 200000};
    for (unsigned n = 0;; n++) {
        check(cpprof_task_enter(tasks[n & 1]), "enter");
        work_us(20);
        check(cpprof_task_leave(tasks[n & 1], "switch", CPPROF_TASK_NO_STACK),
              "leave");
        if (n % 8 == 7)
            nanosleep(&pause, NULL); /* the census's CPU, on 2 cores */
        else
            work_us(20);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: census_switch --addr HOST:PORT\n");
        return 2;
    }
    sigset_t term;
    int sig;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL); /* for every thread: main's */
    check(cpprof_http_start(argv[2]), "cpprof_http_start");
    pthread_t t;
    for (long i = 0; i < THREADS; i++)
        if (pthread_create(&t, NULL, switcher, (void *)i) != 0)
            return 1;
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);
    sigwait(&term, &sig);
    return 0;
}
