/*
 * sampler_ring.c -- the collector's side of the ring that the profiling
 * signal's handler fills (sampler_signal.c): each sample drained into the
 * session's stack table (and into the trace, while one records), a walk
 * the handler put off done again first from its copy of the stack.  Apart
 * from sampler_signal.c because none of it runs in a handler.
 *
 * Code with no table yet.  A sample that meets code mapped since the last
 * refresh (a plugin dlopened a moment ago) would keep only the frames
 * below it.  Its handler nudges the collector to build the table and, if
 * one of SNAPSHOTS buffers is free, copies the registers and the top 16 KB
 * of the stack into it (unwind_snapshot_take: one process_vm_readv); the
 * collector walks the copy again once the table is built, before the
 * sample enters the profile.  With every buffer busy the sample keeps its
 * partial stack and STACK_NO_TABLE, as before.
 *
 * Code unloaded since.  A sample keeps the generation of the
 * mappings its walk saw (unwind.h), one word from the table the walk
 * already holds, and its stack table entry is keyed by it, so that the
 * builder resolves its PCs against the object that was mapped when it
 * was taken, not one dlopened at the same address before the profile is
 * built.  cpu_profile.c pins the generation for the window and the build.
 * A put-off walk is done again only if no object went away since its
 * sample (its code may be another object's by now); so that a plugin
 * unloaded soon after it was loaded keeps its samples' stacks, the thread
 * that dlcloses it does the pending walks itself first
 * (sampler_before_unload, from dlinterpose.c), while the plugin is still
 * mapped and in the tables: the collector may come after the unload.
 */
#define _GNU_SOURCE
#include "sampler_int.h"
#include "collect.h"
#include "labels.h"
#include "trace.h"
#include "unwind.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Walks put-off walk i again, from its stack's copy, with the tables as
 * they are, unless an object was unloaded since the sample (then its
 * partial walk stands) or another thread has taken it. */
static void walk_put_off(struct session *s, int i)
{
    struct put_off *p = &s->put_off[i];
    int ready = PUT_OFF_READY;
    if (!atomic_compare_exchange_strong(&p->state, &ready, PUT_OFF_WALKING))
        return;
    struct slot *slot = p->slot;
    size_t depth = unwind_snapshot_walk(&s->snapshots[i], slot->pcs,
                                        STACK_MAX_FRAMES, &slot->flags,
                                        &slot->gen);
    if (depth)
        slot->depth = (unsigned)depth;
    atomic_store(&p->state, PUT_OFF_DONE);
}

/* A put-off sample's walk, done again with the table its handler asked
 * for (built here if the collector has not yet), unless a dlclose did it
 * already; its buffer back. */
static void finish_walk(struct session *s, struct slot *slot)
{
    int i = slot->snapshot;
    if (atomic_exchange(&s->tables_wanted, false))
        unwind_refresh_if_loaded();
    walk_put_off(s, i);
    while (atomic_load(&s->put_off[i].state) != PUT_OFF_DONE)
        sched_yield(); /* a dlclosing thread is walking it */
    atomic_store(&s->put_off[i].state, PUT_OFF_FREE);
    atomic_fetch_and(&s->snapshots_busy, ~(1ull << i));
    slot->snapshot = -1;
}

/* Not from a signal handler; counted in `sampler_in_handler` like
 * sampler_thread_started, so that the session stays.  With walks put
 * off, the tables are brought up to date first: by this thread, or by the
 * collector, which may be building them right now for a walk it finishes
 * (then the writer's lock waits for it): the collector may have taken the
 * want already, and this thread would walk its pending snapshots again
 * without the table. */
void sampler_before_unload(void)
{
    atomic_fetch_add(&sampler_in_handler, 1);
    struct session *s = atomic_load(&sampler_active);
    if (s && (atomic_exchange(&s->tables_wanted, false) |
              (atomic_load(&s->snapshots_busy) != 0)))
        unwind_refresh_if_loaded();
    for (int i = 0; s && i < SNAPSHOTS; i++)
        walk_put_off(s, i);
    atomic_fetch_sub(&sampler_in_handler, 1);
}

static int compare_timer_tid(const void *key, const void *entry)
{
    pid_t x = *(const pid_t *)key;
    pid_t y = ((const struct thread_timer *)entry)->tid;
    return (x > y) - (x < y);
}

/* Thread tid's signal got through: one of its samples came in. */
static void note_sampled(struct session *s, pid_t tid)
{
    struct thread_timer *t =
        bsearch(&tid, s->timers, s->ntimers, sizeof *t, compare_timer_tid);
    if (t)
        t->sampled = true;
}

/* Moves every published slot into s->samples. */
void sampler_ring_drain(struct session *s)
{
    for (;;) {
        struct slot *slot = &s->ring[s->tail & s->mask];
        size_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
        if (seq != s->tail + 1)
            return;
        if (slot->snapshot >= 0)
            finish_walk(s, slot);
        if (!slot->in_collector)
            slot->depth = (unsigned)collect_drop_wrappers(slot->pcs,
                                                          slot->depth);
        int64_t values[2] = {slot->weight, slot->weight * s->period};
        if (stacktab_add(s->samples, slot->pcs, slot->depth, slot->flags,
                         slot->gen, slot->labels, values) != 0)
            atomic_fetch_add(&s->lost, slot->weight);
        else
            s->drained += slot->weight;
        note_sampled(s, slot->tid);
        if (trace_recording() && !slot->in_collector)
            trace_cpu_sample(slot->tid, slot->when, slot->pcs, slot->depth,
                             slot->flags & STACK_LEAF_EXACT, slot->labels);
        labelset_drop(slot->labels);
        atomic_store_explicit(&slot->seq, s->tail + s->mask + 1,
                              memory_order_release);
        s->tail++;
    }
}
