/*
 * wall.c -- the wall-clock profile: where every thread's time goes, on or
 * off CPU, with its labels.
 *
 * A CPU profile sees a thread only while it runs, a census only at one
 * instant; a tenant whose jobs are slow but not expensive (waiting on a
 * lock, a pipe, a sleep) shows in neither.  This profile takes a census
 * (census_take_stacks) every 1/wall_hz on average (jittered, against
 * aliasing with periodic work) over the window and counts every
 * thread of the program once per census, running or blocked, weighted by
 * the time planned since the previous census (about 1/wall_hz, or more
 * when spaced out for the budget), not the time elapsed: a census that ran
 * late (a loaded machine) would otherwise make one instant stand for
 * all the time it was late.  Values samples/count and
 * wall/nanoseconds, as fgprof's.  Each sample carries the thread's labels
 * plus WALL_STATE_KEY, its state: "running" when it walked its own stack,
 * else the system call the census found it blocked in (a parked task: its
 * reason).  So nothing here is a second walker: blocked threads are read
 * from outside and never signalled (no EINTR), running ones answer the
 * census's one-shot timer, and a thread that has not run since the last
 * census costs one clock read (the census's still threads).
 *
 * Cost: a census costs about one clock read per still thread and the
 * /proc listing, more for threads that moved, so it grows with the thread
 * count.  Each census's CPU (the caller's and the crew's helpers') is
 * measured, and the next is put off so that censuses use at most
 * wall_cpu_percent of one CPU whatever the thread count: fewer censuses a
 * second rather than fewer threads a census (every thread is in every
 * census, so shares stay unbiased), and the profile states the rate
 * achieved.  cpprof's own threads (labelled pprof_internal) are left out:
 * the census's caller is one of them.
 *
 * One wall profile at a time (`active`), as Go allows one CPU profile; a
 * CPU profile may run beside it (the census's signal is not the CPU
 * sampler's).
 */
#define _GNU_SOURCE
#include "wall.h"
#include "atfork.h"
#include "census.h"
#include "census_crew.h"
#include "config.h"
#include "labels.h"
#include "util.h"
#include "upper_calls.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

/* How often a window asks whether it should go on. */
#define CHECK_NS 100000000LL

/* (thread's set, state) -> that set plus WALL_STATE_KEY=state.  The
 * states are static strings (or a task's reason, which the program keeps),
 * compared by pointer. */
struct state_set {
    const cpprof_labelset *labels; /* held: a pointer reused by another set
                                      would otherwise hit */
    const char *state;
    const cpprof_labelset *merged; /* held */
};

struct wall_profile {
    stacktab *tab;
    wall_missing *missing;
    size_t n_missing, cap_missing;
    struct state_set *sets;
    size_t n_sets, cap_sets;
    int64_t last_tick_ns; /* monotonic: when the last census began */
    int64_t first_cpu_ns; /* the first census's CPU (next_tick) */
    int64_t last_cpu_ns;  /* the last one's */
    int64_t interval_ns;  /* 1/wall_hz */
    uint64_t rng;         /* jittered()'s state, never 0 */
    wall_stats stats;
};

static atomic_bool active;

/* ---- States ------------------------------------------------------------- */

struct syscall_name {
    long nr;
    const char *name;
};

/* The calls a thread is found waiting in, by name: the rest are named by
 * number (`syscall_NR`), which `ausyscall` turns into a name. */
static const struct syscall_name syscall_names[] = {
    {SYS_read, "read"},         {SYS_write, "write"},
    {SYS_readv, "readv"},       {SYS_writev, "writev"},
    {SYS_pread64, "pread64"},   {SYS_pwrite64, "pwrite64"},
    {SYS_openat, "openat"},     {SYS_close, "close"},
    {SYS_futex, "futex"},       {SYS_nanosleep, "nanosleep"},
    {SYS_clock_nanosleep, "nanosleep"},
    {SYS_ppoll, "poll"},        {SYS_pselect6, "select"},
    {SYS_epoll_pwait, "epoll_wait"},
    {SYS_accept4, "accept"},    {SYS_connect, "connect"},
    {SYS_recvfrom, "recvfrom"}, {SYS_recvmsg, "recvmsg"},
    {SYS_sendto, "sendto"},     {SYS_sendmsg, "sendmsg"},
    {SYS_wait4, "wait"},        {SYS_waitid, "wait"},
    {SYS_rt_sigtimedwait, "sigtimedwait"},
    {SYS_rt_sigsuspend, "sigsuspend"},
    {SYS_fsync, "fsync"},       {SYS_fdatasync, "fdatasync"},
    {SYS_flock, "flock"},       {SYS_fcntl, "fcntl"},
    {SYS_io_getevents, "io_getevents"},
    {SYS_msgrcv, "msgrcv"},     {SYS_semtimedop, "semop"},
    {SYS_sched_yield, "sched_yield"},
#ifdef SYS_poll
    {SYS_poll, "poll"},
#endif
#ifdef SYS_select
    {SYS_select, "select"},
#endif
#ifdef SYS_epoll_wait
    {SYS_epoll_wait, "epoll_wait"},
#endif
#ifdef SYS_accept
    {SYS_accept, "accept"},
#endif
#ifdef SYS_pause
    {SYS_pause, "pause"},
#endif
#ifdef SYS_semop
    {SYS_semop, "semop"},
#endif
#ifdef SYS_io_uring_enter
    {SYS_io_uring_enter, "io_uring_enter"},
#endif
#ifdef SYS_epoll_pwait2
    {SYS_epoll_pwait2, "epoll_wait"},
#endif
};

/* Room for "syscall_" and a number, for each call number a window meets
 * that has no name above; interned here so states compare by pointer. */
#define NUMBERED_MAX 64
static char numbered[NUMBERED_MAX][32];
static long numbered_nr[NUMBERED_MAX];
static size_t n_numbered; /* under `active` */

static const char *numbered_name(long nr)
{
    for (size_t i = 0; i < n_numbered; i++)
        if (numbered_nr[i] == nr)
            return numbered[i];
    if (n_numbered == NUMBERED_MAX)
        return "syscall";
    snprintf(numbered[n_numbered], sizeof numbered[0], "syscall_%ld", nr);
    numbered_nr[n_numbered] = nr;
    return numbered[n_numbered++];
}

static const char *thread_state(const census_thread *t)
{
    if (t->syscall == CENSUS_RAN || t->walked_late)
        return "running";
    if (t->syscall == CENSUS_UNREAD)
        return "unknown";
    if (t->syscall < 0)
        return "blocked";
    for (size_t i = 0; i < sizeof syscall_names / sizeof *syscall_names; i++)
        if (syscall_names[i].nr == t->syscall)
            return syscall_names[i].name;
    return numbered_name(t->syscall);
}

/* The thread's set plus its state, from the cache or merged and kept. */
static int state_set(wall_profile *w, const cpprof_labelset *labels,
                     const char *state, const cpprof_labelset **out)
{
    for (size_t i = 0; i < w->n_sets; i++)
        if (w->sets[i].labels == labels && w->sets[i].state == state) {
            *out = w->sets[i].merged;
            return 0;
        }
    if (ARRAY_RESERVE(w->sets, w->n_sets, w->cap_sets, 1) != 0)
        return -ENOMEM;
    const char *kv[] = {WALL_STATE_KEY, state};
    cpprof_labelset *marker, *merged;
    int rc = cpprof_labels(&marker, 2, kv);
    if (rc)
        return rc;
    rc = labelset_merge(&merged, labels, marker);
    cpprof_labelset_release(marker);
    if (rc)
        return rc;
    w->sets[w->n_sets++] = (struct state_set){
        labels ? labelset_hold(labels) : NULL, state, merged};
    *out = merged;
    return 0;
}

/* Whether the set marks one of cpprof's own threads. */
static bool is_own(const cpprof_labelset *set)
{
    size_t n = set ? cpprof_labelset_size(set) : 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(labelset_key(set, i), "pprof_internal") == 0)
            return true;
    return false;
}

/* ---- Samples ------------------------------------------------------------ */

/* Why a running thread's sample has no stack: the census read it from
 * outside once it had blocked, so that stack is of a later moment, in
 * the next call it waits in; shown, it would count running time there. */
#define LATE_STACK "ran, then blocked before its stack was read"

static int add_missing(wall_profile *w, const char *reason,
                       const cpprof_labelset *set, const int64_t *values)
{
    for (size_t i = 0; i < w->n_missing; i++) {
        wall_missing *m = &w->missing[i];
        if (m->labels == set && strcmp(m->reason, reason) == 0) {
            m->values[0] += values[0];
            m->values[1] += values[1];
            return 0;
        }
    }
    if (ARRAY_RESERVE(w->missing, w->n_missing, w->cap_missing, 1) != 0)
        return -ENOMEM;
    wall_missing *m = &w->missing[w->n_missing++];
    snprintf(m->reason, sizeof m->reason, "%s", reason);
    m->labels = labelset_hold(set);
    m->values[0] = values[0];
    m->values[1] = values[1];
    return 0;
}

static int add_thread(wall_profile *w, const census_thread *t,
                      int64_t weight_ns)
{
    if (is_own(t->labels))
        return 0;
    const cpprof_labelset *set;
    int rc = state_set(w, t->labels, thread_state(t), &set);
    if (rc)
        return rc;
    const int64_t values[2] = {1, weight_ns};
    if (t->walked_late)
        return add_missing(w, LATE_STACK, set, values);
    if (t->missing[0] || t->depth == 0)
        return add_missing(w, t->missing, set, values);
    return stacktab_add(w->tab, t->pcs, t->depth, t->flags, 0, set, values);
}

/* A group of parked tasks, its state their reason, each weighted as a
 * thread is. */
static int add_parked(wall_profile *w, const census_parked *p,
                      int64_t weight_ns)
{
    const cpprof_labelset *set;
    int rc = state_set(w, p->labels, p->reason, &set);
    if (rc)
        return rc;
    const int64_t values[2] = {(int64_t)p->count,
                               (int64_t)p->count * weight_ns};
    if (p->depth == 0)
        return add_missing(w, CENSUS_TASK_NO_STACK, set, values);
    return stacktab_add(w->tab, p->pcs, p->depth, p->flags, 0, set, values);
}

/* What censuses cost so far: this thread's CPU, the crew's and the
 * handlers' on the running threads they walked. */
static int64_t census_cpu_ns(void)
{
    unsigned helpers;
    return clock_thread_cpu_ns() + census_crew_cpu_ns(&helpers) +
           census_handlers_cpu_ns();
}

/* One census planned for `at`, each thread weighted by `weight_ns`.  One
 * that begins well after `at` was held up by busy CPUs, and a census held
 * up that way begins, as a rule, when fewer threads want a CPU: the
 * profile says how many were (threads that ran then are under-counted). */
static int tick(wall_profile *w, int64_t at, int64_t weight_ns)
{
    int64_t now = clock_mono_ns();
    if (now - at > w->interval_ns / 2)
        w->stats.late++;
    int64_t cpu = census_cpu_ns();
    census c;
    int rc = census_take_stacks(&c);
    if (rc)
        return rc;
    for (size_t i = 0; rc == 0 && i < c.n; i++)
        rc = add_thread(w, &c.threads[i], weight_ns);
    for (size_t i = 0; rc == 0 && i < c.n_parked; i++)
        rc = add_parked(w, &c.parked[i], weight_ns);
    census_release(&c);
    cpu = census_cpu_ns() - cpu;
    if (w->stats.ticks == 0)
        w->first_cpu_ns = cpu;
    w->last_cpu_ns = cpu;
    w->stats.cpu_ns += cpu;
    w->stats.ticks++;
    w->last_tick_ns = now;
    return rc;
}

/* ---- The window --------------------------------------------------------- */

/* A fork during a window leaves the window's thread in the parent: a
 * forked server (http_forks.c) may take a wall profile of its own. */
static void no_lock(void) {}
ATFORK_CHILD static void forget_window(void)
{
    atomic_store(&active, false);
}

int wall_start(wall_profile **out)
{
    static const atfork_handlers on_fork = {no_lock, no_lock, forget_window};
    atfork_add(ATFORK_WALL, &on_fork);
    if (atomic_exchange(&active, true))
        return -EBUSY;
    wall_profile *w = calloc(1, sizeof *w);
    if (w)
        w->tab = stacktab_new(2);
    if (!w || !w->tab) {
        free(w);
        atomic_store(&active, false);
        return -ENOMEM;
    }
    w->stats.hz = cfg_int(CFG_WALL_HZ);
    w->interval_ns = 1000000000LL / w->stats.hz;
    w->rng = (uint64_t)clock_mono_ns() | 1;
    census_time_handlers(true);
    *out = w;
    return 0;
}

static void sleep_until(int64_t mono_ns)
{
    struct timespec ts = {mono_ns / 1000000000LL, mono_ns % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
           EINTR)
        ;
}

/* A spacing drawn evenly from [interval/2, 3*interval/2): 1/hz on
 * average, but never in step with a program whose work repeats at a
 * fixed period (a job cycle, a poll loop), which censuses at a fixed
 * period would see in the same few phases every time (aliasing).
 * xorshift64, seeded per window from the clock. */
static int64_t jittered(wall_profile *w)
{
    uint64_t x = w->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w->rng = x;
    return w->interval_ns / 2 + (int64_t)(x % (uint64_t)w->interval_ns);
}

/* What a census costs that its clocks hold: not the kernel's delivery of
 * its signals to the running threads, nor this thread's wake-ups between
 * censuses.  bench/wall with 100 threads measured the process's CPU at
 * about 5% above what the censuses counted, so they are paced to 95% of
 * the budget. */
#define COUNTED_SHARE 0.95

/* When the next census may begin: a jittered 1/hz after the last, or
 * later, so that the window's censuses stay within the CPU budget, the
 * next one counted in (at the last one's cost) so that it does not end
 * over.  The first reads every thread's files and builds the unwinder's
 * tables once for the window (tens of ms): charged at once it would hold
 * back the next ones for seconds, so it is spread over the window
 * instead, the rest paced at what the budget leaves once it is paid for
 * (at least half the budget: a first census dearer than the window's
 * whole budget is the one overrun, and the profile's CPU figure says
 * so). */
static int64_t next_tick(wall_profile *w, int64_t start, int64_t end)
{
    int64_t next = w->last_tick_ns + jittered(w);
    double rate = cfg_int(CFG_WALL_CPU_PERCENT) / 100.0 * COUNTED_SHARE;
    double rest_rate = rate - (double)w->first_cpu_ns / (double)(end - start);
    if (rest_rate < rate / 2)
        rest_rate = rate / 2;
    int64_t coming = w->stats.ticks > 1 ? w->last_cpu_ns : 0;
    int64_t budget_end =
        start + (int64_t)((w->stats.cpu_ns - w->first_cpu_ns + coming) /
                          rest_rate);
    if (budget_end > next) {
        w->stats.slowed++;
        return budget_end;
    }
    return next;
}

int wall_run(wall_profile *w, long seconds, int (*going_on)(void *arg),
             void *arg)
{
    int64_t start = clock_mono_ns();
    int64_t end = start + seconds * 1000000000LL;
    int64_t next_check = start + CHECK_NS;
    w->stats.start_ns = clock_ns(CLOCK_REALTIME);
    int rc = 0;
    for (int64_t at = start; rc == 0 && at < end; at = next_tick(w, start, end)) {
        while (rc == 0 && next_check <= at) {
            sleep_until(next_check);
            next_check += CHECK_NS;
            rc = going_on(arg);
        }
        if (rc == 0) {
            sleep_until(at);
            rc = tick(w, at, w->stats.ticks ? at - w->last_tick_ns
                                            : w->interval_ns);
        }
    }
    /* The last census may come well before the end (spaced out): the
     * client is still asked about every CHECK_NS. */
    while (rc == 0 && next_check < end) {
        sleep_until(next_check);
        next_check += CHECK_NS;
        rc = going_on(arg);
    }
    int64_t stop = clock_mono_ns();
    if (rc == 0 && stop < end) {
        sleep_until(end);
        stop = end;
    }
    w->stats.duration_ns = stop - start;
    w->stats.achieved_hz =
        w->stats.duration_ns ? w->stats.ticks * 1e9 / w->stats.duration_ns
                             : 0;
    return rc;
}

const stacktab *wall_samples(const wall_profile *w) { return w->tab; }

const wall_missing *wall_missing_samples(const wall_profile *w, size_t *n)
{
    *n = w->n_missing;
    return w->missing;
}

void wall_get_stats(const wall_profile *w, wall_stats *out)
{
    *out = w->stats;
}

void wall_end(wall_profile *w)
{
    for (size_t i = 0; i < w->n_sets; i++) {
        if (w->sets[i].labels)
            labelset_drop(w->sets[i].labels);
        labelset_drop(w->sets[i].merged);
    }
    for (size_t i = 0; i < w->n_missing; i++)
        if (w->missing[i].labels)
            labelset_drop(w->missing[i].labels);
    free(w->sets);
    free(w->missing);
    stacktab_free(w->tab);
    free(w);
    census_time_handlers(false);
    atomic_store(&active, false);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(wall_end);
UPPER_CALLS(wall_get_stats);
UPPER_CALLS(wall_missing_samples);
UPPER_CALLS(wall_run);
UPPER_CALLS(wall_samples);
UPPER_CALLS(wall_start);
