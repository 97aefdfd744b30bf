/*
 * census_nondumpable.c -- a program that drops its privileges after
 * starting cpprof's server, for census_nondumpable.sh.
 *
 * As many daemons do, it starts as root (or any user), starts the server,
 * then makes itself non-dumpable: as root by becoming nobody (setgid and
 * setuid to 65534, which clears the dumpable flag), otherwise with
 * prctl(PR_SET_DUMPABLE, 0).  Either way its /proc files become root's
 * and /proc/self/task/TID/syscall, which is its owner's alone, cannot be
 * opened by the process any more.  Its thread "reader" is blocked in
 * read() on an idle pipe meanwhile.  SIGTERM (taken by main with sigwait)
 * wakes the reader, which prints "read: ok" or "read: interrupted" (a
 * census that signalled it would have cut its read short), and the
 * program ends with _exit: a leak check at exit cannot stop the threads
 * of a process that is not dumpable.
 */
#define _GNU_SOURCE
#include "cpprof.h"
#include "serve.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static int idle_pipe[2];

static void *reader(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "reader");
    char c;
    ssize_t n = read(idle_pipe[0], &c, 1);
    printf("read: %s\n", n == 1 ? "ok" : errno == EINTR ? "interrupted"
                                                        : strerror(errno));
    fflush(stdout);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: census_nondumpable --addr HOST:PORT\n");
        return 2;
    }
    sigset_t term;
    if (serve_start("census_nondumpable", argv[2], &term) != 0)
        return 1;
    pthread_t t;
    if (pipe(idle_pipe) != 0 || pthread_create(&t, NULL, reader, NULL) != 0)
        return 1;
    if (getuid() == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0) {
            perror("census_nondumpable: setuid");
            return 1;
        }
    } else if (prctl(PR_SET_DUMPABLE, 0) != 0) {
        perror("census_nondumpable: PR_SET_DUMPABLE");
        return 1;
    }
    printf("dumpable %d\n", prctl(PR_GET_DUMPABLE));
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);
    int sig;
    sigwait(&term, &sig);
    if (write(idle_pipe[1], "x", 1) != 1)
        return 1;
    pthread_join(t, NULL);
    _exit(0);
}
