/*
 * chroot_noproc.c -- a daemon that jails itself where there is no /proc
 * after starting cpprof's server (as unbound does), for chroot_noproc.sh.
 *
 * Usage: chroot_noproc --addr HOST:PORT JAIL
 *
 * It starts the server, then, as a program with something to profile,
 * creates threads, holds allocations, takes a contended mutex, and chroots
 * into JAIL (an empty directory) before it prints "serving ...": from then
 * on /proc and every file the program was loaded from are out of its
 * sight.  SIGTERM (taken by main with sigwait) ends it.
 */
#define _GNU_SOURCE
#include "cpprof.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;

static void *contender(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        pthread_mutex_lock(&shared);
        usleep(10);
        pthread_mutex_unlock(&shared);
    }
    return NULL;
}

/* 16 MiB in 64 KiB blocks, held for the heap profile to show. */
static __attribute__((noinline)) void **keep_live(void)
{
    void **blocks = calloc(256, sizeof *blocks);
    for (int i = 0; blocks && i < 256; i++)
        if ((blocks[i] = malloc(64 * 1024)) != NULL)
            memset(blocks[i], i, 64 * 1024);
    return blocks;
}

int main(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: chroot_noproc --addr HOST:PORT JAIL\n");
        return 2;
    }
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    cpprof_set("mem_profile_rate", "4096");
    cpprof_set("mutex_profile_fraction", "1");
    cpprof_set("block_profile_rate", "1");
    int rc = cpprof_http_start(argv[2]);
    if (rc != 0) {
        fprintf(stderr, "chroot_noproc: %s\n", cpprof_strerror(rc));
        return 1;
    }
    void **live = keep_live();
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, contender, NULL) != 0)
            return 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    if (chroot(argv[3]) != 0 || chdir("/") != 0) {
        perror("chroot_noproc: chroot");
        return 77;
    }
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);
    int sig;
    sigwait(&term, &sig);
    printf("held %p\n", (void *)live);
    _exit(0);
}
