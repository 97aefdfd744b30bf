/*
 * sampleset.c -- sample sets: a profile's samples as a value, keyed by
 * (stack, flags, generation, label set, numeric key), that can be copied
 * out of a collector's stack table and subtracted from one another.
 *
 * What Go's net/http/pprof does with two snapshots of a profile for
 * `?seconds=N` (profile.Merge of the later with the earlier scaled by -1)
 * done on the raw values: the collectors (heap.c, contention.c,
 * threadcreate.c) hand out their snapshots as sample sets, and the
 * named-profile endpoint (http_named.c) subtracts and builds them.  A set
 * holds a reference to each entry's label set.
 */
#define _GNU_SOURCE /* qsort_r */
#include "sampleset.h"
#include "collect.h"
#include "labels.h"
#include "own.h"
#include "util.h"
#include "upper_calls.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct sset_entry {
    uintptr_t *pcs;
    size_t depth;
    unsigned flags;
    uint64_t gen;
    const cpprof_labelset *labels;
    int64_t num;
    int64_t *values;
};

struct sampleset {
    size_t nvalues;
    struct sset_entry *e;
    size_t n, cap;
    struct hashindex index; /* of the entries */
};

sampleset *sampleset_new(size_t nvalues)
{
    sampleset *s = calloc(1, sizeof *s);
    if (s)
        s->nvalues = nvalues;
    return s;
}

void sampleset_free(sampleset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->e[i].pcs);
        free(s->e[i].values);
        labelset_drop(s->e[i].labels);
    }
    free(s->e);
    hashindex_free(&s->index);
    free(s);
}

/* A sample's key: what find_or_add looks up. */
struct key {
    stacktab_key s;
    int64_t num;
};

static uint64_t key_hash(const struct key *k)
{
    return hash_mix(stacktab_key_hash(&k->s), (uint64_t)k->num);
}

static bool same_key(const void *ctx, size_t item, const void *key)
{
    const struct sset_entry *e = &((const sampleset *)ctx)->e[item];
    const struct key *k = key;
    return e->depth == k->s.depth && e->flags == k->s.flags &&
           e->gen == k->s.gen && e->labels == k->s.labels && e->num == k->num &&
           memcmp(e->pcs, k->s.pcs, k->s.depth * sizeof *k->s.pcs) == 0;
}

static int append_entry(sampleset *s, const struct key *k)
{
    if (ARRAY_RESERVE(s->e, s->n, s->cap, 1) != 0)
        return -ENOMEM;
    struct sset_entry *e = &s->e[s->n];
    e->pcs = malloc((k->s.depth ? k->s.depth : 1) * sizeof *k->s.pcs);
    e->values = calloc(s->nvalues ? s->nvalues : 1, sizeof *e->values);
    if (!e->pcs || !e->values) {
        free(e->pcs);
        free(e->values);
        return -ENOMEM;
    }
    memcpy(e->pcs, k->s.pcs, k->s.depth * sizeof *k->s.pcs);
    e->depth = k->s.depth;
    e->flags = k->s.flags;
    e->gen = k->s.gen;
    e->labels = labelset_hold(k->s.labels);
    e->num = k->num;
    return (int)s->n++;
}

/* The index of the entry with this key, created when missing. */
static int find_or_add(sampleset *s, const struct key *k)
{
    uint64_t hash = key_hash(k);
    struct hashindex_slot *slot =
        hashindex_find(&s->index, hash, same_key, s, k);
    if (!slot)
        return -ENOMEM;
    if (slot->item)
        return (int)(slot->item - 1);
    int i = append_entry(s, k);
    if (i >= 0)
        hashindex_set(&s->index, slot, hash, (size_t)i);
    return i;
}

int sampleset_add(sampleset *s, const uintptr_t *pcs, size_t depth,
                  unsigned flags, uint64_t gen, const cpprof_labelset *labels,
                  int64_t num, const int64_t *values)
{
    int i = find_or_add(s, &(struct key){{pcs, depth, flags, gen, labels}, num});
    if (i < 0)
        return i;
    for (size_t v = 0; v < s->nvalues; v++)
        s->e[i].values[v] += values[v];
    return 0;
}

struct add_ctx {
    sampleset *s;
    int rc;
};

static void add_stacktab_entry(const uintptr_t *pcs, size_t depth,
                               unsigned flags, uint64_t gen,
                               const cpprof_labelset *labels,
                               const int64_t *values, void *arg)
{
    struct add_ctx *c = arg;
    if (c->rc == 0)
        c->rc = sampleset_add(c->s, pcs, depth, flags, gen, labels, 0,
                              values);
}

int sampleset_add_stacktab(sampleset *s, const stacktab *t)
{
    struct add_ctx c = {s, 0};
    stacktab_foreach(t, add_stacktab_entry, &c);
    return c.rc;
}

int sampleset_copy_locked(stacktab *const *tab, size_t nvalues,
                          atomic_flag *lock, sampleset **out)
{
    sampleset *s = sampleset_new(nvalues);
    if (!s)
        return -ENOMEM;
    int rc = 0;
    own_busy = 1;
    collect_spin_lock(lock);
    if (*tab)
        rc = sampleset_add_stacktab(s, *tab);
    collect_spin_unlock(lock);
    own_busy = 0;
    if (rc != 0) {
        sampleset_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* The negated values on the heap, not in a variable-length array: no
 * frame of the library's grows with its data (configure.ac). */
int sampleset_subtract(sampleset *s, const sampleset *earlier)
{
    int64_t *neg = malloc((s->nvalues ? s->nvalues : 1) * sizeof *neg);
    if (!neg)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < earlier->n && rc == 0; i++) {
        const struct sset_entry *e = &earlier->e[i];
        for (size_t v = 0; v < s->nvalues; v++)
            neg[v] = -e->values[v];
        rc = sampleset_add(s, e->pcs, e->depth, e->flags, e->gen, e->labels,
                           e->num, neg);
    }
    free(neg);
    return rc;
}

static int by_value_desc(const void *a, const void *b, void *by)
{
    int64_t x = ((const sampleset_entry *)a)->values[*(size_t *)by];
    int64_t y = ((const sampleset_entry *)b)->values[*(size_t *)by];
    return x > y ? -1 : x < y;
}

static bool all_zero(const int64_t *values, size_t n)
{
    for (size_t v = 0; v < n; v++)
        if (values[v] != 0)
            return false;
    return true;
}

int sampleset_sorted(const sampleset *s, size_t by, sampleset_entry **out,
                     size_t *n)
{
    sampleset_entry *list = malloc((s->n ? s->n : 1) * sizeof *list);
    if (!list)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct sset_entry *e = &s->e[i];
        if (all_zero(e->values, s->nvalues))
            continue;
        list[k++] = (sampleset_entry){e->pcs,    e->depth, e->flags, e->gen,
                                      e->labels, e->num,   e->values};
    }
    if (by < s->nvalues)
        qsort_r(list, k, sizeof *list, by_value_desc, &by);
    *out = list;
    *n = k;
    return 0;
}

void sampleset_trim(sampleset *s, bool (*keep)(uintptr_t pc))
{
    for (size_t i = 0; i < s->n; i++)
        for (size_t d = 1; d < s->e[i].depth; d++)
            if (!keep(s->e[i].pcs[d])) {
                s->e[i].depth = d;
                break;
            }
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(sampleset_add);
UPPER_CALLS(sampleset_free);
UPPER_CALLS(sampleset_new);
UPPER_CALLS(sampleset_sorted);
UPPER_CALLS(sampleset_subtract);
UPPER_CALLS(sampleset_trim);
