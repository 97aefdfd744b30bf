/*
 * stacktab.c -- aggregation of samples by (stack, flags, generation, label
 * set).
 *
 * Entries live in insertion order in one array, their PCs in one flat
 * array and their values in another, so that a table of a hundred thousand
 * stacks is a handful of allocations and iteration is a walk in order; an
 * open-addressing index of entry numbers finds an entry by key.  Label sets
 * are interned (labels.h), so the set's pointer is its identity in the key.
 */
#include "stacktab.h"
#include "labels.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    uint64_t hash;
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
    size_t *slots; /* entry number + 1; 0 is empty */
    size_t nslots;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xFF51AFD7ED558CCDull;
}

static uint64_t key_hash(const uintptr_t *pcs, size_t depth, unsigned flags,
                         uint64_t gen, const cpprof_labelset *labels)
{
    uint64_t h = mix(mix(mix(depth, flags), gen), (uintptr_t)labels);
    for (size_t i = 0; i < depth; i++)
        h = mix(h, pcs[i]);
    return h ^ (h >> 29);
}

stacktab *stacktab_new(size_t nvalues)
{
    stacktab *t = calloc(1, sizeof *t);
    if (t)
        t->nvalues = nvalues;
    return t;
}

static bool entry_is(const stacktab *t, const struct entry *e, uint64_t hash,
                     const uintptr_t *pcs, size_t depth, unsigned flags,
                     uint64_t gen, const cpprof_labelset *labels)
{
    return e->hash == hash && e->depth == depth && e->flags == flags &&
           e->gen == gen && e->labels == labels &&
           (depth == 0 || memcmp(&t->pcs[e->pcs_at], pcs, depth * sizeof *pcs) == 0);
}

/* The slot holding the entry for the key, or the empty slot where it goes. */
static size_t *find_slot(const stacktab *t, uint64_t hash,
                         const uintptr_t *pcs, size_t depth, unsigned flags,
                         uint64_t gen, const cpprof_labelset *labels)
{
    for (size_t i = hash & (t->nslots - 1);; i = (i + 1) & (t->nslots - 1)) {
        size_t *slot = &t->slots[i];
        if (*slot == 0 || entry_is(t, &t->entries[*slot - 1], hash, pcs,
                                   depth, flags, gen, labels))
            return slot;
    }
}

static int grow_index(stacktab *t)
{
    size_t nslots = t->nslots ? t->nslots * 2 : 256;
    size_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (size_t e = 0; e < t->n; e++) {
        size_t i = t->entries[e].hash & (nslots - 1);
        while (slots[i])
            i = (i + 1) & (nslots - 1);
        slots[i] = e + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return 0;
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
    if (2 * (t->n + 1) > t->nslots) {
        int rc = grow_index(t);
        if (rc)
            return rc;
    }
    uint64_t hash = key_hash(pcs, depth, flags, gen, labels);
    size_t *slot = find_slot(t, hash, pcs, depth, flags, gen, labels);
    if (*slot == 0) {
        int rc = reserve(t, depth);
        if (rc)
            return rc;
        t->entries[t->n] = (struct entry){hash, t->npcs, depth, flags, gen,
                                          labelset_hold(labels)};
        if (depth)
            memcpy(&t->pcs[t->npcs], pcs, depth * sizeof *pcs);
        t->npcs += depth;
        memset(&t->values[t->n * t->nvalues], 0,
               t->nvalues * sizeof *values);
        *slot = ++t->n;
    }
    int64_t *sum = &t->values[(*slot - 1) * t->nvalues];
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
    free(t->slots);
    free(t);
}
