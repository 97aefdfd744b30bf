/*
 * dlclose.c -- what cpprof adds to a program's dlopen+dlclose
 * (dlclose is interposed, and while a CPU profile runs it re-reads
 * the mappings once the loader unmapped something, so that samples stay
 * with the plugin they were taken in).
 *
 * Opens and closes PLUGIN (a small shared object) ROUNDS times (default
 * 2000), first with no profile running, then with a CPU profile running;
 * the same program linked against a build without the interposition gives
 * the baseline.  Then, with every allocation sampled (the heap profile's
 * stacks are kept for the process's life, and so are the mappings that go
 * away, up to a bound: unwind.h, UNWIND_GONE_KEPT), a reload loop in
 * which each load is listed in the walker's tables before its unload (as
 * a CPU profile's collector or a heap scrape would list it, at most every
 * 100 ms): after WARM rounds that fill the bound, ROUNDS more, with and
 * without one allocation from the plugin each (its reuse_alloc, as
 * test/reuse_plugin.c has), and what they add to the resident set.
 *
 * Usage: dlclose PLUGIN [ROUNDS]   Prints:
 *   idle_us N        microseconds per dlopen+dlclose, no profile running
 *   profiling_us N   the same while a CPU profile runs
 *   kept_us N        the same while heap stacks are kept (no CPU profile)
 *   kept_rss_kb N    resident set added by ROUNDS such reloads
 *   alloc_us N       the same, one allocation from the plugin per load
 *   alloc_rss_kb N   resident set added by them
 */
#define _GNU_SOURCE
#include "bench.h"
#include <dlfcn.h>
#include "unwind.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

enum {
    LISTED = 1, /* the walker's tables list each load (a refresh) */
    ALLOC = 2   /* one block allocated and freed through reuse_alloc */
};

/* Microseconds per dlopen+dlclose of `path`, over `rounds`, with what
 * `how` (LISTED, ALLOC) adds to each. */
static double round_trip_us(const char *path, int rounds, int how)
{
    double start = now_us();
    for (int i = 0; i < rounds; i++) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
            exit(1);
        }
        if (how & LISTED)
            unwind_refresh_if_loaded();
        if (how & ALLOC) {
            void *(*entry)(size_t) =
                (void *(*)(size_t))dlsym(h, "reuse_alloc");
            if (!entry) {
                fprintf(stderr, "%s has no reuse_alloc\n", path);
                exit(1);
            }
            free(entry(4001));
        }
        dlclose(h);
    }
    return (now_us() - start) / rounds;
}

/* The reload loop with stacks kept: prints NAME_us and NAME_rss_kb. */
static void kept_loop(const char *name, const char *path, int rounds,
                      int how)
{
    enum { WARM = 2 * UNWIND_GONE_KEPT }; /* past the bound */
    round_trip_us(path, WARM, how);
    long before = bench_rss_kb();
    double us = round_trip_us(path, rounds, how);
    printf("%s_us %.1f\n%s_rss_kb %ld\n", name, us, name,
           bench_rss_kb() - before);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: dlclose PLUGIN [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 2000;
    if (rounds < 1)
        rounds = 1;
    printf("idle_us %.1f\n", round_trip_us(argv[1], rounds, 0));
    if (cpprof_cpu_profile_start() != 0) {
        fprintf(stderr, "cpprof_cpu_profile_start failed\n");
        return 1;
    }
    printf("profiling_us %.1f\n", round_trip_us(argv[1], rounds, 0));
    unsigned char *buf;
    size_t len;
    if (cpprof_cpu_profile_stop(&buf, &len) == 0)
        free(buf);
    if (cpprof_set("mem_profile_rate", "1") != 0) {
        fprintf(stderr, "cpprof_set mem_profile_rate failed\n");
        return 1;
    }
    void *volatile big = malloc(64 << 20); /* the old rate's countdown */
    free(big);
    kept_loop("kept", argv[1], rounds, LISTED);
    kept_loop("alloc", argv[1], rounds, LISTED | ALLOC);
    return 0;
}
