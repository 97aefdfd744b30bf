/*
 * util.h -- the small utilities every module would otherwise write again:
 * a growable array, clock readings in nanoseconds and futex waits.  One
 * copy each, inline, so a hot path (a label switch, a signal handler)
 * pays no call for them.  Core level: includes nothing of cpprof's.
 */
#ifndef CPPROF_UTIL_H
#define CPPROF_UTIL_H

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Makes room for `more` elements of `size` bytes in the malloc'd array
 * whose pointer is at arrp (n in use, *cap allocated): capacity doubles
 * from 16.  0, or -ENOMEM with the array untouched.  The pointer is copied
 * with memcpy so one function serves arrays of every type; ARRAY_RESERVE
 * passes the element size. */
static inline int array_reserve(void *arrp, size_t *cap, size_t n,
                                size_t more, size_t size)
{
    if (more > SIZE_MAX - n)
        return -ENOMEM;
    if (n + more <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < n + more) {
        if (ncap > SIZE_MAX / 2 / size)
            return -ENOMEM;
        ncap *= 2;
    }
    void *items;
    memcpy(&items, arrp, sizeof items);
    void *grown = realloc(items, ncap * size);
    if (!grown)
        return -ENOMEM;
    memcpy(arrp, &grown, sizeof grown);
    *cap = ncap;
    return 0;
}

#define ARRAY_RESERVE(arr, n, cap, more)                                     \
    array_reserve(&(arr), &(cap), (n), (more), sizeof *(arr))

/* SIGNAL-SAFE: clock_gettime is async-signal-safe. */
static inline int64_t clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* SIGNAL-SAFE */
static inline int64_t clock_mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* SIGNAL-SAFE */
static inline int64_t clock_thread_cpu_ns(void)
{
    return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* Sleeps while *word holds `val`, at most timeout (NULL: no bound), on a
 * process-private futex.  0, or -1 with errno (EAGAIN: it no longer held
 * val; ETIMEDOUT; EINTR). */
static inline long futex_wait(void *word, unsigned val,
                              const struct timespec *timeout)
{
    return syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT_PRIVATE, val,
                   timeout, NULL, 0);
}

/* Wakes up to n waiters on word (INT_MAX: all).  SIGNAL-SAFE: one system
 * call. */
static inline long futex_wake(void *word, int n)
{
    return syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL,
                   NULL, 0);
}

#endif
