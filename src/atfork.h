/*
 * atfork.h -- fork() without exec leaves the child a clean profiler
 * (atfork.c): one pthread_atfork registration runs every module's fork
 * handlers in the order the modules' locks nest.
 */
#ifndef CPPROF_ATFORK_H
#define CPPROF_ATFORK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* The modules with fork handlers, in the order their locks nest: a lock
 * of an earlier level may be held while one of a later level is taken,
 * never the other way round, so prepare, taking them in this order, never
 * waits for a lock whose holder waits for one prepare has.  Allocation
 * reaches the collectors' spinlocks (a sampled malloc or free takes
 * heap.c's) from anywhere, under any of the mutexes above them; the
 * collectors take no other lock while they hold theirs.  The unwinder's
 * writer mutex is held while it reads the maps and builds tables, which
 * allocate: after every module that refreshes them, before the heap. */
enum atfork_level {
    ATFORK_TLS,           /* http_tls_fork.c: a GnuTLS reference, no lock */
    ATFORK_HTTP,          /* http.c: server_lock */
    ATFORK_CPU_PROFILE,   /* cpu_profile.c: the window lock */
    ATFORK_SAMPLER,       /* sampler.c: sampler_mu */
    ATFORK_CENSUS,        /* census.c: census_mu */
    ATFORK_TRACE,         /* trace.c: its start lock (held while it reads the
                             registry), the recording stopped */
    ATFORK_REGISTRY,      /* thread.c: the intern lock, then the registry */
    ATFORK_ACCOUNTING,    /* accounting.c: the tick table */
    ATFORK_OTEL,          /* otel.c: the process context's lock */
    ATFORK_UNWIND,        /* unwind_tables.c: the tables' writer mutex */
    ATFORK_HEAP,          /* heap.c: its spinlock */
    ATFORK_CONTENTION,    /* contention.c: the table, then the waits */
    ATFORK_THREADCREATE,  /* threadcreate.c: its table */
    ATFORK_WRAPPER,       /* zerocode.c: no lock, a wrapper's fork noted */
    ATFORK_WALL,          /* wall.c: no lock, the parent's window forgotten */
    ATFORK_LEVELS
};

/* A module's handlers: prepare takes its lock; parent releases it; child
 * drops what stayed in the parent and releases it, making only
 * async-signal-safe calls.  They run with own_busy set (own.h). */
typedef struct {
    void (*prepare)(void);
    void (*parent)(void);
    void (*child)(void);
} atfork_handlers;

/* Where the locks, the handlers' state and the child's code go.  After
 * fork, the first write to each page the parent and child share is a page
 * fault and a copy in whichever writes it, the parent too; so is the
 * child's first read of each page of code (fork does not copy the page
 * tables of file mappings), though that costs less; on a small VM a copy
 * costs about 25 us, as much as the rest of a fork+exit of a small
 * program (bench/fork).  With each module's lock on a page of its own and
 * its handlers in its own file's code, a child paid a dozen.  So:
 * - ATFORK_LOCK: the locks held across fork, all zero when unlocked, on
 *   one anonymous page of their own that fork gives the child zeroed
 *   (MADV_WIPEONFORK, atfork.c): the parent's page is not shared, so its
 *   release after fork copies nothing, and the child finds every lock
 *   free without writing a thing.  Where the page could not be set apart
 *   (a link without src/atfork.ld, an old kernel) the child releases
 *   them, as atfork_mutex_release and atfork_spin_release do.
 * - ATFORK_HELD: the state the handlers read, on one page of libcpprof's
 *   data, which the child writes only where it differs from what it
 *   would write: a read of a page the parent wrote costs the child
 *   nothing.  A cache line each, so that locks and state of different
 *   modules taken by different threads do not share one.
 * - ATFORK_CHILD: the functions the child runs (the handlers and what
 *   they call of cpprof's), on one page of code (src/atfork.ld). */
#define ATFORK_LOCK \
    __attribute__((section(".bss.cpprof_fork_locks"), aligned(64)))
#define ATFORK_HELD __attribute__((section("cpprof_fork_held"), aligned(64)))
#define ATFORK_CHILD __attribute__((section("cpprof_fork_child")))

/* Whether fork hands the child the ATFORK_LOCK page zeroed (atfork.c). */
extern bool atfork_locks_wiped;

/* The child's release of a mutex (a default one, ATFORK_LOCK) its
 * prepare took.  Wiped, it is free already.  Otherwise it is written back
 * to its initial state rather than unlocked, as glibc resets its own
 * locks in a child: the child is the only thread and the lock its own, so
 * the two leave the same mutex, but pthread_mutex_unlock's code is one
 * more page for the child.  ThreadSanitizer keeps its own record of who
 * holds the mutex, which only the call updates (and there the page is
 * never wiped). */
static inline void atfork_mutex_release(pthread_mutex_t *m)
{
#if defined(__SANITIZE_THREAD__)
    pthread_mutex_unlock(m);
#else
    if (!atfork_locks_wiped)
        *m = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
#endif
}

/* The child's release of a spin lock (ATFORK_LOCK) its prepare took. */
static inline void atfork_spin_release(atomic_flag *f)
{
    if (!atfork_locks_wiped)
        atomic_flag_clear_explicit(f, memory_order_release);
}

/* Registers `h` (static storage) for `level`, and the one pthread_atfork
 * registration on first use.  A module calls it before it first takes its
 * lock; calling it again is harmless. */
void atfork_add(enum atfork_level level, const atfork_handlers *h);

#endif
