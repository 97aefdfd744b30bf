/*
 * bench/flame_stacks -- a program whose allocs profile has exactly N
 * distinct stacks, served on /debug/pprof/, for bench/flame.sh to time the
 * index page's flame graph on (the goal: 100,000 stacks drawn in under a
 * second).
 *
 * Allocation i walks a path of D = ceil(log2 N) calls, each through step0
 * or step1 as bit k of i says, and allocates at the end: N paths, N
 * distinct stacks, a full binary tree of frames (the flame graph's worst
 * case: every stack branches from every other).  Run it with
 * CPPROF_MEM_PROFILE_RATE=1 so that every allocation is a sample.  One
 * large allocation comes first: the allocation profiler decides whether to
 * track only after its first megabyte, whose allocations it does not
 * sample.
 *
 * Usage: flame_stacks N HOST:PORT   prints "serving" once every stack is
 *                                   made, then serves until killed.
 */
#include <cpprof.h>

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile unsigned long calls; /* after each call: no tail calls */

static void step0(unsigned long path, int levels);
static void step1(unsigned long path, int levels);

__attribute__((noinline)) static void step(unsigned long path, int levels)
{
    if (levels == 0) {
        free(malloc(64));
    } else if (path & 1) {
        step1(path >> 1, levels - 1);
    } else {
        step0(path >> 1, levels - 1);
    }
    calls++;
}

__attribute__((noinline)) static void step0(unsigned long path, int levels)
{
    step(path, levels);
    calls++;
}

__attribute__((noinline)) static void step1(unsigned long path, int levels)
{
    step(path, levels);
    calls++;
}

int main(int argc, char **argv)
{
    long n = argc == 3 ? atol(argv[1]) : 0;
    if (n < 1) {
        fprintf(stderr, "usage: flame_stacks N HOST:PORT\n");
        return 2;
    }
    int levels = 0;
    while ((1L << levels) < n)
        levels++;
    void *volatile first = malloc(2 << 20); /* volatile: not optimized out */
    free(first);
    for (long i = 0; i < n; i++)
        step((unsigned long)i, levels);
    int rc = cpprof_http_start(argv[2]);
    if (rc != 0) {
        fprintf(stderr, "flame_stacks: %s\n", cpprof_strerror(rc));
        return 1;
    }
    printf("serving\n");
    fflush(stdout);
    for (;;)
        pause();
}
