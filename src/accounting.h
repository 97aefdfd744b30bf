/*
 * accounting.h -- exact per-label-set counters (accounting.c): CPU time,
 * bytes and objects allocated, time blocked in contended locks, and the
 * application's own counters, for ops tooling (/metrics, README
 * "Per-tenant memory and contention").
 *
 * The hot paths reach this module through inline hooks that cost one
 * relaxed load and a predictable branch while accounting is off: the
 * allocator (heap.c) adds to thread-local totals, label switches
 * (thread.c) charge the set being left.  Counters live in the label set
 * itself (labels.c embeds struct acct_counters).
 *
 * A label switch is on every scoped apply, twice, so its common case is
 * inline here and touches only the thread's own memory: a short segment
 * is added to a per-thread pending charge for one of the last two sets
 * the thread left (a job runner alternates between its own set and a
 * job's), not to the set's shared counter.  Pending charges reach the
 * counters when they pass ACCT_PENDING_MAX_NS, at the thread's CPU tick,
 * when evicted, and at thread exit, so a reader sees each thread's CPU at
 * most 2 * ACCT_PENDING_MAX_NS late.  With accounting_cpu=sampled a switch
 * reads no clock at all: it only flushes allocation totals.
 */
#ifndef CPPROF_ACCOUNTING_H
#define CPPROF_ACCOUNTING_H

#include "own.h"
#include "cpprof.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Distinct names cpprof_counter_add() accepts in a process's life. */
#define ACCT_USER_MAX 32
/* Longest user counter name. */
#define ACCT_NAME_MAX 48

/* What one label set has been charged.  `user` is allocated on the set's
 * first cpprof_counter_add() (ACCT_USER_MAX slots, indexed as the names
 * were registered). */
struct acct_counters {
    _Atomic uint64_t cpu_ns, alloc_bytes, alloc_objects, lock_wait_ns;
    _Atomic(_Atomic uint64_t *) user;
};

/* Pending charges are added to their set's counter from this size on. */
#define ACCT_PENDING_MAX_NS 1000000u

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

/* The cycle counter's calibration (accounting.c): segments of
 * acct_short_ticks or more are charged from the thread's CPU clock, and
 * pending charges of acct_pending_max_ticks are flushed;
 * acct_ns_per_tick32 is ns per tick, times 2^32. */
extern uint64_t acct_short_ticks, acct_pending_max_ticks, acct_ns_per_tick32;

/* SIGNAL-SAFE: the cheap clock charged for short segments. */
static inline uint64_t acct_clock_ticks(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
/* The program is about to change the disposition of `signo`: if that is
 * the accounting tick, every tick timer is deleted and ticks stop for the
 * rest of the process's life (siginterpose.c). */
void accounting_yield_signal(int signo);

/* Whether that has happened (for /metrics and /debug/pprof/accounting). */
int accounting_tick_yielded(void);

#endif
}

/* SIGNAL-SAFE */
static inline int64_t acct_ticks_to_ns(uint64_t ticks)
{
    return (int64_t)(((unsigned __int128)ticks * acct_ns_per_tick32) >> 32);
}

/* heap.c: an allocation of n bytes at p (NULL: it failed, not counted).
 * The profilers' own allocations (own_busy) are not the set's. */
static inline void accounting_alloc(const void *p, size_t n)
{
    if (__builtin_expect(
            atomic_load_explicit(&accounting_on, memory_order_relaxed), 0) &&
        p && !own_busy) {
        acct_self.bytes += n;
        acct_self.objects++;
    }
}

/* Every case of accounting_switch() but the common one: under ACCT_EXACT
 * with the cycle counter read at the switch, under ACCT_SAMPLED (which
 * charges no CPU at switches) without. */
void accounting_switch_slow(struct acct_thread *t,
                            const cpprof_labelset *leaving, uint64_t now);
void accounting_switch_sampled_slow(struct acct_thread *t,
                                    const cpprof_labelset *leaving);

/* thread.c: the calling thread is about to stop holding `leaving` (NULL:
 * the empty set) and still holds it; `mode` is accounting_on.  Charges its
 * CPU since the last charge point (ACCT_EXACT) and flushes its allocation
 * totals into it.  Inline is the common case: a short segment (a thread
 * not started has `last` 0, so none is short), nothing allocated,
 * `leaving` one of the two pending sets; no call, no atomic, no
 * conversion.  ACCT_SAMPLED's common case is a started thread (`last`
 * set) that allocated nothing: nothing to do. */
static inline void accounting_switch(const cpprof_labelset *leaving, int mode)
{
    struct acct_thread *t = &acct_self;
    t->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    if (mode == ACCT_SAMPLED) {
        if (__builtin_expect(!t->last || t->objects, 0))
            accounting_switch_sampled_slow(t, leaving);
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
            accounting_switch_slow(t, leaving, now);
        }
    }
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
}

/* thread.c: the calling thread exits holding `current`: final charge,
 * timer deleted. */
void accounting_thread_exit(const cpprof_labelset *current);

/* contention.c: the calling thread waited `ns` for a contended lock. */
void accounting_lock_wait(int64_t ns);

/* labels.c: a set is being reclaimed; its counts move to the retired
 * totals and its user slots are freed.  Called under the intern lock. */
void accounting_retire(struct acct_counters *c);

/* ---- Readers (http_metrics.c) ------------------------------------------ */

enum acct_row_kind { ACCT_ROW_SET, ACCT_ROW_UNLABELLED, ACCT_ROW_RETIRED };

typedef struct {
    enum acct_row_kind kind;
    cpprof_labelset *set; /* ACCT_ROW_SET: with a reference */
    uint64_t cpu_ns, alloc_bytes, alloc_objects, lock_wait_ns;
    uint64_t user[ACCT_USER_MAX];
    long threads; /* registered threads holding the set now */
} acct_row;

/* Every row with something to show: the empty set's, each interned set's
 * (and the overflow set's) and the retired totals, in a stable order
 * (unlabelled first, sets by their labels, retired last).  Free with
 * accounting_rows_free().  Returns 0 or -ENOMEM. */
int accounting_rows(acct_row **rows, size_t *n);
void accounting_rows_free(acct_row *rows, size_t n);

/* The registered user counter names; *n of them, index = slot. */
const char *const *accounting_user_names(size_t *n);

/* Whether cpprof_accounting_enable() has run. */
int accounting_enabled(void);

/* The program is about to change the disposition of `signo`: if that is
 * the accounting tick, every tick timer is deleted and ticks stop for the
 * rest of the process's life (siginterpose.c). */
void accounting_yield_signal(int signo);

/* Whether that has happened (for /metrics and /debug/pprof/accounting). */
int accounting_tick_yielded(void);

#endif
