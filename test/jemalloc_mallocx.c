/*
 * jemalloc_mallocx.c -- a program that allocates through jemalloc's own
 * API, as BIND 9's named does, for jemalloc_mallocx.sh.
 *
 * Usage: jemalloc_mallocx --addr HOST:PORT
 *
 * Linked -lcpprof -ljemalloc, it starts the server, then holds 16 MiB from
 * mallocx in keep_live_x() and frees blocks with sdallocx, never calling
 * malloc for them.  It prints "serving ..." once they are held; SIGTERM
 * (taken with sigwait) ends it.
 */
#define _GNU_SOURCE
#include "cpprof.h"

#include <jemalloc/jemalloc.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static __attribute__((noinline)) void **keep_live_x(void)
{
    void **blocks = mallocx(256 * sizeof *blocks, MALLOCX_ZERO);
    for (int i = 0; blocks && i < 256; i++)
        if ((blocks[i] = mallocx(64 * 1024, 0)) != NULL)
            memset(blocks[i], i, 64 * 1024);
    for (int i = 0; i < 1000; i++)
        sdallocx(mallocx(4096, 0), 4096, 0);
    return blocks;
}

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: jemalloc_mallocx --addr HOST:PORT\n");
        return 2;
    }
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    cpprof_set("mem_profile_rate", "4096");
    int rc = cpprof_http_start(argv[2]);
    if (rc != 0) {
        fprintf(stderr, "jemalloc_mallocx: %s\n", cpprof_strerror(rc));
        return 1;
    }
    void **live = keep_live_x();
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);
    int sig;
    sigwait(&term, &sig);
    for (int i = 0; live && i < 256; i++)
        sdallocx(live[i], 64 * 1024, 0);
    dallocx(live, 0);
    return 0;
}
