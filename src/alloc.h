/*
 * alloc.h -- the program's own allocator, reached from underneath cpprof's
 * interposed malloc (alloc.c).
 *
 * cpprof defines malloc and its relatives (heap.c), so every block the
 * program allocates passes through it; each call forwards to the allocator
 * the program would use without cpprof.  This is that forwarding layer,
 * apart from the profiler above it: which allocator that is, the static
 * bootstrap arena that serves the calls made while it is being looked up,
 * and the untracked calloc and free that cpprof's own bookkeeping uses.
 * The lookup and the arena need nothing but the dynamic loader: nothing
 * here calls a module above the core.
 */
#ifndef CPPROF_ALLOC_H
#define CPPROF_ALLOC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define ALLOC_HIDDEN __attribute__((visibility("hidden")))

/* The allocator the program would use without cpprof (glibc's, or
 * jemalloc's, tcmalloc's or mimalloc's when one is linked or preloaded):
 * every entry comes from the one library that defines the malloc the
 * program would call, what it lacks built from what it has, so that no
 * block reaches another allocator's free. */
struct allocator {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*usable_size)(void *);
};

enum { ALLOC_NEXT_UNKNOWN, ALLOC_NEXT_RESOLVING, ALLOC_NEXT_READY };

/* Read inline by alloc_next() on every allocation; written by alloc.c. */
extern struct allocator alloc_next_table ALLOC_HIDDEN;
extern atomic_int alloc_next_state ALLOC_HIDDEN;

/* alloc_next() before the lookup has finished: looks up, or NULL. */
const struct allocator *alloc_next_slow(void);

/* The next allocator, or NULL while it is being looked up (the first
 * call; dlsym may allocate meanwhile, and another thread may allocate
 * too): those allocations come from the bootstrap arena.  No thread waits
 * for the lookup, which could hold a lock the lookup needs (the dynamic
 * loader's). */
static inline __attribute__((always_inline)) const struct allocator *
alloc_next(void)
{
    if (__builtin_expect(atomic_load_explicit(&alloc_next_state,
                                              memory_order_acquire) ==
                             ALLOC_NEXT_READY,
                         1))
        return &alloc_next_table;
    return alloc_next_slow();
}

/* ---- Bootstrap arena ---------------------------------------------------- */

/* What is allocated while the next allocator is being looked up comes from
 * here.  Its blocks are recognised by address: free forgets them, realloc
 * moves them to the real allocator, and no other allocator ever sees one.
 * Each block is preceded by its size. */
#define ALLOC_BOOT_BYTES (64 * 1024)
#define ALLOC_BOOT_ALIGN 16
#define ALLOC_BOOT_MAX_ALIGN 4096 /* the arena's own alignment */
extern unsigned char alloc_boot_arena[ALLOC_BOOT_BYTES] ALLOC_HIDDEN;

static inline bool alloc_is_boot(const void *p)
{
    return (const unsigned char *)p >= alloc_boot_arena &&
           (const unsigned char *)p < alloc_boot_arena + ALLOC_BOOT_BYTES;
}

static inline size_t alloc_boot_size(const void *p)
{
    return ((const size_t *)p)[-1];
}

/* n bytes aligned to `align` (a power of two), zeroed (the arena is never
 * reused), or NULL with ENOMEM when the arena is full. */
void *alloc_boot(size_t align, size_t n);

/* The same for an aligned request of the program's (memalign and its
 * kin): NULL with EINVAL for an alignment the arena cannot give. */
void *alloc_boot_aligned(size_t align, size_t n);

/* calloc and free of the program's own allocator, untracked: for cpprof's
 * bookkeeping that must not count as the program's allocations. */
void *alloc_real_calloc(size_t n, size_t size);
void alloc_real_free(void *p);

/* The first allocator function the program does not reach through
 * cpprof, with the object that defines it instead in *where, or NULL. */
const char *alloc_not_ours(const char **where);

/* The first well-known allocator API of the process that allocates
 * without calling malloc (jemalloc's mallocx family, tcmalloc's tc_*,
 * mimalloc's mi_*, an allocator's own operator new), as words for a
 * reader, with the object that defines it in *where; or NULL. */
const char *alloc_unseen(const char **where);

#endif
