/*
 * sampleset.h -- a profile's samples as a value (sampleset.c): what the
 * collectors' snapshot functions return and what a `?seconds=N` delta
 * subtracts.  Collector level: it knows stacks and label sets, nothing of
 * the builder, the symbolizer or HTTP, so the collectors that include it
 * (heap.h, contention.h, threadcreate.h) compile against none of those.
 */
#ifndef CPPROF_SAMPLESET_H
#define CPPROF_SAMPLESET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpprof.h"
#include "stacktab.h"

/* Samples keyed by (stack, flags, generation, label set, one numeric key),
 * each with the same number of int64 values.  The generation is the one
 * the stack's mappings were walked in (unwind.h; 0: resolve against the
 * mappings at build time).  The numeric key is what Go's heap
 * profile keeps per sample besides its stack, the object size (label
 * "bytes"); profiles without one pass 0. */
typedef struct sampleset sampleset;

typedef struct {
    const uintptr_t *pcs; /* pcs[0] is the leaf, as in stacktab.h */
    size_t depth;
    unsigned flags;       /* STACK_* */
    uint64_t gen;         /* of the stack's mappings (unwind.h) */
    const cpprof_labelset *labels;
    int64_t num;
    const int64_t *values;
} sampleset_entry;

sampleset *sampleset_new(size_t nvalues);
void sampleset_free(sampleset *s);

/* Adds values to the entry with this key, creating it (with a reference to
 * labels) when new. */
int sampleset_add(sampleset *s, const uintptr_t *pcs, size_t depth,
                  unsigned flags, uint64_t gen, const cpprof_labelset *labels,
                  int64_t num, const int64_t *values);

/* Adds every entry of a stack table (its values must number as s's), with
 * the numeric key 0. */
int sampleset_add_stacktab(sampleset *s, const stacktab *t);

/* A new sampleset with `nvalues` values, copied from the stack table *tab
 * (NULL: none yet) under the collector's `lock`, with the recursion guard
 * up so that the copy's own allocations are not sampled.  What the
 * collectors' snapshot functions are made of. */
int sampleset_copy_locked(stacktab *const *tab, size_t nvalues,
                          atomic_flag *lock, sampleset **out);

/* s -= earlier, key by key (a key only in `earlier` becomes negative). */
int sampleset_subtract(sampleset *s, const sampleset *earlier);

/* The entries whose values are not all zero, sorted by values[by] from the
 * largest down (by >= the number of values: in insertion order), in a
 * malloc'd array of *n (free it; the entries stay valid while s is
 * unchanged). */
int sampleset_sorted(const sampleset *s, size_t by, sampleset_entry **out,
                     size_t *n);

/* Cuts every stack before its first PC past the leaf that keep() refuses:
 * the named-profile endpoint's cut at the first word outside every
 * executable mapping (http_named.c). */
void sampleset_trim(sampleset *s, bool (*keep)(uintptr_t pc));

#endif
