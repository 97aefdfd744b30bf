/*
 * bench/tasks -- cost of tasks (cpprof_task_*), printed as figures.
 *
 *   enter+leave pair without a stack (CPPROF_TASK_NO_STACK), ns
 *   enter+leave pair parking with its stack, 30 frames deep, ns
 *   allocations per pair (either kind)
 *   bytes per parked task: the process's resident memory grown by
 *   100,000 parked tasks (their records and stacks), per task
 *   the goroutine profile with those 100,000 tasks parked: the whole
 *   answer to GET /debug/pprof/goroutine from the server in this process
 *   (census, profile, symbols, gzip), wall ms, the median of 5; bench/go's
 *   `goroutines 100000` times Go's own for the same number
 *
 * Goals: <= 20 ns without a stack, <= 1 us with a 30-frame stack, 0
 * allocations.  Times are the thread's CPU time.  Allocations are counted
 * exactly, as bench/labels does: this program defines malloc and friends.
 */
#define _GNU_SOURCE
#include "bench.h"
#include "bench_http.h"

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

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A port nobody listens on now, from the kernel. */
static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        perror("bench/tasks: a free port");
        exit(1);
    }
    close(fd);
    return ntohs(sa.sin_port);
}

/* The goroutine profile of this process (its tasks parked), served
 * whole; the median of 5, after one to warm up (the symbolizer's tables
 * are built once). */
static double time_goroutine_profile(void)
{
    enum { ROUNDS = 5 };
    double ms[ROUNDS];
    int port = free_port();
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    bench_check(cpprof_http_start(addr), "cpprof_http_start");
    for (int i = -1; i < ROUNDS; i++) {
        int fd = bench_http_connect(port);
        double t0 = wall_ms();
        bench_http_get(fd, "/debug/pprof/goroutine", 0);
        double t1 = wall_ms();
        close(fd);
        if (i >= 0)
            ms[i] = t1 - t0;
    }
    cpprof_http_stop();
    return bench_median(ms, ROUNDS);
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
    double profile_ms = time_goroutine_profile();
    for (int i = 0; i < PARKED; i++)
        bench_check(cpprof_task_end(parked[i]), "end");

    printf("task_enter_leave_ns %.1f (goal <= 20)\n", bare);
    printf("task_enter_leave_stack%d_ns %.1f (goal <= 1000)\n", STACK_DEPTH,
           stacked);
    printf("allocations_per_enter_leave %.3f (goal 0)\n", allocs);
    printf("bytes_per_parked_task %.0f\n", bytes);
    printf("goroutine_profile_%d_parked_tasks_ms %.1f (goal <= 50; Go's: "
           "bench/go goroutines %d)\n", PARKED, profile_ms, PARKED);
    cpprof_labelset_release(set);
    return 0;
}
