/*
 * heap.h -- the sampling allocation profiler (heap.c): malloc and its
 * relatives interposed, one allocation sampled per `mem_profile_rate`
 * bytes on average, sampled objects tracked until freed.
 */
#ifndef CPPROF_HEAP_H
#define CPPROF_HEAP_H

#include "sampleset.h"

/* Values of a heap snapshot, unscaled (counts of sampled objects and their
 * bytes); the sampleset's numeric key is the object size. */
enum {
    HEAP_ALLOC_OBJECTS,
    HEAP_ALLOC_BYTES,
    HEAP_INUSE_OBJECTS,
    HEAP_INUSE_BYTES,
    HEAP_NVALUES
};

/* A snapshot of every (stack, size) bucket: cumulative allocations since
 * start and what is still in use. */
int heap_snapshot(sampleset **out);

/* What the profiler could not look at because it was busy on the same
 * thread: allocations that ran out the countdown meanwhile (its own, and
 * those of an application signal handler that interrupted it), which are
 * neither sampled nor charged; and frees of possibly sampled blocks, whose
 * records stay until the address is sampled again.  Never silent. */
typedef struct {
    unsigned long skipped_allocs;
    unsigned long skipped_frees;
} heap_stats;
void heap_get_stats(heap_stats *out);

/* Why there is no heap profile (the allocation profiler was turned off,
 * or the program's allocator is not reached through cpprof), or NULL when
 * allocations are tracked.  Known once the library is loaded. */
const char *heap_declined(void);

/* What the profile may miss although it tracks malloc: allocations through
 * an allocator's own API that the process has (alloc_unseen), which never
 * reach cpprof, and those made before sampling began in a process that
 * could not serve at load or was forked by one that serves
 * (heap_track_from_now); said once on stderr (not by such a fork).  NULL
 * when there is none. */
const char *heap_unseen(void);

/* The process is about to serve: a process that waited because nothing
 * could read its profile (preloaded without CPPROF_HTTP, or a fork of a
 * preloaded process that serves, heap.c) samples allocations from now on.
 * No effect otherwise. */
void heap_track_from_now(void);

/* cpprof's own allocations (made inside own_work_enter/leave), estimated from their samples as the heap
 * profile's figures are: bytes in use now, and allocated since start. */
void heap_internal_stats(int64_t *inuse_bytes, int64_t *alloc_bytes);

/* Go's scaling of a sampled (count, bytes) of objects of `size` bytes at
 * sampling rate `rate`: both divided by 1 - exp(-size/rate). */
void heap_scale(int64_t *count, int64_t *bytes, int64_t size, long rate);

#endif
