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
 * itself (labels.c embeds struct acct_counters), so charging is an atomic
 * add to memory the thread already references.
 */
#ifndef CPPROF_ACCOUNTING_H
#define CPPROF_ACCOUNTING_H

#include "collect.h"
#include "cpprof.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

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

/* The calling thread's accounting state.  heap.c adds to bytes and objects;
 * accounting.c moves them into the current set at each label switch. */
struct acct_thread {
    uint64_t bytes, objects;  /* allocated since the last flush */
    volatile int busy;        /* switch code running: the tick keeps off */
    volatile int started;     /* marks below are valid; timer armed */
    uint64_t last;            /* clock ticks at the last charge point */
    int64_t cpu_mark;         /* thread CPU ns at the last exact read */
    int64_t estimated;        /* ns charged from clock ticks since then */
    void *timer;              /* timer_t of the thread's CPU-time tick */
};

extern __thread struct acct_thread acct_self
    __attribute__((tls_model("initial-exec")));
extern atomic_int accounting_on;

/* heap.c: an allocation of n bytes at p (NULL: it failed, not counted).
 * The profilers' own allocations (collect_busy) are not the set's. */
static inline void accounting_alloc(const void *p, size_t n)
{
    if (__builtin_expect(
            atomic_load_explicit(&accounting_on, memory_order_relaxed), 0) &&
        p && !collect_busy) {
        acct_self.bytes += n;
        acct_self.objects++;
    }
}

/* thread.c: the calling thread is about to stop holding `leaving` (NULL:
 * the empty set) and still holds it.  Charges its CPU since the last
 * charge point and flushes its allocation totals into it. */
void accounting_switch(const cpprof_labelset *leaving);

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

#endif
