/*
 * contention.c -- the block and mutex profilers behind /debug/pprof/block
 * and /debug/pprof/mutex.
 *
 * pthread_mutex_lock/unlock, pthread_rwlock_rdlock/wrlock and
 * pthread_cond_wait/timedwait are defined here and exported, so they
 * interpose on glibc's whether the library is linked or preloaded.  Both
 * profiles are off by default, as in Go; while they are off every call is
 * glibc's after two relaxed loads.  While one is on, a lock first tries
 * the lock; only when that fails (contention) are timestamps taken, so an
 * uncontended lock costs a trylock (bench/locks measures both).
 *
 * glibc's own mutex and rwlock functions are reached through their
 * __pthread_* aliases, bound with .symver at link time: no dlsym, so they
 * work from the first lock any constructor takes.  The condition-variable
 * waits have no such alias; they are looked up with dlsym(RTLD_NEXT) on
 * first use (no lock is held by us then, and a condvar wait is never the
 * first thing a loader does).
 *
 * block, as Go's SetBlockProfileRate(rate) defines it: a wait of d ns is
 * recorded when d >= rate, or with probability d/rate; a recorded shorter
 * wait counts rate/d events and rate ns, so that the totals estimate all
 * waits.  Recorded at the waiter, with the waiter's stack.
 *
 * mutex, as Go (1.19+, sync.Mutex) defines it: the delay a contended lock
 * caused, charged to the stack of the thread that unlocked it.  A waiter is
 * sampled with probability 1/fraction; while it waits, each unlock of that
 * mutex is charged with the waiting time its sampled waiters accrued since
 * they started or since the previous unlock, whichever is later, so the
 * whole of each sampled wait is split among the holders that caused it.
 * A charge counts `fraction` events and fraction x delay, as Go's does.
 * Only pthread mutexes feed it: rwlock and condition-variable waits appear
 * in block only.  Neither profile records cpprof's own waits and locks
 * (its threads', and a program thread's inside cpprof's work): they are
 * the profiler's, not the program's.  Timed and clock variants of the locks are not
 * interposed: their waits are not profiled.
 */
#define _GNU_SOURCE
#include "contention.h"
#include "accounting.h"
#include "atfork.h"
#include "collect.h"
#include "own.h"
#include "config.h"
#include "interpose.h"
#include "stacktab.h"
#include "trace.h"
#include "util.h"
#include "upper_calls.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__)
#define GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define GLIBC_BASE "GLIBC_2.17"
#else
#error "contention.c: glibc's base symbol version for this architecture"
#endif
#define GLIBC_ALIAS(ours, theirs) \
    __asm__(".symver " #ours "," #theirs "@" GLIBC_BASE)

#ifndef CPPROF_SANITIZER_INTERCEPTS
GLIBC_ALIAS(glibc_mutex_lock, __pthread_mutex_lock);
GLIBC_ALIAS(glibc_mutex_trylock, __pthread_mutex_trylock);
GLIBC_ALIAS(glibc_mutex_unlock, __pthread_mutex_unlock);
GLIBC_ALIAS(glibc_rwlock_rdlock, __pthread_rwlock_rdlock);
GLIBC_ALIAS(glibc_rwlock_tryrdlock, __pthread_rwlock_tryrdlock);
GLIBC_ALIAS(glibc_rwlock_wrlock, __pthread_rwlock_wrlock);
GLIBC_ALIAS(glibc_rwlock_trywrlock, __pthread_rwlock_trywrlock);
extern int glibc_mutex_lock(pthread_mutex_t *);
extern int glibc_mutex_trylock(pthread_mutex_t *);
extern int glibc_mutex_unlock(pthread_mutex_t *);
extern int glibc_rwlock_rdlock(pthread_rwlock_t *);
extern int glibc_rwlock_tryrdlock(pthread_rwlock_t *);
extern int glibc_rwlock_wrlock(pthread_rwlock_t *);
extern int glibc_rwlock_trywrlock(pthread_rwlock_t *);
#else
/* ASan and TSan (--enable-asan-ubsan, --enable-tsan) intercept the
 * __pthread_* names too, with interceptors whose real function they never
 * find (glibc 2.34 keeps those names only as compat symbols): bound to
 * them, the first lock jumps to address 0.  A sanitized build reaches the
 * next definition of the public names instead, the sanitizer's interceptor
 * or glibc, so the sanitizer also sees every lock. */
#define NEXT_LOCK_FN(ours, name, type)                                  \
    static int ours(type *l)                                            \
    {                                                                   \
        static void *f;                                                 \
        return ((int (*)(type *))interpose_next(&f, name))(l);          \
    }
NEXT_LOCK_FN(glibc_mutex_lock, "pthread_mutex_lock", pthread_mutex_t)
NEXT_LOCK_FN(glibc_mutex_trylock, "pthread_mutex_trylock", pthread_mutex_t)
NEXT_LOCK_FN(glibc_mutex_unlock, "pthread_mutex_unlock", pthread_mutex_t)
NEXT_LOCK_FN(glibc_rwlock_rdlock, "pthread_rwlock_rdlock", pthread_rwlock_t)
NEXT_LOCK_FN(glibc_rwlock_tryrdlock, "pthread_rwlock_tryrdlock",
             pthread_rwlock_t)
NEXT_LOCK_FN(glibc_rwlock_wrlock, "pthread_rwlock_wrlock", pthread_rwlock_t)
NEXT_LOCK_FN(glibc_rwlock_trywrlock, "pthread_rwlock_trywrlock",
             pthread_rwlock_t)
#endif

typedef int (*cond_wait_fn)(pthread_cond_t *, pthread_mutex_t *);
typedef int (*cond_timedwait_fn)(pthread_cond_t *, pthread_mutex_t *,
                                 const struct timespec *);
static cond_wait_fn glibc_cond_wait;
static cond_timedwait_fn glibc_cond_timedwait;

/* Samples by stack, values as in contention.h; under table_lock. */
static atomic_flag table_lock ATFORK_LOCK = ATOMIC_FLAG_INIT;
static stacktab *block_tab, *mutex_tab;

/* Mutexes with sampled waiters: few at a time, so a small table scanned
 * whole.  sum is the sum over its waiters of the time each one's charge
 * runs from; last is the time of the last charged unlock. */
#define WAIT_SLOTS 64
struct wait_slot {
    const pthread_mutex_t *m;
    long n;
    int64_t sum, last;
};
static atomic_flag wait_lock ATFORK_LOCK = ATOMIC_FLAG_INIT;
static struct wait_slot waits[WAIT_SLOTS];
/* The sum of n: unlock's quick test, and the child's fork handler's. */
static atomic_long sampled_waiters ATFORK_HELD;

/* Whether the calling thread runs cpprof's code: a collector (which must
 * not come back in), or cpprof's own work (own_work), whose waits
 * for work (a window thread's for the next request was the longest wait
 * in the block profile) and locks are the profiler's, not the
 * program's. */
static inline bool cpprofs_own(void)
{
    return own_busy || own_work;
}

static inline bool profiling_off(void)
{
    return cpprofs_own() || (cfg_int(CFG_BLOCK_PROFILE_RATE) <= 0 &&
                             cfg_int(CFG_MUTEX_PROFILE_FRACTION) <= 0 &&
                             !trace_recording());
}

/* Whether a condition wait is timed: for the block profile or a trace. */
static inline bool cond_untimed(void)
{
    return cpprofs_own() ||
           (cfg_int(CFG_BLOCK_PROFILE_RATE) <= 0 && !trace_recording());
}

/* ---- Recording (with own_busy set) -------------------------------- */

static void record(stacktab **tab, const uintptr_t *pcs, size_t depth,
                   unsigned flags, uint64_t gen, int64_t count_milli,
                   int64_t delay)
{
    int64_t v[CONT_NVALUES] = {count_milli, delay};
    collect_spin_lock(&table_lock);
    if (!*tab)
        *tab = stacktab_new(CONT_NVALUES);
    if (*tab)
        stacktab_add(*tab, pcs, depth, flags, gen, NULL, v);
    collect_spin_unlock(&table_lock);
}

/* A wait of d ns ended (called from wait_timed, called from an
 * interposer): sampled and recorded as Go's blockevent does. */
static __attribute__((noinline)) void block_event(int64_t d)
{
    long rate = cfg_int(CFG_BLOCK_PROFILE_RATE);
    if (rate <= 0)
        return;
    if (d <= 0)
        d = 1;
    if (d < rate && (int64_t)(collect_rand() % (uint64_t)rate) > d)
        return;
    uintptr_t pcs[STACK_MAX_FRAMES];
    unsigned flags;
    uint64_t gen;
    /* Drops block_event and the wait wrapper; the interposer's caller is
     * the leaf. */
    size_t depth = collect_stack(3, pcs, STACK_MAX_FRAMES, &flags, &gen);
    if (d < rate)
        record(&block_tab, pcs, depth, flags, gen, 1000 * rate / d, rate);
    else
        record(&block_tab, pcs, depth, flags, gen, 1000, d);
}

static struct wait_slot *slot_of(const pthread_mutex_t *m)
{
    for (int i = 0; i < WAIT_SLOTS; i++)
        if (waits[i].m == m)
            return &waits[i];
    return NULL;
}

/* A sampled waiter starts waiting on m at t0; false when the table is
 * full and the wait goes unsampled. */
static bool waiter_join(const pthread_mutex_t *m, int64_t t0)
{
    collect_spin_lock(&wait_lock);
    struct wait_slot *s = slot_of(m);
    if (!s && (s = slot_of(NULL)) != NULL)
        *s = (struct wait_slot){m, 0, 0, 0};
    if (s) {
        s->n++;
        s->sum += t0;
        atomic_fetch_add(&sampled_waiters, 1);
    }
    collect_spin_unlock(&wait_lock);
    return s != NULL;
}

static void waiter_leave(const pthread_mutex_t *m, int64_t t0)
{
    collect_spin_lock(&wait_lock);
    struct wait_slot *s = slot_of(m);
    s->sum -= t0 > s->last ? t0 : s->last;
    if (--s->n == 0)
        s->m = NULL;
    atomic_fetch_sub(&sampled_waiters, 1);
    collect_spin_unlock(&wait_lock);
}

/* The unlocking thread's charge: what m's sampled waiters waited since
 * their start or the last charge. */
static int64_t take_charge(const pthread_mutex_t *m)
{
    int64_t delay = 0;
    collect_spin_lock(&wait_lock);
    struct wait_slot *s = slot_of(m);
    if (s && s->n > 0) {
        int64_t now = clock_mono_ns();
        delay = s->n * now - s->sum;
        s->sum = s->n * now;
        s->last = now;
    }
    collect_spin_unlock(&wait_lock);
    return delay;
}

static __attribute__((noinline)) void charge_unlocker(const pthread_mutex_t *m)
{
    own_busy = 1;
    int64_t delay = take_charge(m);
    long fraction = cfg_int(CFG_MUTEX_PROFILE_FRACTION);
    if (delay > 0 && fraction > 0) {
        uintptr_t pcs[STACK_MAX_FRAMES];
        unsigned flags;
        uint64_t gen;
        size_t depth = collect_stack(2, pcs, STACK_MAX_FRAMES, &flags, &gen);
        record(&mutex_tab, pcs, depth, flags, gen, 1000 * fraction,
               delay * fraction);
    }
    own_busy = 0;
}

/* ---- Contended paths ------------------------------------------------------ */

typedef int (*lock_fn)(void *);
/* A wait long enough to show in a trace being recorded. */
static __attribute__((noinline)) void trace_wait_event(int64_t t0,
                                                       int64_t t1,
                                                       bool is_lock)
{
    uintptr_t pcs[STACK_MAX_FRAMES];
    unsigned flags;
    uint64_t gen;
    /* As block_event: the interposer's caller is the leaf. */
    size_t depth = collect_stack(3, pcs, STACK_MAX_FRAMES, &flags, &gen);
    trace_lock_wait(t0, t1, is_lock, pcs, depth);
}

/* Waits with `lock` on a lock whose trylock failed: timed, the waiter
 * joined to the mutex profile's table when `mutex` is non-NULL and drawn.
 * A wait for a lock (`is_lock`, not a condition) is also charged to the
 * thread's label set by accounting.c. */
static __attribute__((noinline)) int wait_timed(lock_fn lock, void *l,
                                                const pthread_mutex_t *mutex,
                                                bool is_lock)
{
    long fraction = cfg_int(CFG_MUTEX_PROFILE_FRACTION);
    own_busy = 1;
    bool sampled = mutex && fraction > 0 &&
                   collect_rand() % (uint64_t)fraction == 0;
    int64_t t0 = clock_mono_ns();
    sampled = sampled && waiter_join(mutex, t0);
    own_busy = 0;
    int rc = lock(l);
    own_busy = 1;
    int64_t t1 = clock_mono_ns();
    if (sampled)
        waiter_leave(mutex, t0);
    if (rc == 0)
        block_event(t1 - t0);
    if (rc == 0 && trace_recording() && t1 - t0 >= trace_lock_threshold_ns())
        trace_wait_event(t0, t1, is_lock);
    if (rc == 0 && is_lock)
        accounting_lock_wait(t1 - t0);
    own_busy = 0;
    return rc;
}

static int mutex_lock_fn(void *m) { return glibc_mutex_lock(m); }
static int rdlock_fn(void *l) { return glibc_rwlock_rdlock(l); }
static int wrlock_fn(void *l) { return glibc_rwlock_wrlock(l); }

/* ---- The interposed functions ------------------------------------------- */

EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
    if (profiling_off())
        return glibc_mutex_lock(m);
    int rc = glibc_mutex_trylock(m);
    if (rc == EBUSY) {
        rc = wait_timed(mutex_lock_fn, m, m, true);
        COLLECT_NO_TAIL_CALL();
    }
    return rc;
}

EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
    if (__builtin_expect(atomic_load_explicit(&sampled_waiters,
                                              memory_order_relaxed) > 0, 0) &&
        !cpprofs_own())
        charge_unlocker(m);
    return glibc_mutex_unlock(m);
}

EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t *l)
{
    if (profiling_off())
        return glibc_rwlock_rdlock(l);
    int rc = glibc_rwlock_tryrdlock(l);
    if (rc == EBUSY) {
        rc = wait_timed(rdlock_fn, l, NULL, true);
        COLLECT_NO_TAIL_CALL();
    }
    return rc;
}

EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t *l)
{
    if (profiling_off())
        return glibc_rwlock_wrlock(l);
    int rc = glibc_rwlock_trywrlock(l);
    if (rc == EBUSY) {
        rc = wait_timed(wrlock_fn, l, NULL, true);
        COLLECT_NO_TAIL_CALL();
    }
    return rc;
}

struct cond_args {
    pthread_cond_t *c;
    pthread_mutex_t *m;
    const struct timespec *abstime;
};

static int cond_wait_fn_(void *a)
{
    struct cond_args *w = a;
    cond_wait_fn f = interpose_next((void **)&glibc_cond_wait,
                                    "pthread_cond_wait");
    return f(w->c, w->m);
}

static int cond_timedwait_fn_(void *a)
{
    struct cond_args *w = a;
    cond_timedwait_fn f = interpose_next((void **)&glibc_cond_timedwait,
                                         "pthread_cond_timedwait");
    return f(w->c, w->m, w->abstime);
}

/* A condition wait is a block event whatever ends it, as sync.Cond.Wait is
 * in Go; a timed wait that times out is not (it waited for time, not for
 * another thread). */
EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    struct cond_args a = {c, m, NULL};
    if (cond_untimed())
        return cond_wait_fn_(&a);
    int rc = wait_timed(cond_wait_fn_, &a, NULL, false);
    COLLECT_NO_TAIL_CALL();
    return rc;
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abstime)
{
    struct cond_args a = {c, m, abstime};
    if (cond_untimed())
        return cond_timedwait_fn_(&a);
    int rc = wait_timed(cond_timedwait_fn_, &a, NULL, false);
    COLLECT_NO_TAIL_CALL();
    return rc;
}

/* ---- Go's API -------------------------------------------------------------- */

static void set_long(const char *name, long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%ld", v);
    cpprof_set(name, buf);
}

void cpprof_set_block_profile_rate(long rate_ns)
{
    long max = 1L << 40; /* the setting's limit (config.c) */
    set_long("block_profile_rate",
             rate_ns <= 0 ? 0 : rate_ns > max ? max : rate_ns);
}

int cpprof_set_mutex_profile_fraction(int fraction)
{
    int previous = (int)cfg_int(CFG_MUTEX_PROFILE_FRACTION);
    if (fraction >= 0)
        set_long("mutex_profile_fraction",
                 fraction > 1000000000 ? 1000000000 : fraction);
    return previous;
}

/* ---- Reading it back ------------------------------------------------------- */

int block_snapshot(sampleset **out)
{
    return sampleset_copy_locked(&block_tab, CONT_NVALUES, &table_lock, out);
}

int mutex_snapshot(sampleset **out)
{
    return sampleset_copy_locked(&mutex_tab, CONT_NVALUES, &table_lock, out);
}

/* ---- fork ----------------------------------------------------------------- */

static void atfork_prepare(void)
{
    collect_spin_lock(&table_lock);
    collect_spin_lock(&wait_lock);
}

static void atfork_parent(void)
{
    collect_spin_unlock(&wait_lock);
    collect_spin_unlock(&table_lock);
}

/* The child has only the forking thread: no waiter of the parent's is
 * waiting here.  Almost always there was none: the slots are written
 * only if one was (atfork.h). */
ATFORK_CHILD static void atfork_child(void)
{
    if (atomic_load(&sampled_waiters) != 0) {
        for (int i = 0; i < WAIT_SLOTS; i++)
            waits[i].m = NULL;
        atomic_store(&sampled_waiters, 0);
    }
    atfork_spin_release(&wait_lock);
    atfork_spin_release(&table_lock);
}

__attribute__((constructor)) static void contention_init(void)
{
    static const atfork_handlers on_fork = {atfork_prepare, atfork_parent,
                                            atfork_child};
    atfork_add(ATFORK_CONTENTION, &on_fork);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(block_snapshot);
UPPER_CALLS(mutex_snapshot);
