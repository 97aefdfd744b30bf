/*
 * labelhooks.h -- what the label core (labels.c, thread.c) keeps for the
 * modules above it, and how it reaches them without calling up.
 *
 * The label core calls nothing above it.  Where a module above must act
 * on a label event -- a set becomes current, a thread cpprof started runs,
 * a thread exits, a set is reclaimed -- it registers a function in
 * `label_hooks` at its init, and the label core calls it only when one is
 * registered, so an event nobody listens to costs one load and a
 * predictable branch.
 *
 * Per-label-set accounting (accounting.c) sits on every label switch, so
 * its common case cannot be a call: the state that case touches -- the
 * per-set counters, the thread's switch record, whether accounting is on
 * and the clock it charges by -- lives here, with the switch's inline
 * charge, and accounting.c reads it and owns the rest (the slow paths,
 * registered as hooks, the tick, the readers).  A short segment is added
 * to a per-thread pending charge for one of the last two sets the thread
 * left (a job runner alternates between its own set and a job's), not to
 * the set's shared counter; accounting.h says when pending charges reach
 * the counters.  With accounting_cpu=sampled a switch reads no clock at
 * all: it only flushes allocation totals.
 */
#ifndef CPPROF_LABELHOOKS_H
#define CPPROF_LABELHOOKS_H

#include "cpprof.h"
#include "util.h"
#include <stdatomic.h>
#include <stdint.h>

/* ---- Per-set and per-thread accounting state ---------------------------- */

/* What one label set has been charged (labels.c embeds one in every set).
 * `user` is allocated on the set's first cpprof_counter_add()
 * (ACCT_USER_MAX slots, indexed as the names were registered). */
struct acct_counters {
    _Atomic uint64_t cpu_ns, alloc_bytes, alloc_objects, lock_wait_ns;
    _Atomic(_Atomic uint64_t *) user;
};

/* CPU charged to `set` (NULL: the empty set) by short segments and not yet
 * added to its counter.  The entry holds a reference to the set, so the
 * set outlives the charge. */
struct acct_pending {
    const cpprof_labelset *set;
    uint64_t ticks; /* of the cycle counter */
};

/* The calling thread's accounting state.  heap.c adds to bytes and objects;
 * accounting.c moves them into the current set at each label switch. */
struct acct_thread {
    uint64_t bytes, objects;  /* allocated since the last flush */
    volatile int busy;        /* switch code running: the tick keeps off */
    uint64_t last;            /* clock ticks at the last charge point; 0
                                 until the thread's first switch (marks
                                 below invalid, no timer) */
    uint64_t exact_mark;      /* clock ticks at the last exact read */
    int64_t cpu_mark;         /* thread CPU ns at that read */
    int64_t overcharge;       /* ns short segments were charged beyond the
                                 CPU clock, off the next exact charge */
    struct acct_pending pending[2]; /* [0] the set left most recently */
    void *timer;              /* timer_t of the thread's CPU-time tick */
};

extern __thread struct acct_thread acct_self
    __attribute__((tls_model("initial-exec")));

/* accounting_on: 0 until cpprof_accounting_enable(), then how CPU time is
 * charged (the accounting_cpu setting): at every label switch, or only at
 * the thread's tick. */
enum { ACCT_EXACT = 1, ACCT_SAMPLED = 2 };
extern atomic_int accounting_on;

/* Segments of acct_short_ticks or more are charged from the thread's CPU
 * clock, and pending charges of acct_pending_max_ticks are flushed (set
 * by accounting.c's calibration before accounting_on). */
extern uint64_t acct_short_ticks, acct_pending_max_ticks;

/* SIGNAL-SAFE: the cheap clock charged for short segments. */
static inline uint64_t acct_clock_ticks(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return (uint64_t)clock_mono_ns();
#endif
}

/* ---- Hooks of the modules above ----------------------------------------- */

typedef void label_set_hook(const cpprof_labelset *set);

/* What label_hooks.traced is told. */
enum label_trace_what {
    LABEL_TRACE_SWITCH, /* the thread's current set became `set` */
    LABEL_TRACE_START,  /* the thread starts, holding `set` */
    LABEL_TRACE_EXIT    /* the thread exits */
};

struct label_hooks {
    /* otel.c, once the OpenTelemetry context is on: `set` (NULL: none)
     * becomes the calling thread's current set; called before the
     * replaced set's reference goes.  On every switch, so read inline. */
    label_set_hook *_Atomic set_current;
    /* trace.c, only while a trace window or the flight recorder records
     * (NULL otherwise): a label event on the calling thread, which runs
     * task `task` (its id, 0: none).  On every switch, so read inline. */
    void (*_Atomic traced)(enum label_trace_what what,
                           const cpprof_labelset *set, uint64_t task);
    /* sampler_timers.c: a thread created through the label core starts,
     * before its start function. */
    void (*_Atomic thread_started)(void);
    /* task.c: the calling thread exits; called first, while the thread
     * still holds its current set (the task's, when it runs one). */
    void (*_Atomic thread_ending)(void);
    /* accounting.c: the calling thread exits holding `set`. */
    label_set_hook *_Atomic thread_exiting;
    /* accounting.c and otel.c: a set is being reclaimed, under the intern
     * lock; its counters' extra storage and its published record (NULL
     * when it has none) go. */
    void (*_Atomic counters_retired)(struct acct_counters *c);
    void (*_Atomic record_freed)(void *record);
    /* accounting.c: every case of acct_switch() but the common one:
     * under ACCT_EXACT with the cycle counter read at the switch, under
     * ACCT_SAMPLED (which charges no CPU at switches) without.  Called
     * with t->busy set. */
    void (*_Atomic switch_slow)(struct acct_thread *t,
                                const cpprof_labelset *leaving,
                                uint64_t now);
    void (*_Atomic switch_sampled_slow)(struct acct_thread *t,
                                        const cpprof_labelset *leaving);
};

/* Registered by storing into the member (atomic_store); never cleared,
 * but for `traced`, which is there only while it records. */
extern struct label_hooks label_hooks;

/* The calling thread is about to stop holding `leaving` (NULL: the empty
 * set) and still holds it; `mode` is accounting_on.  Charges its CPU
 * since the last charge point (ACCT_EXACT) and flushes its allocation
 * totals into it.  Inline is the common case: a short segment (a thread
 * not started has `last` 0, so none is short), nothing allocated,
 * `leaving` one of the two pending sets; no call, no atomic, no
 * conversion.  ACCT_SAMPLED's common case is a started thread (`last`
 * set) that allocated nothing: nothing to do. */
static inline void acct_switch(const cpprof_labelset *leaving, int mode)
{
    struct acct_thread *t = &acct_self;
    t->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    if (mode == ACCT_SAMPLED) {
        if (__builtin_expect(!t->last || t->objects, 0))
            atomic_load_explicit(&label_hooks.switch_sampled_slow,
                                 memory_order_relaxed)(t, leaving);
    } else {
        uint64_t now = acct_clock_ticks(), d = now - t->last;
        struct acct_pending *p = &t->pending[t->pending[1].set == leaving];
        if (__builtin_expect(d < acct_short_ticks && !t->objects &&
                                 p->set == leaving &&
                                 p->ticks < acct_pending_max_ticks,
                             1)) {
            t->last = now;
            p->ticks += d;
        } else {
            atomic_load_explicit(&label_hooks.switch_slow,
                                 memory_order_relaxed)(t, leaving, now);
        }
    }
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
}

#endif
