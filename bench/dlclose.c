/*
 * dlclose.c -- what cpprof adds to a program's dlopen+dlclose (issue 18
 * item 9: dlclose is interposed, and while a CPU profile runs it re-reads
 * the mappings once the loader unmapped something, so that samples stay
 * with the plugin they were taken in).
 *
 * Opens and closes PLUGIN (a small shared object) ROUNDS times (default
 * 2000), first with no profile running, then with a CPU profile running;
 * the same program linked against a build without the interposition gives
 * the baseline.
 *
 * Usage: dlclose PLUGIN [ROUNDS]   Prints:
 *   idle_us N        microseconds per dlopen+dlclose, no profile running
 *   profiling_us N   the same while a CPU profile runs
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* Microseconds per dlopen+dlclose of `path`, over `rounds`. */
static double round_trip_us(const char *path, int rounds)
{
    double start = now_us();
    for (int i = 0; i < rounds; i++) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
            exit(1);
        }
        dlclose(h);
    }
    return (now_us() - start) / rounds;
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
    printf("idle_us %.1f\n", round_trip_us(argv[1], rounds));
    if (cpprof_cpu_profile_start() != 0) {
        fprintf(stderr, "cpprof_cpu_profile_start failed\n");
        return 1;
    }
    printf("profiling_us %.1f\n", round_trip_us(argv[1], rounds));
    unsigned char *buf;
    size_t len;
    if (cpprof_cpu_profile_stop(&buf, &len) == 0)
        free(buf);
    return 0;
}
