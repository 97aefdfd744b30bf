/*
 * bench/malloc -- what the interposed allocator costs on the path that is
 * not sampled: ns per malloc+free pair on a mixed-size workload, calling
 * glibc directly (__libc_malloc/__libc_free, the floor), through cpprof's
 * malloc with sampling off (mem_profile_rate=0), and with the default
 * 512 KiB sampling.  Goal: sampling on at most 10% slower than glibc.
 *
 * The workload keeps a ring of 1024 live blocks and replaces one per step,
 * with sizes from 8 B to 4 KiB (and one in 64 of 8 to 64 KiB), so frees
 * meet blocks of every age.  Each figure is the best of 5 runs.
 */
#include <cpprof.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

#define RING 1024
#define STEPS 4000000
#define RUNS 5

static size_t sizes[RING * 4];

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void make_sizes(void)
{
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        sizes[i] = i % 64 == 0 ? 8192 + x % (56 * 1024) : 8 + x % 4089;
    }
}

typedef void *(*alloc_fn)(size_t);
typedef void (*free_fn)(void *);

/* ns per pair for one run. */
static double run(alloc_fn alloc, free_fn release)
{
    static void *ring[RING];
    for (size_t i = 0; i < RING; i++)
        ring[i] = alloc(sizes[i]);
    double t0 = now_ns();
    for (size_t i = 0; i < STEPS; i++) {
        size_t slot = i % RING;
        release(ring[slot]);
        ring[slot] = alloc(sizes[i % (sizeof sizes / sizeof *sizes)]);
        *(volatile char *)ring[slot] = 1;
    }
    double t = (now_ns() - t0) / STEPS;
    for (size_t i = 0; i < RING; i++)
        release(ring[i]);
    return t;
}

static double best(alloc_fn alloc, free_fn release)
{
    double b = 1e30;
    for (int i = 0; i < RUNS; i++) {
        double t = run(alloc, release);
        if (t < b)
            b = t;
    }
    return b;
}

int main(void)
{
    make_sizes();
    double glibc = best(__libc_malloc, __libc_free);
    cpprof_set("mem_profile_rate", "0");
    double off = best(malloc, free);
    cpprof_set("mem_profile_rate", "524288");
    double on = best(malloc, free);
    printf("malloc+free pair, mixed sizes, best of %d x %d steps:\n", RUNS,
           STEPS);
    printf("  glibc directly          %6.1f ns\n", glibc);
    printf("  cpprof, sampling off    %6.1f ns  (%+.1f%%)\n", off,
           100 * (off / glibc - 1));
    printf("  cpprof, 512 KiB sampling %5.1f ns  (%+.1f%%)  goal <= +10%%\n",
           on, 100 * (on / glibc - 1));
    return 0;
}
