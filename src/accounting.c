/*
 * accounting.c -- exact counters per label set: CPU time, bytes and objects
 * allocated, time blocked in contended locks, and the application's own
 * counters (cpprof_counter_add).
 *
 * Why not sample.  A low-rate sampler (19 Hz of each thread's CPU time)
 * charging the set current at each tick sees 19 samples per CPU-second: a
 * tenant with an eighth of two busy cores over 20 s gets about 100, a 10%
 * error.  So CPU time is measured, not sampled:
 *
 *  - At each label switch the thread charges the set it leaves with the
 *    time since its previous charge point, read from the cycle counter
 *    (rdtsc, a few ns; CLOCK_MONOTONIC elsewhere), into a per-thread
 *    pending charge (accounting.h says when those reach the counters).
 *    That is wall time, which equals CPU time unless the thread was off
 *    the CPU, and a thread
 *    off the CPU for long (blocked, preempted for a timeslice) makes a long
 *    segment: a segment of SHORT_NS or more is charged instead from the
 *    thread's own CPU clock (an exact read, about 400 ns, amortised over at
 *    least SHORT_NS): its CPU since the previous exact read, less what the
 *    short segments since then were charged.  An overcharge (a short
 *    segment that blocked) is carried and taken off the next exact charge,
 *    so each thread's total stays its CPU time.
 *  - A thread that holds one set for long charges nothing at switches, so
 *    each accounted thread has a timer on its own CPU-time clock (the
 *    "accounting_hz" setting, default 19 per CPU-second) whose signal makes
 *    an exact charge to the current set.  The tick decides how fresh the
 *    counters are, not how accurate.  It uses its own signal and timers,
 *    so CPU profiles (SIGPROF, sampler.c) run independently of it.
 *
 * The price of measuring is two cycle-counter reads per scoped apply
 * (about 10 ns on the AMD EPYC this was built on; bench/accounting).  The
 * accounting_cpu=sampled setting is the other side of that trade: a switch
 * reads no clock, and the tick charges the thread's CPU since its previous
 * tick, exactly read, to the set current at the tick.  Each thread's total
 * stays exact; its split between sets is a sample, as precise as
 * accounting_hz makes it.
 *
 * Allocation: heap.c adds each allocation's size to thread-local totals
 * (no lock, no atomic); a label switch and thread exit flush them into the
 * set left.  Exact: every byte allocated while a thread holds a set is
 * charged to that set.  Lock waits come from contention.c's timed waits.
 *
 * Storage: the counters are embedded in each label set (labels.c), the
 * empty set's are `unlabelled` here.  A set reclaimed by the label cap's
 * reclaim (refcount zero) moves its counts into `retired`, so no count is
 * ever lost, and the set's labels are forgotten with it.
 *
 * A thread is accounted from its first label switch after the enable (the
 * registry gives no other hook into threads); its CPU and allocations
 * before that are not charged to any set.
 *
 * The tick signal stays cpprof's only while the program leaves it alone.
 * Every armed tick is in one table (`ticks`), so that when the program
 * changes the signal's disposition (siginterpose.c calls
 * accounting_yield_signal first) every timer can be deleted before the
 * program's handler is in place: no tick ever reaches it.  Accounting then
 * goes on without ticks (switches and thread exit still charge), and
 * stderr says so once.  A timer is deleted only through the table, so a
 * timer id the kernel hands to the program after that is never deleted by
 * a thread's exit.
 */
#define _GNU_SOURCE
#include "accounting.h"
#include "atfork.h"
#include "config.h"
#include "alloc.h"
#include "interpose.h"
#include "labels.h"
#include "sigbudget.h"
#include "sigonstack.h"
#include "sigowner.h"
#include "thread.h"
#include "util.h"
#include "warn.h"
#include "upper_calls.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


#define SHORT_NS 100000   /* segments from here on are charged exactly */
#define TICK_COOKIE 0x41434354 /* "ACCT" in the timer signal's si_value */

static struct acct_counters unlabelled, retired;
static pthread_mutex_t enable_mu = PTHREAD_MUTEX_INITIALIZER;
static int tick_signal;
static long tick_hz;

/* Every armed tick, by thread; allocated from glibc directly so that the
 * table is not charged to a set. */
struct tick {
    pid_t tid;
    timer_t timer;
};
static pthread_mutex_t ticks_mu ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;
static struct tick *ticks; /* under ticks_mu */
static size_t nticks, ticks_cap;
static atomic_int tick_yielded; /* the program took the signal over */
uint64_t acct_ns_per_tick32;     /* ns per clock tick, times 2^32 */

static pthread_mutex_t names_mu = PTHREAD_MUTEX_INITIALIZER;
static char name_store[ACCT_USER_MAX][ACCT_NAME_MAX + 1];
static const char *names[ACCT_USER_MAX];
static atomic_size_t nnames;

/* SIGNAL-SAFE */
static struct acct_counters *counters_of(const cpprof_labelset *set)
{
    return set ? labelset_counters(set) : &unlabelled;
}

/* ---- Clocks ----------------------------------------------------------- */

static uint64_t ns_to_ticks(uint64_t ns)
{
    return (uint64_t)(((unsigned __int128)ns << 32) /
                      (acct_ns_per_tick32 ? acct_ns_per_tick32 : 1));
}

/* The cycle counter's rate against CLOCK_MONOTONIC_RAW over 2 ms: each
 * end is read within a few tens of ns, so the rate is good to 1e-4. */
static void calibrate(void)
{
    int64_t n0 = clock_ns(CLOCK_MONOTONIC_RAW);
    uint64_t t0 = acct_clock_ticks();
    struct timespec pause = {0, 2000000};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
        ;
    int64_t n1 = clock_ns(CLOCK_MONOTONIC_RAW);
    uint64_t t1 = acct_clock_ticks();
    uint64_t dt = t1 - t0 ? t1 - t0 : 1;
    acct_ns_per_tick32 = (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / dt);
    acct_short_ticks = ns_to_ticks(SHORT_NS);
    acct_pending_max_ticks = ns_to_ticks(ACCT_PENDING_MAX_NS);
}

/* ---- Charging (the thread's own state) --------------------------------- */

/* SIGNAL-SAFE: moves a pending charge into its set's counter. */
static void flush_pending(struct acct_pending *p)
{
    if (p->ticks) {
        atomic_fetch_add_explicit(&counters_of(p->set)->cpu_ns,
                                  (uint64_t)acct_ticks_to_ns(p->ticks),
                                  memory_order_relaxed);
        p->ticks = 0;
    }
}

/* SIGNAL-SAFE: charges `set` with the thread's CPU since its last exact
 * read, less what the short segments since then were charged: they tile
 * the time from that read (exact_mark) to `short_end` without a gap, as
 * any longer segment would have made an exact read.  Returns the next
 * exact mark, the cycle counter after the read: the read (a system call,
 * about half a microsecond) is in `cpu`, so the next segment starts after
 * it rather than charging it a second time. */
static uint64_t charge_exact(struct acct_thread *t,
                             const cpprof_labelset *set, uint64_t short_end)
{
    int64_t cpu = clock_thread_cpu_ns();
    uint64_t mark = acct_clock_ticks();
    int64_t owed = cpu - t->cpu_mark - t->overcharge -
                   acct_ticks_to_ns(short_end - t->exact_mark);
    t->cpu_mark = cpu;
    t->exact_mark = mark;
    t->overcharge = owed < 0 ? -owed : 0;
    if (owed > 0)
        atomic_fetch_add_explicit(&counters_of(set)->cpu_ns, (uint64_t)owed,
                                  memory_order_relaxed);
    return mark;
}

/* The pending entry of `set`, made by evicting the older entry when
 * neither is set's.  The entry takes a reference to set, which the thread
 * still holds. */
static struct acct_pending *pending_entry(struct acct_thread *t,
                                          const cpprof_labelset *set)
{
    if (t->pending[0].set == set)
        return &t->pending[0];
    if (t->pending[1].set == set)
        return &t->pending[1];
    flush_pending(&t->pending[1]);
    labelset_drop(t->pending[1].set);
    t->pending[1] = t->pending[0];
    t->pending[0] = (struct acct_pending){labelset_hold(set), 0};
    return &t->pending[0];
}

/* Thread exit: every pending charge to its set, every reference back. */
static void drop_pending(struct acct_thread *t)
{
    for (int i = 0; i < 2; i++) {
        flush_pending(&t->pending[i]);
        labelset_drop(t->pending[i].set);
        t->pending[i].set = NULL;
    }
}

static void flush_allocations(struct acct_thread *t,
                              const cpprof_labelset *set)
{
    uint64_t bytes = t->bytes, objects = t->objects;
    if (!objects)
        return;
    struct acct_counters *c = counters_of(set);
    atomic_fetch_add_explicit(&c->alloc_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->alloc_objects, objects,
                              memory_order_relaxed);
    /* Subtracted, not zeroed: an allocation by a signal handler that
     * interrupted us since the reads above stays counted. */
    t->bytes -= bytes;
    t->objects -= objects;
}

/* SIGNAL-SAFE: the CPU-time tick of an accounted thread.  It walks no
 * stack, so it needs no room check: its frame 48 bytes and charge_exact's
 * 64 (gcc -fstack-usage, x86-64, -O2; 64 and 160 under ASan+UBSan), then
 * clock_gettime's, fit wherever the kernel could put its signal frame. */
static void on_tick(int signo, siginfo_t *si, void *uc)
{
    (void)signo, (void)uc;
    if (si->si_code != SI_TIMER || si->si_value.sival_int != TICK_COOKIE)
        return;
    int saved_errno = errno;
    struct acct_thread *t = &acct_self;
    if (t->last && !t->busy) {
        t->last = charge_exact(t, thread_current_labels(), t->last);
        flush_pending(&t->pending[0]);
        flush_pending(&t->pending[1]);
    }
    errno = saved_errno;
}

/* Adds a tick to the table; false when there is no room. */
static bool ticks_add(pid_t tid, timer_t timer)
{
    if (nticks == ticks_cap) {
        size_t cap = ticks_cap ? 2 * ticks_cap : 64;
        struct tick *grown = alloc_real_calloc(cap, sizeof *grown);
        if (!grown)
            return false;
        if (nticks)
            memcpy(grown, ticks, nticks * sizeof *grown);
        alloc_real_free(ticks);
        ticks = grown, ticks_cap = cap;
    }
    ticks[nticks++] = (struct tick){tid, timer};
    return true;
}

/* Arms the thread's tick on its CPU-time clock; without one (no timers
 * left, no room in the queued-signal budget, or the program has taken the
 * signal) the thread is still charged at its switches and exit. */
static void arm_tick(struct acct_thread *t)
{
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = tick_signal;
    ev.sigev_value.sival_int = TICK_COOKIE;
    ev._sigev_un._tid = gettid();
    long period = 1000000000L / tick_hz; /* 1 Hz: a whole second */
    struct timespec every = {period / 1000000000L, period % 1000000000L};
    struct itimerspec its = {every, every};
    timer_t timer;
    pthread_mutex_lock(&ticks_mu);
    if (!atomic_load(&tick_yielded) && sigbudget_take()) {
        if (timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &timer) != 0) {
            sigbudget_give();
        } else if (!ticks_add(gettid(), timer) ||
                   timer_settime(timer, 0, &its, NULL) != 0) {
            if (nticks && ticks[nticks - 1].timer == timer)
                nticks--;
            timer_delete(timer);
            sigbudget_give();
        } else {
            t->timer = timer;
        }
    }
    pthread_mutex_unlock(&ticks_mu);
}

/* Deletes the calling thread's tick, if the table still has it. */
static void disarm_tick(struct acct_thread *t)
{
    pid_t tid = gettid();
    pthread_mutex_lock(&ticks_mu);
    for (size_t i = 0; i < nticks; i++)
        if (ticks[i].tid == tid) {
            timer_delete(ticks[i].timer);
            sigbudget_give();
            ticks[i] = ticks[--nticks];
            break;
        }
    pthread_mutex_unlock(&ticks_mu);
    t->timer = NULL;
}

void accounting_yield_signal(int signo)
{
    if (!atomic_load(&accounting_on) || signo != tick_signal ||
        atomic_load(&tick_yielded))
        return;
    pthread_mutex_lock(&ticks_mu);
    if (!atomic_exchange(&tick_yielded, 1)) {
        for (size_t i = 0; i < nticks; i++) {
            timer_delete(ticks[i].timer);
            sigbudget_give();
        }
        nticks = 0;
        /* Ticks already queued go where SIG_IGN sends them, not to the
         * program's handler. */
        struct sigaction ignore = {0};
        ignore.sa_handler = SIG_IGN;
        __sigaction(signo, &ignore, NULL);
        warn_stderr("cpprof: the program set its own action for signal "
                    "%d, the accounting tick; accounting goes on without "
                    "it (CPU is charged at label switches and thread "
                    "exit)\n", signo);
    }
    pthread_mutex_unlock(&ticks_mu);
}

int accounting_tick_yielded(void)
{
    return atomic_load(&tick_yielded);
}

static void start_thread(struct acct_thread *t, uint64_t now)
{
    t->cpu_mark = clock_thread_cpu_ns();
    t->overcharge = 0;
    t->last = t->exact_mark = now;
    t->timer = NULL;
    arm_tick(t);
}

/* label_hooks.switch_slow (labelhooks.h). */
static void switch_slow(struct acct_thread *t, const cpprof_labelset *leaving,
                        uint64_t now)
{
    uint64_t d = now - t->last;
    if (!t->last) {
        start_thread(t, now);
    } else if (d >= acct_short_ticks) {
        t->last = charge_exact(t, leaving, t->last);
    } else {
        t->last = now;
        struct acct_pending *p = pending_entry(t, leaving);
        p->ticks += d;
        if (p->ticks >= acct_pending_max_ticks)
            flush_pending(p);
    }
    flush_allocations(t, leaving);
}

/* label_hooks.switch_sampled_slow (labelhooks.h): only the tick and exit
 * charge CPU, so `last` stays at the tick and no clock is read but the
 * first switch's. */
static void switch_sampled_slow(struct acct_thread *t,
                                const cpprof_labelset *leaving)
{
    if (!t->last)
        start_thread(t, acct_clock_ticks());
    flush_allocations(t, leaving);
}

/* label_hooks.thread_exiting: final charge, timer deleted. */
static void thread_exiting(const cpprof_labelset *current)
{
    struct acct_thread *t = &acct_self;
    t->busy = 1;
    atomic_signal_fence(memory_order_seq_cst);
    if (t->last) {
        if (t->timer)
            disarm_tick(t);
        charge_exact(t, current, t->last);
        t->last = 0;
        flush_allocations(t, current);
    }
    /* Also when not started: a fork child's thread has its parent's. */
    drop_pending(t);
    atomic_signal_fence(memory_order_seq_cst);
    t->busy = 0;
}

void accounting_lock_wait(int64_t ns)
{
    if (ns > 0 && atomic_load_explicit(&accounting_on, memory_order_relaxed))
        atomic_fetch_add_explicit(
            &counters_of(thread_current_labels())->lock_wait_ns,
            (uint64_t)ns, memory_order_relaxed);
}

/* ---- Enabling ------------------------------------------------------------ */

static int install_tick_handler(int signo)
{
    int rc = signal_claim_check(signo, on_tick);
    if (rc != 0)
        return rc > 0 ? 0 : rc;
    sigonstack_claim(signo);
    struct sigaction sa = {0};
    sa.sa_sigaction = on_tick;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    return __sigaction(signo, &sa, NULL) == 0 ? 0 : -errno;
}

/* fork(): ticks_mu is held across it (atfork.c).  The child's threads
 * have no timers and their CPU clocks start again from zero; its one
 * thread starts over at its next switch. */
static void ticks_lock(void) { pthread_mutex_lock(&ticks_mu); }
static void ticks_unlock(void) { pthread_mutex_unlock(&ticks_mu); }
ATFORK_CHILD static void accounting_atfork_child(void)
{
    nticks = 0; /* the parent's; they stay allocated, as after any fork */
    acct_self.last = 0;
    acct_self.timer = NULL;
    atfork_mutex_release(&ticks_mu);
}

int cpprof_accounting_enable(void)
{
    pthread_mutex_lock(&enable_mu);
    int rc = 0;
    if (!atomic_load(&accounting_on)) {
        tick_signal = (int)cfg_int(CFG_ACCOUNTING_SIGNAL);
        tick_hz = cfg_int(CFG_ACCOUNTING_HZ);
        int mode = strcmp(cfg_str(CFG_ACCOUNTING_CPU), "sampled") == 0
                       ? ACCT_SAMPLED
                       : ACCT_EXACT;
        rc = install_tick_handler(tick_signal);
        if (rc == 0) {
            calibrate();
            static const atfork_handlers on_fork = {ticks_lock, ticks_unlock,
                                                    accounting_atfork_child};
            atfork_add(ATFORK_ACCOUNTING, &on_fork);
            cfg_freeze(CFG_ACCOUNTING_SIGNAL);
            cfg_freeze(CFG_ACCOUNTING_HZ);
            cfg_freeze(CFG_ACCOUNTING_CPU);
            atomic_store(&accounting_on, mode);
        }
    }
    pthread_mutex_unlock(&enable_mu);
    return rc;
}

int accounting_enabled(void)
{
    return atomic_load(&accounting_on);
}

__attribute__((constructor)) static void accounting_from_environment(void)
{
    cfg_freeze(CFG_ACCOUNTING);
    if (cfg_int(CFG_ACCOUNTING)) {
        int rc = cpprof_accounting_enable();
        if (rc)
            warn_stderr("cpprof: CPPROF_ACCOUNTING=1: %s\n",
                    cpprof_strerror(rc));
    }
}

/* ---- User counters ------------------------------------------------------ */

static int valid_name(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > ACCT_NAME_MAX || (name[0] >= '0' && name[0] <= '9'))
        return 0;
    for (const char *c = name; *c; c++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') ||
              (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
            return 0;
    return 1;
}

/* The slot of `name`, registering it; -ENOSPC when every slot is taken. */
static int name_slot(const char *name)
{
    size_t n = atomic_load_explicit(&nnames, memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return (int)i;
    pthread_mutex_lock(&names_mu);
    n = atomic_load(&nnames);
    int slot = -ENOSPC;
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            slot = (int)i;
    if (slot < 0 && n < ACCT_USER_MAX) {
        strcpy(name_store[n], name);
        names[n] = name_store[n];
        atomic_store_explicit(&nnames, n + 1, memory_order_release);
        slot = (int)n;
    }
    pthread_mutex_unlock(&names_mu);
    return slot;
}

/* The set's user slots, allocated on first use from the allocator directly so the
 * bookkeeping is not charged to the set as an allocation. */
static _Atomic uint64_t *user_slots(struct acct_counters *c)
{
    _Atomic uint64_t *u = atomic_load_explicit(&c->user, memory_order_acquire);
    if (u)
        return u;
    _Atomic uint64_t *fresh = alloc_real_calloc(ACCT_USER_MAX, sizeof *fresh);
    if (!fresh)
        return NULL;
    if (atomic_compare_exchange_strong(&c->user, &u, fresh))
        return fresh;
    alloc_real_free(fresh);
    return u;
}

int cpprof_counter_add(const char *name, uint64_t value)
{
    if (!name || !valid_name(name))
        return -EINVAL;
    int slot = name_slot(name);
    if (slot < 0)
        return slot;
    _Atomic uint64_t *u = user_slots(counters_of(thread_current_labels()));
    if (!u)
        return -ENOMEM;
    atomic_fetch_add_explicit(&u[slot], value, memory_order_relaxed);
    return 0;
}

const char *const *accounting_user_names(size_t *n)
{
    *n = atomic_load_explicit(&nnames, memory_order_acquire);
    return names;
}

/* ---- Retiring and reading ------------------------------------------------ */

static void add_counters(struct acct_counters *to, struct acct_counters *from)
{
    atomic_fetch_add(&to->cpu_ns, atomic_load(&from->cpu_ns));
    atomic_fetch_add(&to->alloc_bytes, atomic_load(&from->alloc_bytes));
    atomic_fetch_add(&to->alloc_objects, atomic_load(&from->alloc_objects));
    atomic_fetch_add(&to->lock_wait_ns, atomic_load(&from->lock_wait_ns));
    _Atomic uint64_t *u = atomic_load(&from->user);
    _Atomic uint64_t *r = u ? user_slots(to) : NULL;
    for (size_t i = 0; r && i < ACCT_USER_MAX; i++)
        atomic_fetch_add(&r[i], atomic_load(&u[i]));
}

/* label_hooks.counters_retired: a set is being reclaimed (under the intern
 * lock); its counts move to the retired totals and its user slots go. */
static void counters_retired(struct acct_counters *c)
{
    add_counters(&retired, c);
    alloc_real_free((void *)atomic_load(&c->user));
}

static void read_counters(acct_row *row, struct acct_counters *c)
{
    row->cpu_ns = atomic_load(&c->cpu_ns);
    row->alloc_bytes = atomic_load(&c->alloc_bytes);
    row->alloc_objects = atomic_load(&c->alloc_objects);
    row->lock_wait_ns = atomic_load(&c->lock_wait_ns);
    _Atomic uint64_t *u = atomic_load(&c->user);
    for (size_t i = 0; i < ACCT_USER_MAX; i++)
        row->user[i] = u ? atomic_load(&u[i]) : 0;
}

struct row_list {
    acct_row *rows;
    size_t n, cap;
    int failed;
};

static acct_row *append_row(struct row_list *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        acct_row *grown = realloc(l->rows, cap * sizeof *grown);
        if (!grown) {
            l->failed = 1;
            return NULL;
        }
        l->rows = grown, l->cap = cap;
    }
    acct_row *r = &l->rows[l->n++];
    memset(r, 0, sizeof *r);
    return r;
}

/* Under the intern lock: takes a reference, reads later. */
static void collect_set(cpprof_labelset *set, void *arg)
{
    acct_row *r = append_row(arg);
    if (r) {
        r->kind = ACCT_ROW_SET;
        r->set = labelset_hold(set);
    }
}

static int by_set(const void *a, const void *b)
{
    const acct_row *x = a, *y = b;
    return (x->set > y->set) - (x->set < y->set);
}

struct thread_tally {
    acct_row *rows;
    size_t n;
    long unlabelled;
};

/* Under the registry lock. */
static void tally_thread(pid_t tid, const char *name,
                         const cpprof_labelset *labels, uint64_t task,
                         void *arg)
{
    (void)task;
    (void)tid, (void)name;
    struct thread_tally *t = arg;
    if (!labels) {
        t->unlabelled++;
        return;
    }
    acct_row key = {.set = (cpprof_labelset *)labels};
    acct_row *r = bsearch(&key, t->rows, t->n, sizeof key, by_set);
    if (r)
        r->threads++;
}

static int compare_labels(const cpprof_labelset *a, const cpprof_labelset *b)
{
    size_t na = cpprof_labelset_size(a), nb = cpprof_labelset_size(b);
    for (size_t i = 0; i < na && i < nb; i++) {
        int c = strcmp(labelset_key(a, i), labelset_key(b, i));
        if (!c)
            c = strcmp(labelset_value(a, i), labelset_value(b, i));
        if (c)
            return c;
    }
    return (na > nb) - (na < nb);
}

static int by_labels(const void *a, const void *b)
{
    return compare_labels(((const acct_row *)a)->set,
                          ((const acct_row *)b)->set);
}

static int row_is_empty(const acct_row *r)
{
    if (r->cpu_ns || r->alloc_bytes || r->alloc_objects || r->lock_wait_ns ||
        r->threads)
        return 0;
    for (size_t i = 0; i < ACCT_USER_MAX; i++)
        if (r->user[i])
            return 0;
    return 1;
}

int accounting_rows(acct_row **rows, size_t *n)
{
    struct row_list l = {0};
    labelset_foreach_interned(collect_set, &l);
    /* The unlabelled and retired rows go last; set their kinds through
     * the array, as the second append may have moved it. */
    append_row(&l);
    append_row(&l);
    if (l.failed) {
        accounting_rows_free(l.rows, l.n);
        return -ENOMEM;
    }
    size_t nsets = l.n - 2;
    l.rows[nsets].kind = ACCT_ROW_UNLABELLED;
    l.rows[nsets + 1].kind = ACCT_ROW_RETIRED;
    qsort(l.rows, nsets, sizeof *l.rows, by_set);
    struct thread_tally tally = {l.rows, nsets, 0};
    registry_foreach(tally_thread, &tally);
    l.rows[nsets].threads = tally.unlabelled;
    for (size_t i = 0; i < nsets; i++)
        read_counters(&l.rows[i], labelset_counters(l.rows[i].set));
    read_counters(&l.rows[nsets], &unlabelled);
    read_counters(&l.rows[nsets + 1], &retired);
    qsort(l.rows, nsets, sizeof *l.rows, by_labels);
    /* Unlabelled first, then sets with something to show, retired last
     * (once there is something retired). */
    size_t out = 0;
    acct_row first = l.rows[nsets];
    for (size_t i = 0; i < nsets; i++) {
        if (row_is_empty(&l.rows[i]))
            labelset_drop(l.rows[i].set);
        else
            l.rows[out++] = l.rows[i];
    }
    memmove(&l.rows[1], &l.rows[0], out * sizeof *l.rows);
    l.rows[0] = first;
    l.rows[out + 1] = l.rows[nsets + 1];
    *rows = l.rows;
    *n = out + 1 + !row_is_empty(&l.rows[out + 1]);
    return 0;
}

void accounting_rows_free(acct_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].kind == ACCT_ROW_SET)
            labelset_drop(rows[i].set);
    free(rows);
}

/* The label core reaches this module only through its hooks, registered
 * before any constructor could turn accounting on. */
__attribute__((constructor(102))) static void accounting_hooks(void)
{
    atomic_store(&label_hooks.switch_slow, switch_slow);
    atomic_store(&label_hooks.switch_sampled_slow, switch_sampled_slow);
    atomic_store(&label_hooks.thread_exiting, thread_exiting);
    atomic_store(&label_hooks.counters_retired, counters_retired);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(accounting_enabled);
UPPER_CALLS(accounting_rows);
UPPER_CALLS(accounting_rows_free);
UPPER_CALLS(accounting_tick_yielded);
UPPER_CALLS(accounting_user_names);
