/*
 * atfork.h -- fork() without exec leaves the child a clean profiler
 * (atfork.c): one pthread_atfork registration runs every module's fork
 * handlers in the order the modules' locks nest.
 */
#ifndef CPPROF_ATFORK_H
#define CPPROF_ATFORK_H

#include <pthread.h>

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
    ATFORK_WRAPPER,       /* http_zerocode.c: no lock, a wrapper's fork noted */
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

/* Where the handlers' state and the child's code go.  After fork the
 * child's first write to each page it shares with the parent is a page
 * fault (a copy), and so is its first read of each page of code (fork
 * does not copy the page tables of file mappings); on a small VM each
 * costs about 25 us, as much as the rest of a fork+exit of a small
 * program (bench/fork).  With each module's lock on a page of its own
 * and its handlers in its own file's code, a child paid a dozen.  So the
 * locks held across fork and what else the child handlers write are
 * ATFORK_HELD, and the functions the child runs (the handlers and what
 * they call of cpprof's) ATFORK_CHILD: each a section of its own, which
 * libcpprof.so's link puts on one page (src/atfork.ld).  A cache line
 * each, so that locks of different modules taken by different threads do
 * not share one.  A child handler writes only what differs from what it
 * would write: a read of a page the parent wrote costs the child nothing. */
#define ATFORK_HELD __attribute__((section("cpprof_fork_held"), aligned(64)))
#define ATFORK_CHILD __attribute__((section("cpprof_fork_child")))

/* The child's release of a mutex its prepare took: the mutex (a default
 * one, ATFORK_HELD) is written back to its initial state rather than
 * unlocked, as glibc resets its own locks in a child.  The child is the
 * only thread and the lock its own, so the two leave the same mutex, but
 * pthread_mutex_unlock's code is one more page the child faults in, about
 * 25 us at every fork (bench/fork).  ThreadSanitizer keeps its own record
 * of who holds the mutex, which only the call updates. */
static inline void atfork_mutex_release(pthread_mutex_t *m)
{
#if defined(__SANITIZE_THREAD__)
    pthread_mutex_unlock(m);
#else
    *m = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
#endif
}

/* Registers `h` (static storage) for `level`, and the one pthread_atfork
 * registration on first use.  A module calls it before it first takes its
 * lock; calling it again is harmless. */
void atfork_add(enum atfork_level level, const atfork_handlers *h);

#endif
