/*
 * census_rename.c -- the program of test/census_rename.sh: a thread parked
 * in read(2) that another thread renames, linked against libcpprof.so as
 * an application is, so that the rename reaches cpprof's interposed
 * pthread_setname_np only if the library exports it.  A census reuses a
 * thread that has not run since the last one (census_still.c); the parked
 * thread does not run when renamed, so only the count of renames tells
 * the next census to read its name again.
 *
 *   census_rename --addr HOST:PORT
 *
 * Prints "serving HOST:PORT" once the server runs and the thread is named
 * "parked-old" and about to block; on SIGUSR1 renames it "parked-new" and
 * prints "renamed"; SIGTERM ends it.  Both signals are blocked in every
 * thread and taken by main with sigwait.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int pipe_fds[2];
static atomic_bool parked;

static void *park(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "parked-old");
    atomic_store(&parked, true);
    char c;
    while (read(pipe_fds[0], &c, 1) > 0)
        ;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: census_rename --addr HOST:PORT\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t t;
    int rc = cpprof_http_start(argv[2]);
    if (rc != 0 || pipe(pipe_fds) != 0 ||
        pthread_create(&t, NULL, park, NULL) != 0) {
        fprintf(stderr, "census_rename: %s\n", cpprof_strerror(rc));
        return 1;
    }
    while (!atomic_load(&parked))
        usleep(1000);
    printf("serving %s\n", argv[2]);
    for (;;) {
        int sig;
        sigwait(&set, &sig);
        if (sig == SIGTERM)
            break;
        if (pthread_setname_np(t, "parked-new") != 0)
            return 1;
        printf("renamed\n");
    }
    close(pipe_fds[1]);
    pthread_join(t, NULL);
    cpprof_http_stop();
    return 0;
}
