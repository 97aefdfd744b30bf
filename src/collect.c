/*
 * collect.c -- the recursion guard, stack walk and randomness that the
 * allocation, contention and thread-creation collectors share.
 *
 * The stack walk follows frame pointers from the caller's own frame, like
 * the CPU sampler's walker (unwind.c) but without a signal context and
 * without its table of mapped regions, which only exists while a CPU
 * profile runs.  Instead each thread learns its own stack's bounds once
 * (pthread_getattr_np, which allocates and reads /proc/self/maps for the
 * main thread: harmless under the recursion guard) and every frame record
 * read lies inside them, each one above the last.  A walk on another stack
 * (sigaltstack, a coroutine) keeps only the frames below the first record
 * outside the bounds.  glibc's backtrace() would find frames of code built
 * without frame pointers, but it dlopens libgcc_s on first use, which
 * allocates and takes the loader lock: not something malloc may do.
 */
#define _GNU_SOURCE
#include "collect.h"
#include "stacktab.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

__thread int collect_busy __attribute__((tls_model("initial-exec")));
__thread int collect_internal __attribute__((tls_model("initial-exec")));

void collect_internal_enter(void)
{
    collect_internal++;
}

void collect_internal_leave(void)
{
    collect_internal--;
}

#define TLS_IE __attribute__((tls_model("initial-exec")))
static __thread uintptr_t stack_lo TLS_IE, stack_hi TLS_IE;
static __thread uint64_t rng_state TLS_IE;

/* Learns this thread's stack bounds; on failure leaves them empty, so that
 * walks keep only their first frame. */
static void learn_stack_bounds(void)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        stack_lo = (uintptr_t)addr;
        stack_hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&attr);
}

/* glibc's pthread_getattr_np allocates (its CPU set) while holding the
 * thread's own lock.  Were that allocation sampled as the thread's first,
 * the walk below would call pthread_getattr_np again to learn the bounds
 * and wait for that lock forever.  Programs call it on their own threads
 * (Rust's std, JVMs, ASan at every thread start: the soak test hung
 * there), so it is interposed to mark the call busy: nothing inside it is
 * sampled.  Not under TSan, which calls it while setting a new thread up,
 * before instrumented code may run there (and has no heap profile). */
#ifndef __SANITIZE_THREAD__
__attribute__((visibility("default"))) int
pthread_getattr_np(pthread_t thread, pthread_attr_t *attr)
{
    static int (*real)(pthread_t, pthread_attr_t *);
    collect_busy++; /* before dlsym, which may allocate */
    if (!real)
        real = (int (*)(pthread_t, pthread_attr_t *))dlsym(
            RTLD_NEXT, "pthread_getattr_np");
    int rc = real ? real(thread, attr) : ENOSYS;
    collect_busy--;
    return rc;
}
#endif

/* no_sanitize_address: a frame pointer from code built without one can
 * point anywhere in the stack, and its "record" may then lie in an ASan
 * redzone; the read is in bounds (checked below), so ASan must not stop
 * it (--enable-asan-ubsan, found by test/fuzz/fuzz_http). */
__attribute__((noinline, no_sanitize_address)) size_t
collect_stack(unsigned skip, uintptr_t *pcs, size_t max, unsigned *flags)
{
    if (!stack_hi)
        learn_stack_bounds();
    *flags = 0;
    uintptr_t fp = (uintptr_t)__builtin_frame_address(0);
    uintptr_t lo = (uintptr_t)&fp;
    size_t n = 0;
    /* Our own record is always readable; the rest must lie in bounds. */
    for (bool own = true;; own = false) {
        if (!own && (fp < lo || fp % sizeof(uintptr_t) != 0 ||
                     fp < stack_lo || fp + 2 * sizeof(uintptr_t) > stack_hi))
            break;
        const uintptr_t *record = (const uintptr_t *)fp;
        uintptr_t ret = record[1];
        if (ret == 0)
            break;
        if (skip > 0) {
            skip--;
        } else if (n == max) {
            *flags |= STACK_TRUNCATED;
            break;
        } else {
            pcs[n++] = ret;
        }
        lo = fp + 2 * sizeof(uintptr_t);
        fp = record[0];
    }
    return n;
}

void collect_spin_lock(atomic_flag *lock)
{
    while (atomic_flag_test_and_set_explicit(lock, memory_order_acquire))
        sched_yield();
}

void collect_spin_unlock(atomic_flag *lock)
{
    atomic_flag_clear_explicit(lock, memory_order_release);
}

int64_t collect_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int64_t collect_wall_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

uint64_t collect_rand(void)
{
    uint64_t x = rng_state;
    if (x == 0) /* seeded per thread: its TLS address and the clock */
        x = ((uintptr_t)&rng_state * 0x9E3779B97F4A7C15ull) ^
            (uint64_t)collect_now_ns() ^ 0x2545F4914F6CDD1Dull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}
