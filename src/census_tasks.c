/*
 * census_tasks.c -- the census's reading of the parked tasks: grouped by
 * stack, label set and reason as they are read, so that what the census
 * keeps, and what every form of the goroutine profile then symbolizes,
 * encodes and sorts, grows with the distinct stacks rather than with the
 * tasks.
 *
 * A task read under the registry lock (task_foreach_parked) costs a hash
 * of its stack and a look in two tables, not a record of its own: a
 * stack seen before is found in the first, and its group (stack, set,
 * reason) in the second.  A distinct stack is kept once, in one flat
 * array of PCs, however many groups share it, as tasks labelled per
 * request do.  With `each` (census_take, for debug=2, which shows every
 * task) each task is listed too, 24 bytes with its group's number, the
 * room for all made before the walk, so that none is copied under the
 * lock as the list grows.
 *
 * The groups hold their tasks' own sets, marked afterwards
 * (CENSUS_TASK_KEY, CENSUS_WAIT_KEY; census_add_tasks, below): that
 * interns a merged set, which is calling into the registry, and it costs
 * one merge a group, not a task.  The threads that run a task now are
 * marked too.
 */
#include "census_int.h"
#include "labels.h"
#include "task.h"
#include "util.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A distinct stack: depth PCs at pcs[at]. */
struct stack {
    size_t at;
    unsigned depth, flags;
};

/* A group as read: its stack's number, and its tasks' set (a reference of
 * the reading's) and reason. */
struct group {
    uint32_t stack;
    const cpprof_labelset *labels;
    const char *reason;
    size_t count;
};

static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

struct reading {
    census *c;
    bool each;
    /* The tasks the census found running, sorted: one parked since is
     * left out, listed once, as its thread. */
    const uint64_t *running;
    size_t n_running;
    struct stack *stacks;
    size_t n_stacks, cap_stacks;
    uintptr_t *pcs;
    size_t n_pcs, cap_pcs;
    struct group *groups;
    size_t n_groups, cap_groups;
    size_t cap_tasks;
    struct hashindex stack_index, group_index;
};

static uint64_t stack_hash(const struct task_parked *t)
{
    uint64_t h = hash_mix(t->depth, t->flags);
    for (unsigned i = 0; i < t->depth; i++)
        h = hash_mix(h, t->pcs[i]);
    return h;
}

static bool same_stack(const void *ctx, size_t entry, const void *key)
{
    const struct reading *r = ctx;
    const struct task_parked *t = key;
    const struct stack *s = &r->stacks[entry];
    return s->depth == t->depth && s->flags == t->flags &&
           (t->depth == 0 ||
            memcmp(&r->pcs[s->at], t->pcs, t->depth * sizeof *t->pcs) == 0);
}

/* The number of t's stack, kept when new. */
static int intern_stack(struct reading *r, const struct task_parked *t,
                        uint32_t *number)
{
    uint64_t hash = stack_hash(t);
    struct hashindex_slot *slot =
        hashindex_find(&r->stack_index, hash, same_stack, r, t);
    if (!slot)
        return -ENOMEM;
    if (!slot->item) {
        int rc;
        if ((rc = ARRAY_RESERVE(r->stacks, r->n_stacks, r->cap_stacks, 1)) ||
            (rc = ARRAY_RESERVE(r->pcs, r->n_pcs, r->cap_pcs, t->depth)))
            return rc;
        r->stacks[r->n_stacks] = (struct stack){r->n_pcs, t->depth, t->flags};
        if (t->depth)
            memcpy(&r->pcs[r->n_pcs], t->pcs, t->depth * sizeof *t->pcs);
        r->n_pcs += t->depth;
        hashindex_set(&r->stack_index, slot, hash, r->n_stacks++);
    }
    *number = (uint32_t)(slot->item - 1);
    return 0;
}

/* A group's key. */
struct group_key {
    uint32_t stack;
    const cpprof_labelset *labels;
    const char *reason;
};

static bool same_group(const void *ctx, size_t entry, const void *key)
{
    const struct reading *r = ctx;
    const struct group_key *k = key;
    const struct group *g = &r->groups[entry];
    return g->stack == k->stack && g->labels == k->labels &&
           g->reason == k->reason;
}

/* The number of t's group, counted in it; made when new. */
static int count_in_group(struct reading *r, const struct task_parked *t,
                          uint32_t stack, uint32_t *number)
{
    struct group_key key = {stack, t->labels, t->reason};
    uint64_t hash =
        hash_mix(hash_mix(stack, (uintptr_t)t->labels), (uintptr_t)t->reason);
    struct hashindex_slot *slot =
        hashindex_find(&r->group_index, hash, same_group, r, &key);
    if (!slot)
        return -ENOMEM;
    if (!slot->item) {
        int rc = ARRAY_RESERVE(r->groups, r->n_groups, r->cap_groups, 1);
        if (rc)
            return rc;
        r->groups[r->n_groups] = (struct group){
            stack, labelset_hold(t->labels), t->reason, 0};
        hashindex_set(&r->group_index, slot, hash, r->n_groups++);
    }
    *number = (uint32_t)(slot->item - 1);
    r->groups[*number].count++;
    return 0;
}

/* Lists t, with its group's number.  The list grows here only past the
 * room made before the walk (tasks created meanwhile). */
static int list_task(struct reading *r, const struct task_parked *t,
                     uint32_t group)
{
    census *c = r->c;
    int rc = ARRAY_RESERVE(c->tasks, c->n_tasks, r->cap_tasks, 1);
    if (rc == 0)
        c->tasks[c->n_tasks++] = (census_task){t->number, t->parked_ns,
                                               group, t->creator,
                                               t->created_at};
    return rc;
}

/* task_foreach_parked's fn, under the registry lock: memory only. */
static int read_one(const struct task_parked *t, void *arg)
{
    struct reading *r = arg;
    if (r->n_running &&
        bsearch(&t->id, r->running, r->n_running, sizeof *r->running, by_id))
        return 0;
    uint32_t stack, group;
    int rc = intern_stack(r, t, &stack);
    if (rc == 0)
        rc = count_in_group(r, t, stack, &group);
    if (rc == 0 && r->each)
        rc = list_task(r, t, group);
    return rc;
}

/* Gives the groups read to the census, with their stacks. */
static int hand_over(struct reading *r)
{
    census *c = r->c;
    c->parked = malloc((r->n_groups + 1) * sizeof *c->parked);
    if (!c->parked) {
        for (size_t i = 0; i < r->n_groups; i++)
            labelset_drop(r->groups[i].labels);
        free(r->pcs);
        return -ENOMEM;
    }
    c->parked_pcs = r->pcs;
    for (size_t i = 0; i < r->n_groups; i++) {
        const struct group *g = &r->groups[i];
        const struct stack *s = &r->stacks[g->stack];
        c->parked[i] = (census_parked){g->labels, g->reason, g->count,
                                       s->depth, s->flags,
                                       s->depth ? &r->pcs[s->at] : NULL};
        c->parked_tasks += g->count;
    }
    c->n_parked = r->n_groups;
    return 0;
}

/* Reads the tasks parked now into c->parked, grouped by stack, label set
 * and reason, each group holding a reference to its tasks' own set (which
 * census_add_tasks marks, census.h), and with `each` every task into
 * c->tasks; but the `running` ones (sorted ids), which the census lists
 * as their threads already.  c has no parked tasks before.  On an error (-ENOMEM) c holds
 * what was read, for census_release.  Takes the registry lock as
 * task_foreach_parked does. */
static int census_read_parked(census *c, bool each, const uint64_t *running,
                              size_t n_running)
{
    struct reading r = {.c = c, .each = each, .running = running,
                        .n_running = n_running};
    int rc = 0;
    if (each) {
        /* A few more may park meanwhile. */
        r.cap_tasks = task_live_count() + 64;
        c->tasks = malloc(r.cap_tasks * sizeof *c->tasks);
        rc = c->tasks ? 0 : -ENOMEM;
    }
    if (rc == 0)
        rc = task_foreach_parked(read_one, &r);
    int handed = hand_over(&r);
    free(r.stacks);
    free(r.groups);
    hashindex_free(&r.stack_index);
    hashindex_free(&r.group_index);
    return rc ? rc : handed;
}

/* ---- Tasks: parked ones listed, running ones marked ------------------- */

int census_mark_set(const cpprof_labelset **set, size_t n,
                    const char *const *kv)
{
    cpprof_labelset *marker, *merged;
    int rc = cpprof_labels(&marker, n, kv);
    if (rc)
        return rc;
    rc = labelset_merge(&merged, *set, marker);
    cpprof_labelset_release(marker);
    if (rc)
        return rc;
    labelset_drop(*set);
    *set = merged;
    return 0;
}

/* `set` plus CENSUS_TASK_KEY=`kind` (and CENSUS_WAIT_KEY=`reason` when
 * not NULL), replacing *set's reference with the merged set's. */
static int mark_task(const cpprof_labelset **set, const char *kind,
                     const char *reason)
{
    const char *kv[] = {CENSUS_TASK_KEY, kind, CENSUS_WAIT_KEY, reason};
    return census_mark_set(set, reason ? 4 : 2, kv);
}

/* Marks the threads that run a task now (census_attach_labels read which), and
 * gives their tasks' ids, sorted, in *ids (n of them; free it). */
static int mark_runners(census *c, uint64_t **ids, size_t *n)
{
    size_t cap = 0;
    *ids = NULL;
    *n = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < c->n; i++) {
        if (!c->threads[i].task)
            continue;
        rc = mark_task(&c->threads[i].labels, "running", NULL);
        if (rc == 0)
            rc = ARRAY_RESERVE(*ids, *n, cap, 1);
        if (rc == 0)
            (*ids)[(*n)++] = c->threads[i].task;
    }
    if (*n > 0)
        qsort(*ids, *n, sizeof **ids, by_id);
    return rc;
}

/* The marked sets made so far in one census: the groups of parked tasks
 * share few (set, reason) pairs (a pair has a group per stack it parks
 * at), and merging interns a set (a lock and a hash) that the pair's
 * first group made already. */
struct marked {
    const cpprof_labelset *set; /* the task's, without a reference */
    const char *reason;
    const cpprof_labelset *merged; /* a reference of the cache's */
};
#define MARKED_CACHE 16

/* mark_task(set, "parked", reason), from the cache where it can. */
static int mark_parked(struct marked *cache, size_t *n,
                       const cpprof_labelset **set, const char *reason)
{
    for (size_t i = 0; i < *n; i++)
        if (cache[i].set == *set && cache[i].reason == reason) {
            labelset_drop(*set);
            *set = labelset_hold(cache[i].merged);
            return 0;
        }
    const cpprof_labelset *was = *set;
    int rc = mark_task(set, "parked", reason);
    if (rc == 0 && *n < MARKED_CACHE)
        cache[(*n)++] = (struct marked){was, reason, labelset_hold(*set)};
    return rc;
}

/* Adds the parked tasks to the census, in groups (census_read_parked), and
 * with `each` one by one, marking their sets. */
int census_add_tasks(census *c, bool each)
{
    uint64_t *running;
    size_t n_running;
    int rc = mark_runners(c, &running, &n_running);
    if (rc == 0)
        rc = census_read_parked(c, each, running, n_running);
    free(running);
    struct marked cache[MARKED_CACHE];
    size_t cached = 0;
    for (size_t i = 0; rc == 0 && i < c->n_parked; i++)
        rc = mark_parked(cache, &cached, &c->parked[i].labels,
                         c->parked[i].reason);
    for (size_t i = 0; i < cached; i++)
        labelset_drop(cache[i].merged);
    return rc;
}
