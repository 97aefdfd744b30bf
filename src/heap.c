/*
 * heap.c -- the sampling allocation profiler behind /debug/pprof/heap and
 * /debug/pprof/allocs.
 *
 * malloc, calloc, realloc, reallocarray, free, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc and malloc_usable_size are
 * defined here and exported from libcpprof, so they interpose on glibc's
 * whether the library is linked or preloaded; each passes straight through
 * to glibc's own entry points (__libc_malloc...), so the memory layout is
 * glibc's and a pointer from either side may be freed by the other.
 * reallocarray is ours too because glibc's calls its internal realloc,
 * which would move a sampled block behind our back.
 *
 * Sampling is Go's (runtime.MemProfileRate) and tcmalloc's: a per-thread
 * countdown of bytes drawn from an exponential distribution of mean
 * `mem_profile_rate`, so that every byte is equally likely to be sampled
 * and an object of size s is sampled with probability 1 - exp(-s/rate);
 * heap_scale() divides by that.  The countdown is an initial-exec TLS
 * variable, so the path that is not sampled is glibc's call plus a TLS
 * subtraction and a branch (bench/malloc measures it).  With sampling off
 * (rate 0) a thread still looks at the setting every RECHECK_BYTES, so
 * turning it on at run time reaches every thread.
 *
 * A sampled allocation gets a bucket for its (stack, size), as in Go, and a
 * live record keyed by address; free() finds out whether a pointer may be
 * sampled from a 64 KiB counting filter indexed by the address's hash, so
 * an unsampled free costs one byte load that is almost always zero.
 * Buckets live forever (they hold cumulative counts, which the allocs
 * profile and deltas need), live records until their block is freed.
 *
 * Never recursing, never deadlocking: all state is behind one spinlock,
 * held only with collect_busy set.  Allocation by the profiler itself (the
 * stack walk, the snapshot) and by an application signal handler that
 * interrupts the profiler on the same thread see collect_busy and pass
 * straight through (a free that must be forgotten then is counted in
 * heap_get_stats, and its record is dropped when the address is reused).
 * Live records come from __libc_malloc, never from ourselves; buckets,
 * never freed, from a bump allocator over mappings of our own
 * (bucket_memory says why).  Before
 * the settings are loaded (early constructors) the rate reads as 0, so
 * nothing is sampled; after fork the atfork handlers have kept the lock
 * consistent.
 */
#define _GNU_SOURCE
#include "heap.h"
#include "accounting.h"
#include "collect.h"
#include "unwind.h"
#include "config.h"
#include "stacktab.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <sys/mman.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Under ASan or TSan (--enable-asan-ubsan, --enable-tsan) the sanitizer's
 * allocator owns the heap: blocks it hands out (its strdup, its internals)
 * reach our free(), and a block from glibc would escape its checks.  Pass
 * through to its interceptors instead, which every sanitizer runtime
 * exports under these names. */
#ifdef CPPROF_SANITIZER_INTERCEPTS
#define __libc_malloc __interceptor_malloc
#define __libc_calloc __interceptor_calloc
#define __libc_realloc __interceptor_realloc
#define __libc_free __interceptor_free
#define __libc_memalign __interceptor_memalign
#define __libc_valloc __interceptor_valloc
#define __libc_pvalloc __interceptor_pvalloc
/* The sanitizer's own start-up allocates and frees through us before its
 * shadow memory exists, when our checked accesses would fault: nothing is
 * sampled or looked up until our constructor has run. */
static bool sanitizer_ready;
#endif
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

#define TLS_IE __attribute__((tls_model("initial-exec")))
#ifndef CPPROF_SANITIZER_INTERCEPTS
#define EXPORT __attribute__((visibility("default")))
#else
/* The entry points run before the sanitizer has started (see
 * sanitizer_ready): not instrumented, or TSan's function-entry hook faults
 * there. */
#define EXPORT                                                         \
    __attribute__((visibility("default"), no_sanitize_address,         \
                   no_sanitize_thread))
#endif

/* Bytes this thread may still allocate before the next sample. */
static __thread long countdown TLS_IE;
/* Whether countdown holds a drawn interval (0: sampling was off). */
static __thread int drawn TLS_IE;

#define RECHECK_BYTES (1L << 20)
#define FILTER_BITS 16
#define BUCKET_BITS 12

struct bucket {
    struct bucket *next;
    uint64_t hash;
    size_t size;
    int64_t allocs, frees;
    size_t depth;
    unsigned flags;
    uintptr_t pcs[];
};

struct live {
    struct live *next;
    uintptr_t addr;
    struct bucket *b;
};

/* filter[h] counts live records whose address hashes to h (255 sticks). */
static _Atomic unsigned char filter[1 << FILTER_BITS];
static struct live **live_heads;     /* 1 << FILTER_BITS chains */
static struct bucket **bucket_heads; /* 1 << BUCKET_BITS chains */
static atomic_flag lock = ATOMIC_FLAG_INIT;
static atomic_ulong skipped_allocs, skipped_frees;
static size_t (*glibc_usable_size)(void *);

/* ---- State under the lock --------------------------------------------- */

static void heap_lock(void) { collect_spin_lock(&lock); }
static void heap_unlock(void) { collect_spin_unlock(&lock); }

static inline size_t addr_slot(const void *p)
{
    return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >>
                    (64 - FILTER_BITS));
}

static inline __attribute__((always_inline)) bool
maybe_sampled(const void *p)
{
#ifdef CPPROF_SANITIZER_INTERCEPTS
    if (!sanitizer_ready)
        return false;
#endif
    return atomic_load_explicit(&filter[addr_slot(p)],
                                memory_order_relaxed) != 0;
}

static void filter_adjust(size_t slot, int by)
{
    unsigned c = atomic_load_explicit(&filter[slot], memory_order_relaxed);
    if (c == 255 || (by < 0 && c == 0))
        return;
    atomic_store_explicit(&filter[slot], (unsigned char)(c + by),
                          memory_order_relaxed);
}

static bool tables_ready(void)
{
    if (!live_heads)
        live_heads = __libc_calloc(1u << FILTER_BITS, sizeof *live_heads);
    if (!bucket_heads)
        bucket_heads = __libc_calloc(1u << BUCKET_BITS, sizeof *bucket_heads);
    return live_heads && bucket_heads;
}

static uint64_t bucket_hash(size_t size, const uintptr_t *pcs, size_t depth)
{
    uint64_t h = size * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < depth; i++)
        h = (h ^ pcs[i]) * 0x100000001B3ull;
    return h ^ (h >> 31);
}

/* Memory for a new bucket, zeroed, under heap_lock.  Buckets are never
 * freed, so they come from a bump allocator over cpprof's own mappings,
 * not from glibc: an application signal handler that allocates while its
 * thread was inside glibc's malloc makes a new bucket (its stack runs
 * through the signal frame into the interrupted code), and a second entry
 * into glibc's allocator there corrupted its lists (check_heap's
 * signal_handler_allocations, 3 of 3 runs once stacks were walked by CFI).
 * It also keeps the profiler's memory out of the program's heap. */
static void *bucket_memory(size_t n)
{
    enum { CHUNK = 1 << 20 };
    static char *next, *end;
    n = (n + 15) & ~(size_t)15;
    if (!next || (size_t)(end - next) < n) {
        size_t len = n > CHUNK ? n : CHUNK;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        next = p;
        end = next + len;
    }
    void *r = next;
    next += n;
    return r;
}

static struct bucket *bucket_for(size_t size, const uintptr_t *pcs,
                                 size_t depth, unsigned flags)
{
    uint64_t h = bucket_hash(size, pcs, depth);
    struct bucket **head = &bucket_heads[h >> (64 - BUCKET_BITS)];
    for (struct bucket *b = *head; b; b = b->next)
        if (b->hash == h && b->size == size && b->depth == depth &&
            b->flags == flags && !memcmp(b->pcs, pcs, depth * sizeof *pcs))
            return b;
    struct bucket *b = bucket_memory(sizeof *b + depth * sizeof *pcs);
    if (!b)
        return NULL;
    b->hash = h;
    b->size = size;
    b->depth = depth;
    b->flags = flags;
    memcpy(b->pcs, pcs, depth * sizeof *pcs);
    b->next = *head;
    *head = b;
    return b;
}

/* Unlinks the live record of p, or returns NULL. */
static struct live *live_unlink(const void *p)
{
    size_t slot = addr_slot(p);
    for (struct live **l = &live_heads[slot]; *l; l = &(*l)->next) {
        if ((*l)->addr == (uintptr_t)p) {
            struct live *found = *l;
            *l = found->next;
            filter_adjust(slot, -1);
            return found;
        }
    }
    return NULL;
}

static void live_link(struct live *l)
{
    size_t slot = addr_slot((void *)l->addr);
    l->next = live_heads[slot];
    live_heads[slot] = l;
    filter_adjust(slot, +1);
}

/* ---- Sampling ------------------------------------------------------- */

/* An exponential interval of mean `rate` bytes. */
static long next_interval(long rate)
{
    double u = (double)(collect_rand() >> 11) * 0x1.0p-53; /* [0, 1) */
    return (long)(-log1p(-u) * (double)rate);
}

static void record_alloc(void *p, size_t size, const uintptr_t *pcs,
                         size_t depth, unsigned flags)
{
    struct live *l = __libc_malloc(sizeof *l);
    if (!l)
        return;
    heap_lock();
    struct bucket *b = tables_ready() ? bucket_for(size, pcs, depth, flags)
                                      : NULL;
    if (b) {
        /* A record still at this address is one whose free we could not
         * see (see heap_get_stats): the block is gone, count it freed. */
        struct live *stale = live_unlink(p);
        if (stale)
            stale->b->frees++;
        b->allocs++;
        *l = (struct live){NULL, (uintptr_t)p, b};
        live_link(l);
        l = stale;
    }
    heap_unlock();
    __libc_free(l);
}

/* The countdown ran out on an allocation of n bytes at p (NULL when it
 * failed).  Called only from the interposed functions themselves, so the
 * stack walk drops exactly this frame and the interposer's. */
static __attribute__((noinline)) void sample_alloc(void *p, size_t n)
{
    if (collect_busy) {
        /* Not the application's allocation to sample, or one made by a
         * handler interrupting the profiler: uncharged, so the thread's
         * interrupted countdown goes on as if it had not happened. */
        countdown += (long)n;
        if (p)
            atomic_fetch_add(&skipped_allocs, 1);
        return;
    }
    collect_busy = 1;
    long rate = cfg_int(CFG_MEM_PROFILE_RATE);
    if (rate <= 0) {
        countdown = RECHECK_BYTES;
        drawn = 0;
    } else {
        /* The first crossing after sampling was off starts an interval
         * with this allocation.  Otherwise the caller saw the countdown
         * run out: sample, whatever a signal handler has stored in the
         * countdown since. */
        bool due = true;
        if (!drawn) {
            countdown = next_interval(rate) - (long)n;
            drawn = 1;
            due = countdown < 0;
        }
        if (due) {
            if (p) {
                uintptr_t pcs[STACK_MAX_FRAMES];
                unsigned flags;
                size_t depth = collect_stack(2, pcs, STACK_MAX_FRAMES, &flags);
                record_alloc(p, n, pcs, depth, flags);
            }
            countdown = next_interval(rate);
        }
    }
    collect_busy = 0;
}

/* Every allocation the application makes passes here: accounting's exact
 * per-set byte count (a thread-local add while it is on) and sampling. */
static inline __attribute__((always_inline)) void *track(void *p, size_t n)
{
#ifdef CPPROF_SANITIZER_INTERCEPTS
    if (!sanitizer_ready)
        return p;
#endif
    accounting_alloc(p, n);
    if (__builtin_expect((countdown -= (long)n) < 0, 0))
        sample_alloc(p, n);
    return p;
}

/* Takes p's live record out, or NULL (counted when the profiler is busy on
 * this thread and cannot look). */
static __attribute__((noinline)) struct live *detach(const void *p)
{
    if (collect_busy) {
        atomic_fetch_add(&skipped_frees, 1);
        return NULL;
    }
    collect_busy = 1;
    heap_lock();
    struct live *l = live_heads ? live_unlink(p) : NULL;
    heap_unlock();
    collect_busy = 0;
    return l;
}

/* Settles a detached record: its block was freed, or (realloc failed) it
 * is still there and the record goes back. */
static void settle(struct live *l, bool still_there)
{
    collect_busy = 1;
    heap_lock();
    if (still_there)
        live_link(l);
    else
        l->b->frees++;
    heap_unlock();
    collect_busy = 0;
    if (!still_there)
        __libc_free(l);
}

/* ---- The interposed allocator ------------------------------------------ */

EXPORT void *malloc(size_t n)
{
    return track(__libc_malloc(n), n);
}

EXPORT void free(void *p)
{
    if (__builtin_expect(maybe_sampled(p), 0)) {
        struct live *l = detach(p);
        if (l)
            settle(l, false);
    }
    __libc_free(p);
}

EXPORT void *calloc(size_t n, size_t size)
{
    size_t total;
    void *p = __libc_calloc(n, size);
    if (__builtin_mul_overflow(n, size, &total))
        return p;
    return track(p, total);
}

/* realloc's body, inlined into realloc and reallocarray so that the stack
 * walk sees the same frames under both. */
static inline __attribute__((always_inline)) void *realloc_tracked(void *p,
                                                                   size_t n)
{
    struct live *was = p && maybe_sampled(p) ? detach(p) : NULL;
    void *q = __libc_realloc(p, n);
    if (was)
        settle(was, q == NULL && n != 0);
    return q ? track(q, n) : q;
}

EXPORT void *realloc(void *p, size_t n)
{
    return realloc_tracked(p, n);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_tracked(p, total);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    /* glibc's own checks, in its order. */
    if (align % sizeof(void *) != 0 ||
        (align / sizeof(void *) & (align / sizeof(void *) - 1)) != 0 ||
        align == 0)
        return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = track(p, n);
    return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    return track(__libc_memalign(align, n), n);
}

EXPORT void *memalign(size_t align, size_t n)
{
    return track(__libc_memalign(align, n), n);
}

EXPORT void *valloc(size_t n)
{
    return track(__libc_valloc(n), n);
}

EXPORT void *pvalloc(size_t n)
{
    return track(__libc_pvalloc(n), n);
}

/* glibc has no __libc_ name for it: the next definition after ours. */
EXPORT size_t malloc_usable_size(void *p)
{
    size_t (*real)(void *) = __atomic_load_n(&glibc_usable_size,
                                             __ATOMIC_ACQUIRE);
    if (!real) {
        real = (size_t (*)(void *))dlsym(RTLD_NEXT, "malloc_usable_size");
        __atomic_store_n(&glibc_usable_size, real, __ATOMIC_RELEASE);
    }
    return real ? real(p) : 0;
}

/* ---- Reading it back ---------------------------------------------------- */

int heap_snapshot(sampleset **out)
{
    /* Objects loaded since the last refresh get tables for the stacks of
     * allocations from now on (collect.c never builds them itself). */
    unwind_refresh_maps();
    sampleset *s = sampleset_new(HEAP_NVALUES);
    if (!s)
        return -ENOMEM;
    int rc = 0;
    collect_busy = 1;
    heap_lock();
    for (size_t i = 0; bucket_heads && i < (1u << BUCKET_BITS) && rc == 0; i++)
        for (struct bucket *b = bucket_heads[i]; b && rc == 0; b = b->next) {
            int64_t size = (int64_t)b->size, inuse = b->allocs - b->frees;
            int64_t v[HEAP_NVALUES] = {b->allocs, b->allocs * size, inuse,
                                       inuse * size};
            rc = sampleset_add(s, b->pcs, b->depth, b->flags, NULL, size, v);
        }
    heap_unlock();
    collect_busy = 0;
    if (rc != 0) {
        sampleset_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void heap_get_stats(heap_stats *out)
{
    out->skipped_allocs = atomic_load(&skipped_allocs);
    out->skipped_frees = atomic_load(&skipped_frees);
}

void heap_scale(int64_t *count, int64_t *bytes, int64_t size, long rate)
{
    if (*count == 0 || *bytes == 0 || size <= 0) {
        *count = *bytes = 0;
        return;
    }
    if (rate <= 1)
        return;
    double scale = 1 / -expm1(-(double)size / (double)rate);
    *count = (int64_t)((double)*count * scale);
    *bytes = (int64_t)((double)*bytes * scale);
}

/* ---- fork --------------------------------------------------------------- */

static void atfork_prepare(void)
{
    collect_busy = 1;
    heap_lock();
}

static void atfork_release(void)
{
    heap_unlock();
    collect_busy = 0;
}

__attribute__((constructor)) static void heap_init(void)
{
    pthread_atfork(atfork_prepare, atfork_release, atfork_release);
    malloc_usable_size(NULL); /* resolves glibc's now, not on first use */
#if defined(CPPROF_SANITIZER_INTERCEPTS) && !defined(__SANITIZE_THREAD__)
    /* Under TSan never: each new thread allocates before TSan has set it
     * up, when any instrumented code the sampling reaches faults, so a
     * TSan build has no heap profile and no allocation accounting. */
    sanitizer_ready = true;
#endif
}
