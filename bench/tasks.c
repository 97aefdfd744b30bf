/*
 * bench/tasks -- cost of tasks (cpprof_task_*), printed as figures.
 *
 *   enter+leave pair without a stack (CPPROF_TASK_NO_STACK), ns
 *   enter+leave pair parking with its stack, 30 frames deep, ns
 *   allocations per pair (either kind)
 *   bytes per parked task: the process's resident memory grown by
 *   100,000 parked tasks (their records and stacks), per task
 *
 * Goals: <= 20 ns without a stack, <= 1 us with a 30-frame stack, 0
 * allocations.  Times are the thread's CPU time.  Allocations are counted
 * exactly, as bench/labels does: this program defines malloc and friends.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);

static atomic_long allocations;

void *malloc(size_t n)
{
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}

void free(void *p) { __libc_free(p); }

enum { STACK_DEPTH = 30, PARKED = 100000 };

/* ns per enter+leave of `task`, `iters` times. */
static double pair_ns(cpprof_task task, unsigned flags, long iters)
{
    int rc = 0;
    double t0 = bench_now_ns();
    for (long i = 0; i < iters; i++) {
        rc |= cpprof_task_enter(task);
        rc |= cpprof_task_leave(task, "io", flags);
    }
    double ns = (bench_now_ns() - t0) / iters;
    bench_check(rc, "enter/leave");
    return ns;
}

/* Calls itself down to `depth` frames, then times stacked pairs there. */
static __attribute__((noinline)) double deep_pair_ns(int depth,
                                                     cpprof_task task,
                                                     long iters)
{
    double ns = depth > 1 ? deep_pair_ns(depth - 1, task, iters)
                          : pair_ns(task, 0, iters);
    __asm__ volatile("" ::: "memory"); /* keeps each frame: no tail call */
    return ns;
}

/* Resident set size, bytes. */
static long rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (!f || fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = 0;
    if (f)
        fclose(f);
    return rss * sysconf(_SC_PAGESIZE);
}

int main(void)
{
    enum { PAIR_ITERS = 10000000, STACK_ITERS = 200000 };
    const char *kv[] = {"tenant", "acme", "kind", "reindex"};
    cpprof_labelset *set;
    bench_check(cpprof_labels(&set, 4, kv), "cpprof_labels");
    cpprof_task task;
    bench_check(cpprof_task_create(&task, set), "create");
    pair_ns(task, 0, 1000); /* warm-up: the thread's entry, its bounds */

    long allocs0 = atomic_load(&allocations);
    double bare = pair_ns(task, CPPROF_TASK_NO_STACK, PAIR_ITERS);
    double stacked = deep_pair_ns(STACK_DEPTH, task, STACK_ITERS);
    double allocs = (double)(atomic_load(&allocations) - allocs0) /
                    (PAIR_ITERS + STACK_ITERS);
    bench_check(cpprof_task_end(task), "end");

    /* Parked tasks: made, entered and left with a stack, kept. */
    static cpprof_task parked[PARKED];
    long rss0 = rss_bytes();
    for (int i = 0; i < PARKED; i++) {
        bench_check(cpprof_task_create(&parked[i], set), "create");
        bench_check(cpprof_task_enter(parked[i]), "enter");
        bench_check(cpprof_task_leave(parked[i], "io", 0), "leave");
    }
    double bytes = (double)(rss_bytes() - rss0) / PARKED;
    for (int i = 0; i < PARKED; i++)
        bench_check(cpprof_task_end(parked[i]), "end");

    printf("task_enter_leave_ns %.1f (goal <= 20)\n", bare);
    printf("task_enter_leave_stack%d_ns %.1f (goal <= 1000)\n", STACK_DEPTH,
           stacked);
    printf("allocations_per_enter_leave %.3f (goal 0)\n", allocs);
    printf("bytes_per_parked_task %.0f\n", bytes);
    cpprof_labelset_release(set);
    return 0;
}
