/*
 * accounting.h -- exact per-label-set counters (accounting.c): CPU time,
 * bytes and objects allocated, time blocked in contended locks, and the
 * application's own counters, for ops tooling (/metrics, README
 * "Per-tenant memory and contention").
 *
 * The hot paths reach this module without a call while accounting is off
 * or in its common case: the allocator (heap.c) adds to thread-local
 * totals through accounting_alloc() below, and label switches charge the
 * set being left through the label core's inline acct_switch()
 * (labelhooks.h, where the per-set counters and the per-thread switch
 * record live, since the label core calls nothing above it).  Pending
 * charges reach the counters when they pass ACCT_PENDING_MAX_NS, at the
 * thread's CPU tick, when evicted, and at thread exit, so a reader sees
 * each thread's CPU at most 2 * ACCT_PENDING_MAX_NS late.
 */
#ifndef CPPROF_ACCOUNTING_H
#define CPPROF_ACCOUNTING_H

#include "own.h"
#include "cpprof.h"
#include "labelhooks.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Distinct names cpprof_counter_add() accepts in a process's life. */
#define ACCT_USER_MAX 32
/* Longest user counter name. */
#define ACCT_NAME_MAX 48

/* Pending charges are added to their set's counter from this size on. */
#define ACCT_PENDING_MAX_NS 1000000u

/* ns per tick of acct_clock_ticks(), times 2^32 (accounting.c's
 * calibration). */
extern uint64_t acct_ns_per_tick32;

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

/* contention.c: the calling thread waited `ns` for a contended lock. */
void accounting_lock_wait(int64_t ns);

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
