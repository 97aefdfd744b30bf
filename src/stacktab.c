/*
 * stacktab.c -- aggregation of samples by (stack, flags, generation, label
 * set).
 *
 * Entries live in insertion order in one array, their PCs in one flat
 * array and their values in another, so that a table of a hundred thousand
 * stacks is a handful of allocations and iteration is a walk in order;
 * util.h's hash index of entry numbers finds an entry by key.  Label sets
 * are interned (labels.h), so the set's pointer is its identity in the key.
 */
#include "stacktab.h"
#include "labels.h"
#include "util.h"
#include "upper_calls.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    size_t pcs_at; /* index of pcs[0] in t->pcs */
    size_t depth;
    unsigned flags;
    uint64_t gen;
    const cpprof_labelset *labels; /* a reference of the table's */
};

struct stacktab {
    size_t nvalues;
    struct entry *entries; /* entry i's values: values[i * nvalues ...] */
    size_t n, cap;
    int64_t *values; /* at least one per entry, so never NULL once added */
    size_t capvalues;
    uintptr_t *pcs;
    size_t npcs, cappcs;
    struct hashindex index; /* of the entries */
};

uint64_t stacktab_key_hash(const stacktab_key *k)
{
    uint64_t h = hash_mix(hash_mix(hash_mix(k->depth, k->flags), k->gen),
                          (uintptr_t)k->labels);
    for (size_t i = 0; i < k->depth; i++)
        h = hash_mix(h, k->pcs[i]);
    return h;
}

stacktab *stacktab_new(size_t nvalues)
{
    stacktab *t = calloc(1, sizeof *t);
    if (t)
        t->nvalues = nvalues;
    return t;
}

static bool same_key(const void *ctx, size_t item, const void *key)
{
    const stacktab *t = ctx;
    const struct entry *e = &t->entries[item];
    const stacktab_key *k = key;
    return e->depth == k->depth && e->flags == k->flags && e->gen == k->gen &&
           e->labels == k->labels &&
           (k->depth == 0 ||
            memcmp(&t->pcs[e->pcs_at], k->pcs, k->depth * sizeof *k->pcs) == 0);
}

/* Makes room for one more entry of `depth` PCs. */
static int reserve(stacktab *t, size_t depth)
{
    size_t nvalues = t->nvalues ? t->nvalues : 1;
    int rc = ARRAY_RESERVE(t->entries, t->n, t->cap, 1);
    if (rc == 0)
        rc = ARRAY_RESERVE(t->values, t->n * nvalues, t->capvalues, nvalues);
    if (rc == 0)
        rc = ARRAY_RESERVE(t->pcs, t->npcs, t->cappcs, depth);
    return rc;
}

int stacktab_add(stacktab *t, const uintptr_t *pcs, size_t depth,
                 unsigned flags, uint64_t gen, const cpprof_labelset *labels,
                 const int64_t *values)
{
    if (!t || (depth && !pcs) || (t->nvalues && !values))
        return -EINVAL;
    stacktab_key key = {pcs, depth, flags, gen, labels};
    uint64_t hash = stacktab_key_hash(&key);
    struct hashindex_slot *slot =
        hashindex_find(&t->index, hash, same_key, t, &key);
    if (!slot)
        return -ENOMEM;
    if (!slot->item) {
        int rc = reserve(t, depth);
        if (rc)
            return rc;
        t->entries[t->n] = (struct entry){t->npcs, depth, flags, gen,
                                          labelset_hold(labels)};
        if (depth)
            memcpy(&t->pcs[t->npcs], pcs, depth * sizeof *pcs);
        t->npcs += depth;
        memset(&t->values[t->n * t->nvalues], 0,
               t->nvalues * sizeof *values);
        hashindex_set(&t->index, slot, hash, t->n++);
    }
    int64_t *sum = &t->values[(slot->item - 1) * t->nvalues];
    for (size_t i = 0; i < t->nvalues; i++)
        sum[i] += values[i];
    return 0;
}

void stacktab_foreach(const stacktab *t, stacktab_visit_fn fn, void *arg)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct entry *e = &t->entries[i];
        fn(&t->pcs[e->pcs_at], e->depth, e->flags, e->gen, e->labels,
           &t->values[i * t->nvalues], arg);
    }
}

size_t stacktab_count(const stacktab *t)
{
    return t->n;
}

void stacktab_free(stacktab *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        labelset_drop(t->entries[i].labels);
    free(t->entries);
    free(t->values);
    free(t->pcs);
    hashindex_free(&t->index);
    free(t);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(stacktab_foreach);
UPPER_CALLS(stacktab_free);
