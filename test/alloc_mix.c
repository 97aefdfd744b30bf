/*
 * alloc_mix.c -- a program built without cpprof that allocates the way
 * programs on jemalloc, tcmalloc and mimalloc do, for test/allocators.sh.
 *
 * Usage: alloc_mix ALLOCATOR [HOLD_SECONDS]
 *
 * ALLOCATOR (glibc, jemalloc, tcmalloc or mimalloc) is the allocator that
 * must serve the program's malloc and its relatives; with cpprof preloaded
 * or linked, that must not change.  Each entry point's block is checked
 * against the allocator's own view (its per-thread counters, its ownership
 * query, or glibc's mallinfo2), so a block served by another allocator
 * fails the run.  Then the demo's pattern (threads allocating a scratch
 * buffer per job and freeing it) and the allocator's own API mixed with
 * the standard one: a block from malloc freed by sdallocx, tc_free or
 * mi_free and the reverse, which crashes at once if cpprof hands one
 * allocator's block to another.  The allocator's API is found with dlsym,
 * so one source serves every build, preloaded or linked (built with
 * LINKED_CPPROF, it also calls cpprof, as a linked application does).  With
 * HOLD_SECONDS it keeps 16 MiB live in keep_live() while the pattern runs,
 * prints "holding" once the pattern is done and holds those blocks (idle:
 * a test run holds 8 s per allocator, and spinning workers then cost a
 * minute of CPU that checks nothing more) for the heap profile to show.
 *
 * Prints "ok ALLOCATOR" on success; any failure is a message on stderr and
 * exit status 1.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef LINKED_CPPROF
#include <cpprof.h>
#endif

static const char *expected;

static void fail(const char *what)
{
    fprintf(stderr, "alloc_mix (%s): %s\n", expected, what);
    exit(1);
}

static void *need(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    if (!f) {
        fprintf(stderr, "alloc_mix: %s has no %s\n", expected, name);
        exit(1);
    }
    return f;
}

/* ---- Which allocator a block came from ---------------------------------- */

/* Bytes held by the allocator's own count: jemalloc's per-thread
 * counters, tcmalloc's MallocExtension, glibc's mallinfo2; 0 for mimalloc,
 * which is asked about each block instead. */
static size_t held_bytes(void)
{
    if (strcmp(expected, "jemalloc") == 0) {
        int (*mallctl)(const char *, void *, size_t *, void *, size_t) =
            need("mallctl");
        uint64_t in, out;
        size_t sz = sizeof in;
        if (mallctl("thread.allocated", &in, &sz, NULL, 0) != 0 ||
            mallctl("thread.deallocated", &out, &sz, NULL, 0) != 0)
            fail("mallctl thread.allocated failed");
        return (size_t)(in - out);
    }
    if (strcmp(expected, "tcmalloc") == 0) {
        int (*property)(const char *, size_t *) =
            need("MallocExtension_GetNumericProperty");
        size_t v;
        if (!property("generic.current_allocated_bytes", &v))
            fail("no generic.current_allocated_bytes");
        return v;
    }
    if (strcmp(expected, "glibc") == 0) {
        struct mallinfo2 mi = mallinfo2();
        return mi.uordblks + mi.hblkhd;
    }
    return 0;
}

/* Whether the n-byte block p, allocated when held_bytes() was `before`, is
 * the expected allocator's.  (tcmalloc's GetOwnership and mimalloc's
 * mi_is_in_heap_region answer yes for glibc's blocks too.) */
static int served_by_expected(void *p, size_t n, size_t before)
{
    if (strcmp(expected, "mimalloc") == 0) {
        void *(*heap)(void) = need("mi_heap_get_default");
        _Bool (*owned)(void *, const void *) = need("mi_heap_check_owned");
        return owned(heap(), p);
    }
    return held_bytes() >= before + n;
}

#define BIG (1u << 20) /* large enough to stand out in any count */

static void check_served(const char *fn, void *p, size_t before)
{
    char msg[128];
    if (!p) {
        snprintf(msg, sizeof msg, "%s failed", fn);
        fail(msg);
    }
    if (!served_by_expected(p, BIG, before)) {
        snprintf(msg, sizeof msg, "%s's block is not %s's", fn, expected);
        fail(msg);
    }
    if (malloc_usable_size(p) < BIG) {
        snprintf(msg, sizeof msg, "malloc_usable_size of %s's block < %u",
                 fn, BIG);
        fail(msg);
    }
    memset(p, 0x5a, BIG);
    free(p);
}

static void check_every_entry_point(void)
{
    size_t b;
    void *p;
    b = held_bytes(), check_served("malloc", malloc(BIG), b);
    b = held_bytes(), check_served("calloc", calloc(BIG / 16, 16), b);
    b = held_bytes(), check_served("realloc", realloc(NULL, BIG), b);
    b = held_bytes(), check_served("reallocarray",
                                   reallocarray(NULL, BIG / 8, 8), b);
    b = held_bytes();
    if (posix_memalign(&p, 64, BIG) != 0)
        fail("posix_memalign failed");
    check_served("posix_memalign", p, b);
    b = held_bytes(), check_served("aligned_alloc", aligned_alloc(4096, BIG), b);
    b = held_bytes(), check_served("memalign", memalign(256, BIG), b);
    b = held_bytes(), check_served("valloc", valloc(BIG), b);
    /* jemalloc has none: glibc's would serve it, and jemalloc's free
     * would then crash on its block, cpprof or not. */
    if (strcmp(expected, "jemalloc") != 0)
        b = held_bytes(), check_served("pvalloc", pvalloc(BIG - 100), b);
    /* A block that grows and moves keeps its contents. */
    char *s = malloc(16);
    strcpy(s, "grows");
    for (size_t n = 32; n <= BIG; n *= 2)
        if (!(s = realloc(s, n)) || strcmp(s, "grows") != 0)
            fail("realloc lost a block's contents");
    free(s);
}

/* ---- The allocator's own API mixed with the standard one ----------------- */

static void mix_own_api(void)
{
    for (int i = 0; i < 20000; i++) {
        size_t n = 16 + (size_t)(i % 4000);
        void *std = malloc(n);
        if (!std)
            fail("malloc failed");
        if (strcmp(expected, "jemalloc") == 0) {
            void *(*mallocx)(size_t, int) = need("mallocx");
            void (*sdallocx)(void *, size_t, int) = need("sdallocx");
            void *own = mallocx(n, 0);
            sdallocx(std, n, 0);
            free(own);
        } else if (strcmp(expected, "tcmalloc") == 0) {
            size_t (*size_of)(void *) = need("tc_malloc_size");
            void *(*tc_malloc)(size_t) = need("tc_malloc");
            void (*tc_free)(void *) = need("tc_free");
            if (size_of(std) < n)
                fail("tc_malloc_size of a malloc block is too small");
            void *own = tc_malloc(n);
            tc_free(std);
            free(own);
        } else if (strcmp(expected, "mimalloc") == 0) {
            void *(*mi_malloc)(size_t) = need("mi_malloc");
            void (*mi_free)(void *) = need("mi_free");
            size_t (*mi_usable_size)(const void *) = need("mi_usable_size");
            if (mi_usable_size(std) < n)
                fail("mi_usable_size of a malloc block is too small");
            void *own = mi_malloc(n);
            mi_free(std);
            free(own);
        } else {
            free(std);
        }
    }
}

/* ---- The demo's pattern --------------------------------------------------- */

/* examples/jobrunner.c's job: a scratch buffer per job, written, freed. */
static void *worker(void *arg)
{
    unsigned seed = (unsigned)(size_t)arg;
    unsigned long sum = 0;
    for (int job = 0; job < 2000; job++) {
        size_t n = 4096 + (size_t)(rand_r(&seed) % (256 * 1024));
        unsigned char *scratch = malloc(n);
        if (!scratch)
            fail("malloc failed in a worker");
        memset(scratch, job, n);
        sum += scratch[n / 2];
        free(scratch);
    }
    return (void *)sum;
}

/* Holds 16 MiB in 64 KiB blocks while the workers run. */
static __attribute__((noinline)) void **keep_live(void)
{
    void **blocks = calloc(256, sizeof *blocks);
    for (int i = 0; blocks && i < 256; i++)
        if ((blocks[i] = malloc(64 * 1024)) != NULL)
            memset(blocks[i], i, 64 * 1024);
    return blocks;
}

static void run_demo_pattern(long hold_seconds)
{
    pthread_t t[4];
    for (size_t i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(i + 1)) != 0)
            fail("pthread_create failed");
    void **live = hold_seconds ? keep_live() : NULL;
    for (size_t i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    if (hold_seconds) {
        printf("holding\n");
        fflush(stdout);
        struct timespec d = {hold_seconds, 0};
        while (nanosleep(&d, &d) != 0)
            ;
    }
    for (int i = 0; live && i < 256; i++)
        free(live[i]);
    free(live);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: alloc_mix ALLOCATOR [HOLD_SECONDS]\n");
        return 2;
    }
    expected = argv[1];
#ifdef LINKED_CPPROF
    /* Linked as an application that uses cpprof, which the linker keeps. */
    if (cpprof_set("mem_profile_rate", "4096") != 0)
        fail("cpprof_set failed");
#endif
    check_every_entry_point();
    mix_own_api();
    run_demo_pattern(argc > 2 ? atol(argv[2]) : 0);
    printf("ok %s\n", expected);
    return 0;
}
