/*
 * check_heap.c -- the interposed allocator's bookkeeping, in-process: with
 * mem_profile_rate=1 every allocation is sampled, so the figures are exact
 * and each test can use object sizes nothing else allocates to find its
 * own buckets.  Also: Go's scaling, the calls' glibc semantics, and that
 * allocating from a signal handler and after fork neither deadlocks nor
 * corrupts the tables.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpprof.h"
#include "heap.h"

/* Sums the values of the buckets of object size `size`. */
static void totals(int64_t size, int64_t out[HEAP_NVALUES])
{
    sampleset *s;
    sampleset_entry *e;
    size_t n;
    ck_assert_int_eq(heap_snapshot(&s), 0);
    ck_assert_int_eq(sampleset_sorted(s, 0, &e, &n), 0);
    for (int v = 0; v < HEAP_NVALUES; v++)
        out[v] = 0;
    for (size_t i = 0; i < n; i++)
        if (e[i].num == size)
            for (int v = 0; v < HEAP_NVALUES; v++)
                out[v] += e[i].values[v];
    free(e);
    sampleset_free(s);
}

/* A new rate reaches a thread at its next sample, as in Go: one 64 MiB
 * allocation (never touched) runs out any countdown the old rate drew. */
static void set_rate(const char *rate)
{
    ck_assert_int_eq(cpprof_set("mem_profile_rate", rate), 0);
    free(malloc(64 << 20));
}

static void every_allocation(void)
{
    set_rate("1");
}

/* Sizes the compiler cannot see, for the calls that must fail. */
static volatile size_t huge = SIZE_MAX;

START_TEST(scaling_is_gos)
{
    int64_t count = 100, bytes = 100 * 4096;
    heap_scale(&count, &bytes, 4096, 4096); /* p = 1 - 1/e */
    ck_assert_int_eq(count, 158);
    ck_assert_int_eq(bytes, 647977); /* 409600 / (1 - 1/e) */
    count = 3, bytes = 30;
    heap_scale(&count, &bytes, 10, 1); /* rate 1: every object */
    ck_assert_int_eq(count, 3);
    ck_assert_int_eq(bytes, 30);
}
END_TEST

/* heap.c's own 1 - e^-y (libcpprof.so does not link libm) against libm's,
 * from objects a millionth of the rate to a thousand times it. */
START_TEST(scaling_matches_libm)
{
    const long rates[] = {2, 4096, 512 * 1024, 64L << 20};
    for (size_t r = 0; r < sizeof rates / sizeof *rates; r++)
        for (double y = 1e-6; y < 1e3; y *= 1.37) {
            int64_t size = (int64_t)(y * (double)rates[r]);
            if (size < 1)
                continue;
            int64_t count = 1000000000000, bytes = 1;
            heap_scale(&count, &bytes, size, rates[r]);
            double want =
                1e12 / -expm1(-(double)size / (double)rates[r]);
            ck_assert_msg(fabs((double)count - want) <= want * 1e-13 + 1,
                          "size %lld rate %ld: %lld, libm says %.1f",
                          (long long)size, rates[r], (long long)count, want);
        }
}
END_TEST

START_TEST(freed_memory_leaves_in_use)
{
    enum { N = 40, SIZE = 12345 };
    void *p[N];
    int64_t t[HEAP_NVALUES];
    every_allocation();
    for (int i = 0; i < N; i++)
        p[i] = malloc(SIZE);
    totals(SIZE, t);
    ck_assert_int_eq(t[HEAP_ALLOC_OBJECTS], N);
    ck_assert_int_eq(t[HEAP_ALLOC_BYTES], N * SIZE);
    ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], N);
    for (int i = 0; i < N / 2; i++)
        free(p[i]);
    totals(SIZE, t);
    ck_assert_int_eq(t[HEAP_ALLOC_OBJECTS], N);
    ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], N / 2);
    ck_assert_int_eq(t[HEAP_INUSE_BYTES], N / 2 * SIZE);
    for (int i = N / 2; i < N; i++)
        free(p[i]);
    totals(SIZE, t);
    ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], 0);
}
END_TEST

START_TEST(realloc_frees_the_old_block)
{
    int64_t t[HEAP_NVALUES];
    every_allocation();
    char *p = malloc(777);
    p = realloc(p, 123457);
    ck_assert_ptr_nonnull(p);
    totals(777, t);
    ck_assert_int_eq(t[HEAP_ALLOC_OBJECTS], 1);
    ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], 0);
    totals(123457, t);
    ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], 1);
    p = reallocarray(p, 2, 7779);
    totals(15558, t);
    ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], 1);
    ck_assert_ptr_null(reallocarray(p, huge, 2));
    ck_assert_int_eq(errno, ENOMEM);
    totals(15558, t); /* a failed reallocarray leaves the block alone */
    ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], 1);
    p = realloc(p, 0); /* frees */
    totals(15558, t);
    ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], 0);
    free(p);
}
END_TEST

START_TEST(every_entry_point_is_tracked)
{
    int64_t t[HEAP_NVALUES];
    void *p[7];
    /* aligned_alloc's size is a multiple of its alignment, as C11 asks:
     * ASan's, which cpprof forwards to in a sanitized build, enforces it. */
    const int64_t sizes[7] = {3333, 3334, 26 * 128, 3336, 3337, 3338, 3339};
    every_allocation();
    p[0] = calloc(3, 1111); /* 3333 */
    ck_assert_int_eq(posix_memalign(&p[1], 64, 3334), 0);
    p[2] = aligned_alloc(128, 26 * 128);
    p[3] = memalign(256, 3336);
    p[4] = valloc(3337);
    p[5] = pvalloc(3338);
    p[6] = malloc(3339);
    ck_assert_uint_eq((uintptr_t)p[1] % 64, 0);
    ck_assert_uint_eq((uintptr_t)p[3] % 256, 0);
    ck_assert_uint_ge(malloc_usable_size(p[6]), 3339);
    for (int i = 0; i < 7; i++) {
        totals(sizes[i], t);
        ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], 1);
        free(p[i]);
        totals(sizes[i], t);
        ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], 0);
    }
    void *q = (void *)1;
    ck_assert_int_eq(posix_memalign(&q, 3, 10), EINVAL);
    ck_assert_ptr_eq(q, (void *)1);
    ck_assert_ptr_null(calloc(huge, 2));
}
END_TEST

START_TEST(rate_zero_samples_nothing)
{
    int64_t t[HEAP_NVALUES];
    set_rate("0");
    for (int i = 0; i < 1000; i++)
        free(malloc(2 << 20)); /* past the re-check window many times */
    totals(2 << 20, t);
    ck_assert_int_eq(t[HEAP_ALLOC_OBJECTS], 0);
}
END_TEST

#ifndef CPPROF_SANITIZER_INTERCEPTS /* registered only without a sanitizer: below */
/* The handler's size is one glibc serves from its per-thread cache
 * (tcache, up to 1032 bytes), which the main loop's larger blocks never
 * touch: glibc's malloc is not async-signal-safe, and a handler block
 * taken from the lists a free it interrupted is rewriting corrupts them
 * ("unsorted double linked list corrupted", seen under qemu) whatever
 * cpprof does.  What this test is after is the handler re-entering
 * cpprof's bookkeeping, which every sampled allocation still does. */
#define HANDLER_SIZE 100

static void alloc_in_handler(int sig)
{
    (void)sig;
    free(malloc(HANDLER_SIZE));
}

/* An application signal handler allocating whenever it lands, including
 * inside the profiler's own bookkeeping: nothing deadlocks (the test has a
 * timeout) and the tables stay consistent. */
START_TEST(signal_handler_allocations)
{
    int64_t t[HEAP_NVALUES];
    struct itimerval every = {{0, 50}, {0, 50}}, off = {{0, 0}, {0, 0}};
    every_allocation();
    free(malloc(HANDLER_SIZE)); /* the handler's block waits in the tcache */
    signal(SIGALRM, alloc_in_handler);
    setitimer(ITIMER_REAL, &every, NULL);
    for (int i = 0; i < 300000; i++)
        free(malloc(4322));
    setitimer(ITIMER_REAL, &off, NULL);
    totals(4322, t);
    ck_assert_int_eq(t[HEAP_ALLOC_OBJECTS], 300000);
    ck_assert_int_eq(t[HEAP_INUSE_OBJECTS], 0);
    heap_stats st;
    heap_get_stats(&st);
    totals(HANDLER_SIZE, t); /* what a handler could not record is counted */
    ck_assert_int_ge(t[HEAP_ALLOC_OBJECTS] + (int64_t)st.skipped_allocs, 1);
}
END_TEST
#endif

static void *churn(void *arg)
{
    (void)arg;
    for (;;)
        free(malloc(5555));
    return NULL;
}

/* fork while another thread is inside the profiler: the child can still
 * allocate (the atfork handlers kept the lock consistent). */
START_TEST(fork_while_sampling)
{
    pthread_t t;
    every_allocation();
    pthread_create(&t, NULL, churn, NULL);
    for (int i = 0; i < 50; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            int64_t v[HEAP_NVALUES];
            for (int j = 0; j < 100; j++)
                free(malloc(6666));
            totals(6666, v);
            _exit(v[HEAP_ALLOC_OBJECTS] >= 100 ? 0 : 1);
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "child status %#x", status);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("heap");
    TCase *tc = tcase_create("heap");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, scaling_is_gos);
    tcase_add_test(tc, scaling_matches_libm);
    tcase_add_test(tc, freed_memory_leaves_in_use);
    tcase_add_test(tc, realloc_frees_the_old_block);
    tcase_add_test(tc, every_entry_point_is_tracked);
    tcase_add_test(tc, rate_zero_samples_nothing);
#ifndef CPPROF_SANITIZER_INTERCEPTS
    /* ASan's and TSan's allocators take locks: a handler's malloc that
     * interrupts one on the same thread waits for itself forever. */
    tcase_add_test(tc, signal_handler_allocations);
#endif
    tcase_add_test(tc, fork_while_sampling);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
