/*
 * stacktab.h -- aggregation of samples by (stack, label set) (stacktab.c).
 *
 * Collectors (the CPU sampler's collector thread, the census, later the heap
 * and contention collectors) add samples here; the profile builder and the
 * text formats read them back.  Never used from a signal handler.
 */
#ifndef CPPROF_STACKTAB_H
#define CPPROF_STACKTAB_H

#include "cpprof.h"
#include "unwind.h" /* STACK_MAX_FRAMES, the flags STACK_* */
#include <stdint.h>

typedef struct stacktab stacktab;

/* An entry's key: the stack pcs[0..depth), its flags, the generation of
 * its mappings and its label set, as stacktab_add takes them (sample sets,
 * sampleset.c, key their entries by it and a number). */
typedef struct {
    const uintptr_t *pcs;
    size_t depth;
    unsigned flags;
    uint64_t gen;
    const cpprof_labelset *labels;
} stacktab_key;

/* The key's hash, for util.h's hash index. */
uint64_t stacktab_key_hash(const stacktab_key *k);

/* A table whose entries carry `nvalues` int64 values each. */
stacktab *stacktab_new(size_t nvalues);

/* Adds `values` to the entry for (pcs[0..depth), flags, gen, labels),
 * creating it (and taking a reference to labels) when new.  pcs[0] is the
 * leaf; gen is the generation of the mappings the stack was walked in
 * (unwind.h), 0 when the builder may resolve it against the mappings of
 * the moment. */
int stacktab_add(stacktab *t, const uintptr_t *pcs, size_t depth,
                 unsigned flags, uint64_t gen, const cpprof_labelset *labels,
                 const int64_t *values);

typedef void (*stacktab_visit_fn)(const uintptr_t *pcs, size_t depth,
                                  unsigned flags, uint64_t gen,
                                  const cpprof_labelset *labels,
                                  const int64_t *values, void *arg);
/* Visits every entry, in insertion order. */
void stacktab_foreach(const stacktab *t, stacktab_visit_fn fn, void *arg);

size_t stacktab_count(const stacktab *t);

/* Frees the table and releases its label references. */
void stacktab_free(stacktab *t);

#endif
