/*
 * serve.h -- how the test programs that http_lib.sh starts serve: SIGTERM
 * blocked, for the sigwait that ends them cleanly (the cleanup's kill),
 * then the server on the address given, then "serving URL" on stdout,
 * which start_program waits for.  One copy, so that each program says
 * only what it does besides.
 */
#ifndef CPPROF_TEST_SERVE_H
#define CPPROF_TEST_SERVE_H

#include "cpprof.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>

/* Blocks SIGTERM (in *term, for sigwait) and starts the server on addr;
 * 0, or 1 after saying why on stderr as prog. */
static inline int serve_start(const char *prog, const char *addr,
                              sigset_t *term)
{
    sigemptyset(term);
    sigaddset(term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, term, NULL);
    int rc = cpprof_http_start(addr);
    if (rc != 0) {
        fprintf(stderr, "%s: cpprof_http_start: %s\n", prog,
                cpprof_strerror(rc));
        return 1;
    }
    return 0;
}

/* The line start_program waits for. */
static inline void serve_announce(const char *addr)
{
    printf("serving http://%s/debug/pprof/\n", addr);
    fflush(stdout);
}

#endif
