/*
 * bench/locks -- what the interposed pthread mutex costs when it is not
 * contended: ns per lock+unlock pair calling glibc directly (its
 * __pthread_mutex_* aliases, the floor), through cpprof with block and
 * mutex profiling off (the default), and with both on at their most
 * detailed (block_profile_rate=1, mutex_profile_fraction=1).  Best of 5.
 */
#include <cpprof.h>

#include <pthread.h>
#include <stdio.h>
#include <time.h>

#if defined(__x86_64__)
#define GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GLIBC_BASE "GLIBC_2.17"
#endif
__asm__(".symver glibc_lock, __pthread_mutex_lock@" GLIBC_BASE);
__asm__(".symver glibc_unlock, __pthread_mutex_unlock@" GLIBC_BASE);
extern int glibc_lock(pthread_mutex_t *);
extern int glibc_unlock(pthread_mutex_t *);

#define STEPS 20000000
#define RUNS 5

typedef int (*lock_fn)(pthread_mutex_t *);

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static double best(lock_fn lock, lock_fn unlock)
{
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    double b = 1e30;
    for (int r = 0; r < RUNS; r++) {
        double t0 = now_ns();
        for (int i = 0; i < STEPS; i++) {
            lock(&m);
            unlock(&m);
        }
        double t = (now_ns() - t0) / STEPS;
        if (t < b)
            b = t;
    }
    return b;
}

int main(void)
{
    double glibc = best(glibc_lock, glibc_unlock);
    double off = best(pthread_mutex_lock, pthread_mutex_unlock);
    cpprof_set_block_profile_rate(1);
    cpprof_set_mutex_profile_fraction(1);
    double on = best(pthread_mutex_lock, pthread_mutex_unlock);
    printf("uncontended lock+unlock pair, best of %d x %d:\n", RUNS, STEPS);
    printf("  glibc directly        %5.1f ns\n", glibc);
    printf("  cpprof, profiling off %5.1f ns  (%+.1f ns)\n", off, off - glibc);
    printf("  cpprof, block+mutex   %5.1f ns  (%+.1f ns)\n", on, on - glibc);
    return 0;
}
