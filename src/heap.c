/*
 * heap.c -- the sampling allocation profiler behind /debug/pprof/heap and
 * /debug/pprof/allocs.
 *
 * malloc, calloc, realloc, reallocarray, free, posix_memalign,
 * aligned_alloc, memalign, valloc, pvalloc and malloc_usable_size are
 * defined here and exported from libcpprof, so they come first whether
 * the library is linked or preloaded.  Each forwards to the allocator the
 * program would use without cpprof (alloc.c: the next malloc in lookup
 * order, and a bootstrap arena while it is being found), so linking or
 * preloading cpprof never changes the program's allocator.  reallocarray
 * is ours too because glibc's calls its internal realloc, which would
 * move a sampled block behind our back.
 *
 * cpprof's own allocations (libdw's DWARF, profile building, the HTTP
 * server: whatever runs between own_work_enter and _leave, and on the
 * threads cpprof creates for itself) are sampled into buckets of their
 * own, with no stack, that the heap profile leaves out and
 * heap_internal_stats sums: the program's profile shows the program.
 *
 * When the program's malloc is not ours (an allocator loaded or linked
 * before cpprof, or built into the executable), or heap_interpose is 0,
 * the profiler declines: every call only forwards, and heap_declined()
 * says why for the endpoints, the index and stderr (once, at load).
 *
 * Sampling is Go's (runtime.MemProfileRate) and tcmalloc's: a per-thread
 * countdown of bytes drawn from an exponential distribution of mean
 * `mem_profile_rate`, so that every byte is equally likely to be sampled
 * and an object of size s is sampled with probability 1 - exp(-s/rate);
 * heap_scale() divides by that.  The countdown is an initial-exec TLS
 * variable, so the path that is not sampled is the allocator's call plus a
 * TLS subtraction and a branch (bench/malloc measures it).  With sampling off
 * (rate 0) a thread still looks at the setting every RECHECK_BYTES, so
 * turning it on at run time reaches every thread.
 *
 * A sampled allocation gets a bucket for its (stack, size), as in Go, and
 * the generation of the stack's mappings (unwind_from), so that a plugin's
 * frames are named after it even once another object is loaded at its
 * address; the generation is that of the newest mapping the
 * stack passes through, so a stack of objects still loaded keeps one
 * bucket however often others come and go, and only a stack through a
 * reloaded object gets a new one per load.  It also gets a live record
 * keyed by address; free() finds out whether a pointer may be
 * sampled from a 64 KiB counting filter indexed by the address's hash, so
 * an unsampled free costs one byte load that is almost always zero.
 * Buckets live forever (they hold cumulative counts, which the allocs
 * profile and deltas need), live records until their block is freed
 * (then kept for the next sample).
 *
 * Never recursing, never deadlocking: all state is behind one spinlock,
 * held only with own_busy set.  Allocation by the profiler itself (the
 * stack walk, the snapshot) and by an application signal handler that
 * interrupts the profiler on the same thread see own_busy and pass
 * straight through (a free that must be forgotten then is counted in
 * heap_get_stats, and its record is dropped when the address is reused).
 * The profiler's own state (chain heads, buckets, live records, the
 * records recycled) never comes from the program's allocator, which a
 * handler's sampled allocation may have interrupted: it comes from a bump
 * allocator over mappings of our own (own_memory says why).  Until our
 * constructor has run (early constructors) nothing is tracked; after fork
 * the atfork handlers have kept the lock consistent.
 */
#define _GNU_SOURCE
#include "heap.h"
#include "alloc.h"
#include "accounting.h"
#include "atfork.h"
#include "collect.h"
#include "loader.h"
#include "own.h"
#include "unwind.h"
#include "config.h"
#include "stacktab.h"
#include "warn.h"
#include "upper_calls.h"

#include <errno.h>
#include <malloc.h>
#include <sys/mman.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TLS_IE __attribute__((tls_model("initial-exec")))

#ifdef CPPROF_SANITIZER_INTERCEPTS
/* Under ASan or TSan the sanitizer's runtime is the next allocator
 * (alloc.c), and its checks must not reach the entry points it calls
 * before its shadow memory exists. */
#define EXPORT                                                         \
    __attribute__((visibility("default"), no_sanitize_address,         \
                   no_sanitize_thread))
#else
#define EXPORT __attribute__((visibility("default")))
#endif

/* Whether allocations are tracked (sampled where `sampler` says, their
 * frees looked up): from our constructor on, unless it declines
 * (`declined` says why) or nothing could read the profile yet.  Until
 * then (early constructors) nothing is sampled; under a sanitizer, whose
 * own start-up allocates before its shadow memory exists, when our
 * checked accesses would fault, every call only forwards. */
static atomic_bool tracking;
/* Atomic: a server started from the environment (an earlier constructor)
 * may answer its index while this constructor sets it. */
static const char *_Atomic declined;
/* Which process samples new allocations, while tracking: every process
 * of the program's (SAMPLER_ANY, a program that links cpprof), or the one
 * of this pid.  A fork of a preloaded process that serves may never serve
 * itself (a PostgreSQL backend, a worker with CPPROF_HTTP_FORKS=0), when
 * nothing could read what it samples: the stack walks and the records'
 * page faults cost a backend of `pgbench -C` milliseconds, and 0.8% of a
 * busy one's CPU (docs/benchmarks.md).  So it samples from when it serves
 * (heap_track_from_now), and its fork handlers write nothing for that:
 * the pid tells.  Meanwhile it still tracks the frees of the blocks its
 * parent sampled, which are in its heap too, so that its profile, once it
 * serves, does not hold those it freed. */
#define SAMPLER_ANY 0
static _Atomic pid_t sampler;
/* When this process began sampling, if after its start
 * (heap_track_from_now); 0 when from load. */
static _Atomic time_t late_start;
/* Whether late because it was forked by a serving process (else: it was
 * preloaded without CPPROF_HTTP). */
static atomic_bool late_forked;

/* Bucket flag (beside the STACK_* ones): cpprof's own allocations, kept
 * out of the heap profile and summed by heap_internal_stats. */
#define BUCKET_INTERNAL 0x80000000u

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
    uint64_t gen; /* of the stack's mappings (unwind_from) */
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
static atomic_flag lock ATFORK_LOCK = ATOMIC_FLAG_INIT;
static atomic_ulong skipped_allocs, skipped_frees;

/* ---- State under the lock --------------------------------------------- */

static void heap_lock(void) { collect_spin_lock(&lock); }
static void heap_unlock(void) { collect_spin_unlock(&lock); }
ATFORK_CHILD static void heap_release_in_child(void)
{
    atfork_spin_release(&lock);
}

static inline size_t addr_slot(const void *p)
{
    return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >>
                    (64 - FILTER_BITS));
}

/* Whether p may be a sampled block.  Tracking first: a process that does
 * not track (nothing could read its profile, or declined) has no record,
 * and skips the filter's load, a cache miss in one free of a few (0.8% of
 * a PostgreSQL backend's CPU); under a sanitizer, whose start-up frees
 * before its shadow memory exists, the filter's checked load would
 * fault. */
static inline __attribute__((always_inline)) bool
maybe_sampled(const void *p)
{
    return atomic_load_explicit(&tracking, memory_order_relaxed) &&
           atomic_load_explicit(&filter[addr_slot(p)],
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

/* Memory of the profiler's own, zeroed, under heap_lock: a bump allocator
 * over anonymous mappings, never returned.  Nothing the profiler keeps
 * (the chain heads, buckets, live records) comes from the program's
 * allocator, because the profiler runs inside that allocator's callers at
 * any instruction: an application signal handler that allocates while its
 * thread was inside the real malloc is sampled (its stack runs through the
 * signal frame into the interrupted code), and a second entry into glibc's
 * malloc there corrupts its lists (check_heap's signal_handler_allocations:
 * buckets from glibc aborted 3 of 3 runs once stacks were walked by CFI;
 * live records from it, "corrupted double-linked list" or "malloc
 * assertion failure in sysmalloc", 8 of 80 runs of the merged build).  The
 * main thread's own record frees (settle) ran outside own_busy, so a
 * handler's record could take the same glibc bin mid-update; and records
 * interleaved with the program's blocks sent its frees through the bins.
 * It keeps the profiler's memory out of the program's heap, too. */
static void *own_memory(size_t n)
{
    enum { CHUNK = 1 << 20 };
    static char *bump, *bump_end;
    n = (n + 15) & ~(size_t)15;
    if (!bump || (size_t)(bump_end - bump) < n) {
        size_t len = n > CHUNK ? n : CHUNK;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        bump = p;
        bump_end = bump + len;
    }
    void *r = bump;
    bump += n;
    return r;
}

static bool tables_ready(void)
{
    if (!live_heads)
        live_heads = own_memory((1u << FILTER_BITS) * sizeof *live_heads);
    if (!bucket_heads)
        bucket_heads = own_memory((1u << BUCKET_BITS) * sizeof *bucket_heads);
    return live_heads && bucket_heads;
}

/* Live records whose blocks were freed, for the next samples (under
 * heap_lock): the records' memory is ours for good, like the buckets'. */
static struct live *spare_lives;

static struct live *live_new(void)
{
    struct live *l = spare_lives;
    if (l) {
        spare_lives = l->next;
        return l;
    }
    return own_memory(sizeof *l);
}

static void live_recycle(struct live *l)
{
    l->next = spare_lives;
    spare_lives = l;
}

static uint64_t bucket_hash(size_t size, const uintptr_t *pcs, size_t depth,
                            uint64_t gen)
{
    uint64_t h = (size ^ gen << 40) * 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < depth; i++)
        h = (h ^ pcs[i]) * 0x100000001B3ull;
    return h ^ (h >> 31);
}

static struct bucket *bucket_for(size_t size, const uintptr_t *pcs,
                                 size_t depth, unsigned flags, uint64_t gen)
{
    uint64_t h = bucket_hash(size, pcs, depth, gen);
    struct bucket **head = &bucket_heads[h >> (64 - BUCKET_BITS)];
    for (struct bucket *b = *head; b; b = b->next)
        if (b->hash == h && b->size == size && b->depth == depth &&
            b->flags == flags && b->gen == gen &&
            !memcmp(b->pcs, pcs, depth * sizeof *pcs))
            return b;
    struct bucket *b = own_memory(sizeof *b + depth * sizeof *pcs);
    if (!b)
        return NULL;
    b->hash = h;
    b->size = size;
    b->depth = depth;
    b->flags = flags;
    b->gen = gen;
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

/* The logarithm and exponential that sampling needs, here rather than
 * libm's: linking libm costs every forked child that exits the page
 * faults of libm's destructors (bench/fork, docs/benchmarks.md).  Each is
 * within 1e-15 of libm's, relative, over heap.c's arguments (test/check_heap
 * compares heap_scale with libm's expm1). */

/* ln(x) for a normal x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)),
 * and ln(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, whose odd
 * series has reached double precision by its 12th term. */
static double ln(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    int e = (int)(bits >> 52 & 0x7ff) - 1022;
    bits = (bits & ((1ull << 52) - 1)) | (1022ull << 52); /* [1/2, 1) */
    double m;
    memcpy(&m, &bits, sizeof m);
    if (m < 0x1.6a09e667f3bcdp-1) { /* sqrt(1/2) */
        m *= 2;
        e--;
    }
    double s = (m - 1) / (m + 1), z = s * s, sum = 0;
    for (int k = 23; k >= 3; k -= 2)
        sum = (sum + 1.0 / k) * z;
    return e * 0x1.62e42fefa39efp-1 /* ln 2 */ + 2 * s * (1 + sum);
}

/* 1 - e^-y for y > 0, without the cancellation of 1 - exp(-y) at small y:
 * e^-t - 1 by its series at t = y / 2^k <= 1/2, doubled k times back by
 * e^2t - 1 = (e^t - 1)(e^t + 1). */
static double one_minus_exp_neg(double y)
{
    if (y > 40) /* e^-40 is below half an ulp of 1 */
        return 1;
    int k = 0;
    for (; y > 0.5; k++)
        y /= 2;
    double term = 1, em = 0;
    for (int n = 1; n <= 18; n++) {
        term *= -y / n;
        em += term;
    }
    while (k-- > 0)
        em *= em + 2;
    return -em;
}

/* An exponential interval of mean `rate` bytes (1 - u is exact: u is a
 * multiple of 2^-53). */
static long next_interval(long rate)
{
    double u = (double)(collect_rand() >> 11) * 0x1.0p-53; /* [0, 1) */
    return (long)(-ln(1 - u) * (double)rate);
}

static void record_alloc(void *p, size_t size, const uintptr_t *pcs,
                         size_t depth, unsigned flags, uint64_t gen)
{
    heap_lock();
    struct bucket *b =
        tables_ready() ? bucket_for(size, pcs, depth, flags, gen) : NULL;
    struct live *l = b ? live_new() : NULL;
    if (l) {
        /* A record still at this address is one whose free we could not
         * see (see heap_get_stats): the block is gone, count it freed. */
        struct live *stale = live_unlink(p);
        if (stale) {
            stale->b->frees++;
            live_recycle(stale);
        }
        b->allocs++;
        *l = (struct live){NULL, (uintptr_t)p, b};
        live_link(l);
    }
    heap_unlock();
}

/* Whether this process samples new allocations.  getpid() is a system
 * call, but only when a countdown runs out: once in mem_profile_rate
 * bytes on average, or in RECHECK_BYTES while sampling is off. */
static bool samples_here(void)
{
    if (!atomic_load_explicit(&tracking, memory_order_relaxed))
        return false;
    pid_t who = atomic_load_explicit(&sampler, memory_order_relaxed);
    return who == SAMPLER_ANY || who == getpid();
}

/* The countdown ran out on an allocation of n bytes at p (NULL when it
 * failed).  Called only from the interposed functions themselves, so the
 * stack walk drops exactly this frame and the interposer's. */
static __attribute__((noinline)) void sample_alloc(void *p, size_t n)
{
    if (own_busy) {
        /* Not the application's allocation to sample, or one made by a
         * handler interrupting the profiler: uncharged, so the thread's
         * interrupted countdown goes on as if it had not happened. */
        countdown += (long)n;
        if (p)
            atomic_fetch_add(&skipped_allocs, 1);
        return;
    }
    own_busy = 1;
    /* Declined, not yet decided, or another process's to sample: as if
     * sampling were off. */
    long rate = samples_here() ? cfg_int(CFG_MEM_PROFILE_RATE) : 0;
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
        if (due && p) {
            uintptr_t pcs[STACK_MAX_FRAMES];
            unsigned flags = BUCKET_INTERNAL;
            uint64_t gen = 0;
            /* cpprof's own: sampled like the program's, so that its
             * in-use figure is estimated the same way, but kept with no
             * stack, out of the program's profile. */
            size_t depth = own_work ? 0
                                    : collect_stack(2, pcs, STACK_MAX_FRAMES,
                                                    &flags, &gen);
            record_alloc(p, n, pcs, depth, flags, gen);
        }
        if (due)
            countdown = next_interval(rate);
    }
    own_busy = 0;
}

/* Every allocation the application makes passes here: accounting's exact
 * per-set byte count (a thread-local add while it is on) and sampling.
 * Whether to track at all is asked only when the countdown runs out
 * (sample_alloc), so that this path stays the subtraction and branch it
 * was: with one more load here, check_heap's signal-handler test (a
 * handler allocating while the thread is inside glibc's malloc, which
 * glibc does not promise to survive) aborted in 1 run in 10, against none
 * in 90 without. */
static inline __attribute__((always_inline)) void *track(void *p, size_t n)
{
#ifdef CPPROF_SANITIZER_INTERCEPTS
    if (!atomic_load_explicit(&tracking, memory_order_relaxed))
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
    if (own_busy) {
        atomic_fetch_add(&skipped_frees, 1);
        return NULL;
    }
    own_busy = 1;
    heap_lock();
    struct live *l = live_heads ? live_unlink(p) : NULL;
    heap_unlock();
    own_busy = 0;
    return l;
}

/* Settles a detached record: its block was freed, or (realloc failed) it
 * is still there and the record goes back. */
static void settle(struct live *l, bool still_there)
{
    own_busy = 1;
    heap_lock();
    if (still_there) {
        live_link(l);
    } else {
        l->b->frees++;
        live_recycle(l);
    }
    heap_unlock();
    own_busy = 0;
}

/* ---- The interposed allocator ------------------------------------------ */

/* Each entry point forwards to the next allocator; on the thread that is
 * looking it up (a NULL allocator) it serves from the bootstrap arena,
 * untracked. */

EXPORT void *malloc(size_t n)
{
    const struct allocator *a = alloc_next();
    return a ? track(a->malloc(n), n) : alloc_boot(ALLOC_BOOT_ALIGN, n);
}

/* The free of a block that may be sampled: its record settled.  Apart
 * from free so that free's common path saves no registers. */
static __attribute__((noinline, cold)) void forget_if_sampled(void *p)
{
    struct live *l = detach(p);
    if (l)
        settle(l, false);
}

EXPORT void free(void *p)
{
    if (alloc_is_boot(p))
        return;
    const struct allocator *a = alloc_next();
    if (!a || !p)
        return;
    if (__builtin_expect(maybe_sampled(p), 0))
        forget_if_sampled(p);
    a->free(p);
}

EXPORT void *calloc(size_t n, size_t size)
{
    size_t total;
    bool overflow = __builtin_mul_overflow(n, size, &total);
    const struct allocator *a = alloc_next();
    if (!a) /* the arena is zero and never reused */
        return overflow ? (errno = ENOMEM, NULL) : alloc_boot(ALLOC_BOOT_ALIGN, total);
    void *p = a->calloc(n, size);
    return overflow ? p : track(p, total);
}

/* A bootstrap block grown or shrunk: moved to the real allocator (through
 * malloc, so it is tracked like any other). */
static void *realloc_boot(void *p, size_t n)
{
    void *q = malloc(n);
    if (q) {
        size_t old = alloc_boot_size(p);
        memcpy(q, p, old < n ? old : n);
    }
    return q;
}

/* realloc's body, inlined into realloc and reallocarray so that the stack
 * walk sees the same frames under both. */
static inline __attribute__((always_inline)) void *realloc_tracked(void *p,
                                                                   size_t n)
{
    if (alloc_is_boot(p))
        return realloc_boot(p, n);
    const struct allocator *a = alloc_next();
    if (!a) {
        if (!p)
            return alloc_boot(ALLOC_BOOT_ALIGN, n);
        errno = ENOMEM;
        return NULL;
    }
    struct live *was = p && maybe_sampled(p) ? detach(p) : NULL;
    void *q = a->realloc(p, n);
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
    const struct allocator *a = alloc_next();
    void *p;
    if (!a) {
        p = align <= ALLOC_BOOT_MAX_ALIGN ? alloc_boot(align, n) : NULL;
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    int rc = a->posix_memalign(&p, align, n);
    if (rc == 0)
        *out = track(p, n);
    return rc;
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    const struct allocator *a = alloc_next();
    return a ? track(a->aligned_alloc(align, n), n) : alloc_boot_aligned(align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
    const struct allocator *a = alloc_next();
    return a ? track(a->memalign(align, n), n) : alloc_boot_aligned(align, n);
}

EXPORT void *valloc(size_t n)
{
    const struct allocator *a = alloc_next();
    return a ? track(a->valloc(n), n) : alloc_boot_aligned(ALLOC_BOOT_MAX_ALIGN, n);
}

EXPORT void *pvalloc(size_t n)
{
    const struct allocator *a = alloc_next();
    return a ? track(a->pvalloc(n), n) : alloc_boot_aligned(ALLOC_BOOT_MAX_ALIGN, n);
}

EXPORT size_t malloc_usable_size(void *p)
{
    if (alloc_is_boot(p))
        return alloc_boot_size(p);
    const struct allocator *a = alloc_next();
    return a && p ? a->usable_size(p) : 0;
}

/* ---- Reading it back ---------------------------------------------------- */

int heap_snapshot(sampleset **out)
{
    /* Objects loaded since the last refresh get tables for the stacks of
     * allocations from now on (collect.c never builds them itself).  Only
     * the loader's objects: an allocation's walk reads its own thread's
     * stack, so no other mapping matters, and /proc/self/maps was the
     * largest cost of a heap scrape. */
    unwind_refresh_if_loaded();
    sampleset *s = sampleset_new(HEAP_NVALUES);
    if (!s)
        return -ENOMEM;
    int rc = 0;
    own_busy = 1;
    heap_lock();
    for (size_t i = 0; bucket_heads && i < (1u << BUCKET_BITS) && rc == 0; i++)
        for (struct bucket *b = bucket_heads[i]; b && rc == 0; b = b->next) {
            if (b->flags & BUCKET_INTERNAL)
                continue;
            int64_t size = (int64_t)b->size, inuse = b->allocs - b->frees;
            int64_t v[HEAP_NVALUES] = {b->allocs, b->allocs * size, inuse,
                                       inuse * size};
            rc = sampleset_add(s, b->pcs, b->depth, b->flags, b->gen, NULL,
                               size, v);
        }
    heap_unlock();
    own_busy = 0;
    if (rc != 0) {
        sampleset_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void heap_internal_stats(int64_t *inuse_bytes, int64_t *alloc_bytes)
{
    long rate = cfg_int(CFG_MEM_PROFILE_RATE);
    *inuse_bytes = *alloc_bytes = 0;
    own_busy = 1;
    heap_lock();
    for (size_t i = 0; bucket_heads && i < (1u << BUCKET_BITS); i++)
        for (struct bucket *b = bucket_heads[i]; b; b = b->next) {
            if (!(b->flags & BUCKET_INTERNAL))
                continue;
            int64_t size = (int64_t)b->size, inuse = b->allocs - b->frees;
            int64_t count = inuse, bytes = inuse * size;
            heap_scale(&count, &bytes, size, rate);
            *inuse_bytes += bytes;
            count = b->allocs, bytes = b->allocs * size;
            heap_scale(&count, &bytes, size, rate);
            *alloc_bytes += bytes;
        }
    heap_unlock();
    own_busy = 0;
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
    double scale = 1 / one_minus_exp_neg((double)size / (double)rate);
    *count = (int64_t)((double)*count * scale);
    *bytes = (int64_t)((double)*bytes * scale);
}

/* ---- Whether to track --------------------------------------------------- */

/* Why the allocation profiler declines to track, or NULL when it tracks. */
static const char *why_not_tracking(void)
{
    static char why[512];
    const char *where, *fn;
    if (cfg_int(CFG_HEAP_INTERPOSE) == 0)
        return "the allocation profiler was turned off by "
               "CPPROF_HEAP_INTERPOSE=0: malloc and its relatives only "
               "forward to the program's allocator";
#ifdef __SANITIZE_THREAD__
    /* Each new thread allocates before TSan has set it up, when any
     * instrumented code the sampling reaches faults. */
    return "the allocation profiler is off under ThreadSanitizer";
#endif
    if ((fn = alloc_not_ours(&where)) != NULL) {
        snprintf(why, sizeof why,
                 "the program's %s is defined in %s, which comes before "
                 "cpprof in symbol lookup order, so cpprof sees none of its "
                 "allocations: preload cpprof before that allocator, or link "
                 "-lcpprof before it",
                 fn, where);
        return why;
    }
    return NULL;
}

const char *heap_declined(void)
{
    return atomic_load(&declined);
}

/* heap_unseen's note, once written and said. */
static const char *_Atomic said;

const char *heap_unseen(void)
{
    static char why[768];
    static atomic_flag writing = ATOMIC_FLAG_INIT;
    const char *where, *api;
    if (atomic_load(&said) || heap_declined() ||
        !atomic_load(&tracking))
        return atomic_load(&said);
    time_t late = atomic_load(&late_start);
    if (!(api = alloc_unseen(&where)) && late == 0)
        return NULL;
    collect_spin_lock(&writing);
    if (!atomic_load(&said)) {
        int len = 0;
        struct tm tm;
        char at[16] = "";
        if (late != 0 && gmtime_r(&late, &tm))
            strftime(at, sizeof at, "%H:%M:%S", &tm);
        bool forked = atomic_load(&late_forked);
        if (late != 0 && forked)
            len = snprintf(why, sizeof why,
                           "allocations before the server started (%s UTC) "
                           "are not in the profile, but for those its "
                           "parent sampled before the fork: this process "
                           "was forked by a serving one, and a fork "
                           "samples from when it serves itself%s",
                           at, api ? "; " : "");
        else if (late != 0)
            len = snprintf(why, sizeof why,
                           "allocations before the server started (%s UTC) "
                           "are not in the profile: cpprof was preloaded "
                           "without CPPROF_HTTP, so nothing could read them "
                           "until then%s",
                           at, api ? "; " : "");
        if (api && len >= 0 && (size_t)len < sizeof why)
            snprintf(why + len, sizeof why - (size_t)len,
                     "allocations through %s (defined in %s) do not call "
                     "malloc, so the heap profile does not see them; only "
                     "malloc and its relatives are tracked",
                     api, where);
        /* Not a line for each of a pre-forking server's workers: the
         * first process said what is not late. */
        if (!forked)
            warn_stderr("cpprof: heap profile partial: %s\n", why);
        atomic_store(&said, why);
    }
    collect_spin_unlock(&writing);
    return why;
}

void heap_track_from_now(void)
{
    static atomic_flag starting = ATOMIC_FLAG_INIT;
    if (atomic_load(&declined))
        return;
    collect_spin_lock(&starting);
    if (!samples_here()) {
        /* Not yet serving here, so no reader of the note: rewritten for
         * this process (a fork's was its parent's). */
        bool forked = atomic_load(&tracking);
        atomic_store(&late_forked, forked);
        atomic_store(&late_start, time(NULL));
        atomic_store(&sampler, getpid());
        atomic_store(&tracking, true);
        atomic_store(&said, NULL);
        heap_unseen();
    }
    collect_spin_unlock(&starting);
}

/* ---- fork --------------------------------------------------------------- */

/* Held across fork (atfork.h: after every mutex, under which allocation
 * may come here), so the child finds the tables whole and the lock free. */
static const atfork_handlers on_fork = {heap_lock, heap_unlock,
                                        heap_release_in_child};

/* Runs after the settings are loaded: from here on allocations are
 * tracked, or the reason they never will be is known and said once. */
__attribute__((constructor)) static void heap_init(void)
{
    atfork_add(ATFORK_HEAP, &on_fork);
    cfg_freeze(CFG_HEAP_INTERPOSE);
    const char *why = why_not_tracking();
    atomic_store(&declined, why);
    /* Whether anything could ever read this process's allocation profile:
     * the program links cpprof (it may start the server at any time, in
     * any of its processes, and its profile covers it from start, as Go's
     * does), or it is to serve CPPROF_HTTP (itself or, for a wrapper, the
     * program it runs). */
    if (!why) {
        bool linked = loader_program_needs_cpprof();
        if (linked || cfg_str(CFG_HTTP)[0] != '\0') {
            atomic_store(&sampler, linked ? SAMPLER_ANY : getpid());
            atomic_store(&tracking, true);
            heap_unseen(); /* said at start, where stderr's reader looks */
        }
    }
#ifndef CPPROF_SANITIZER_INTERCEPTS
    /* (Not in a sanitized build, whose runtime always comes first: there
     * every program linked with libcpprof.so declines, as expected, and
     * the endpoints still say why.) */
    else
        warn_stderr("cpprof: no heap profile: %s\n", why);
#endif
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(heap_declined);
UPPER_CALLS(heap_get_stats);
UPPER_CALLS(heap_internal_stats);
UPPER_CALLS(heap_scale);
UPPER_CALLS(heap_snapshot);
UPPER_CALLS(heap_track_from_now);
UPPER_CALLS(heap_unseen);
