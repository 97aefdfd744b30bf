/*
 * heap_late.c -- a program that never links cpprof, for heap_late.sh:
 * it allocates and keeps 16 MiB in 4 KiB blocks in allocate_before, then,
 * given an address, starts cpprof's server by cpprof_http_start found with
 * dlsym (as a plugin linked with cpprof would, in a process given cpprof
 * by LD_PRELOAD), allocates and keeps 16 MiB more in allocate_after,
 * prints "serving" and waits to be killed.
 *
 * Usage: heap_late ADDR      (serve ADDR from the program)
 *        heap_late -         (cpprof serves CPPROF_HTTP from load)
 *        heap_late -f ADDR   (all of it in a child forked first, which
 *                             serves ADDR; the parent waits, and the
 *                             child ends with it)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

enum { BLOCKS = 4096, BLOCK = 4096 };

static void *kept[2][BLOCKS];

static __attribute__((noinline)) void allocate_into(void **to)
{
    for (int i = 0; i < BLOCKS; i++) {
        to[i] = malloc(BLOCK);
        if (to[i])
            memset(to[i], 1, 16);
    }
}

static __attribute__((noinline)) void allocate_before(void)
{
    allocate_into(kept[0]);
    __asm__ volatile("" ::: "memory"); /* a frame of its own */
}

static __attribute__((noinline)) void allocate_after(void)
{
    allocate_into(kept[1]);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "-f") == 0) {
        pid_t parent = getpid();
        pid_t child = fork();
        if (child < 0) {
            perror("heap_late: fork");
            return 1;
        }
        if (child > 0)
            for (;;)
                pause();
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
            return 1;
        argv++;
        argc--;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: heap_late ADDR|-|-f ADDR\n");
        return 2;
    }
    allocate_before();
    if (strcmp(argv[1], "-") != 0) {
        int (*start)(const char *) =
            (int (*)(const char *))dlsym(RTLD_DEFAULT, "cpprof_http_start");
        if (!start) {
            fprintf(stderr, "heap_late: no cpprof_http_start: preload cpprof\n");
            return 1;
        }
        int rc = start(argv[1]);
        if (rc != 0) {
            fprintf(stderr, "heap_late: cpprof_http_start: %d\n", rc);
            return 1;
        }
    }
    allocate_after();
    printf("serving\n");
    fflush(stdout);
    for (;;)
        pause();
}
