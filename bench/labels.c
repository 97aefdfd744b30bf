/*
 * bench/labels -- cost of the label API, printed as figures.
 *
 *   scoped apply+restore (cpprof_do) with a prebuilt two-label set, ns
 *   building a two-label set (cpprof_labels + release), ns
 *   allocations per scoped apply
 *
 * Goal: at most 30 ns and 0 allocations per scoped apply.  For
 * scale, Go's pprof.Do takes about 300 ns and 4 allocations.  Allocations
 * are counted exactly: this program defines malloc and friends itself, so
 * every allocation in the process (libcpprof's included) passes through the
 * counters below before reaching glibc.
 */
#define _GNU_SOURCE
#include "bench.h"

#include <stdatomic.h>
#include <stdint.h>

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

int main(void)
{
    enum { APPLY_ITERS = 20000000, BUILD_ITERS = 2000000 };
    const char *kv[] = {"tenant", "acme", "kind", "reindex"};
    cpprof_labelset *set;
    bench_check(cpprof_labels(&set, 4, kv), "cpprof_labels");
    long calls = 0; /* a warm-up, so the first apply's set-up is not timed */
    bench_check(cpprof_do(NULL, set, bench_empty_job, &calls), "warm-up");

    long allocs0 = atomic_load(&allocations);
    double apply_ns = bench_apply_ns(set, bench_empty_job, APPLY_ITERS);
    double allocs_per_apply =
        (double)(atomic_load(&allocations) - allocs0) / APPLY_ITERS;

    double t0 = bench_now_ns();
    for (long i = 0; i < BUILD_ITERS; i++) {
        cpprof_labelset *s;
        cpprof_labels(&s, 4, kv);
        cpprof_labelset_release(s);
    }
    double build_ns = (bench_now_ns() - t0) / BUILD_ITERS;

    printf("scoped_apply_restore_ns %.1f (goal <= 30)\n", apply_ns);
    printf("build_two_label_set_ns %.1f\n", build_ns);
    printf("allocations_per_scoped_apply %.3f (goal 0)\n", allocs_per_apply);
    cpprof_labelset_release(set);
    return 0;
}
