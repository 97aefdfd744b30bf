/*
 * census_signal.c -- the census's round: the running threads signalled
 * through one-shot timers on their own CPU clocks, the handler that walks
 * each one's stack into its slot, and the census's wait for their
 * answers.  Apart from census.c because it is where the census meets
 * signal handlers: the slots' states, the timers' share of the
 * queued-signal budget and the draining of late handlers are all here;
 * the rest of the census reads /proc.
 *
 * The handler and the collector meet in a `round`: the collector publishes
 * it through an atomic pointer; a handler counts itself in `in_flight`
 * before loading that pointer, claims its slot PENDING -> WRITING with a
 * compare-and-swap, writes the stack, marks it DONE and wakes the collector
 * through a futex when it was the last.  A thread walked from outside
 * leaves its slot IDLE.  At the deadline the collector claims every slot
 * still PENDING as ABANDONED, unpublishes the round and waits (boundedly)
 * for `in_flight` to drain before freeing it; a round a handler still
 * holds after that is leaked rather than freed under it.  The handler is
 * installed once and never removed: a thread that had the signal blocked
 * may take it long after the census, and it must then be ignored, not
 * kill the process with the default action.
 *
 * A POSIX timer holds a unit of the user's RLIMIT_SIGPENDING until it is
 * deleted, so the timers of running threads are set within the budget
 * sigbudget.h keeps (half of what is free), those of threads that
 * answered deleted when a unit is short; a thread none could be had for
 * within the timeout is reported as "queued-signal limit".
 */
#define _GNU_SOURCE
#include "census_int.h"
#include "atfork.h"
#include "config.h"
#include "sigbudget.h"
#include "sigonstack.h"
#include "sigowner.h"
#include "thread.h"
#include "unwind.h"
#include "util.h"
#include "upper_calls.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Longest wait, after the answers, for handlers still inside a round. */
#define DRAIN_NS 10000000L
/* When a census waiting for answers looks again at the threads yet to
 * answer (those that fell asleep, or blocked the signal, since they were
 * sent it): FIRST_RECHECK_NS after sending, then at doubling intervals up
 * to every RECHECK_NS.  A thread signalled while it ran and asleep before
 * its next tick is common in an idle server (a background thread's
 * periodic wake-up): looked at only after 20 ms, it held one census in
 * fifteen of mariadbd's 1,000 idle connections at 26 ms instead of 4-5
 * (bench/mariadb.sh).  A look costs a status file per thread yet to
 * answer, a few at most. */
#define FIRST_RECHECK_NS 1000000L
#define RECHECK_NS 20000000L

static _Atomic(struct round *) published;
static atomic_long in_flight;
/* The CPU the handlers' walks took on the threads they ran on, counted by
 * each handler itself: a census's cost that its caller's and its crew's
 * clocks do not hold (census_handlers_cpu_ns).  Counted only while
 * handlers_timed (census_time_handlers): two clock reads a walk that a
 * plain census has no use for. */
static atomic_llong handlers_cpu_ns;
/* Held: the child handler reads it (a wall window of the parent's is
 * forgotten in the child, wall.c). */
static atomic_bool handlers_timed ATFORK_HELD;

static uint32_t generation; /* under census_mu */

/* ---- The handler: everything in this section is SIGNAL-SAFE ------------ */

/* The stack answer and its callees may use below on_census_signal's
 * frame address: UNWIND_CONTEXT_STACK for the walk, plus the rest of
 * on_census_signal's frame, 64 bytes [64], and answer's, 48 [160] (gcc
 * -fstack-usage as in unwind.h, ASan+UBSan in brackets); the futex call
 * comes after the walk. */
#define CENSUS_HANDLER_STACK (UNWIND_CONTEXT_STACK + 256)

/* SIGNAL-SAFE: writes the stack into the slot if the collector still waits
 * for it, or, without `room` to walk, says so.  Not inlined: its frame
 * and its callees' are allocated only once the handler knows the room. */
static __attribute__((noinline)) void answer(struct round *r,
                                             uint32_t index,
                                             const void *uc, bool room)
{
    struct slot *slot = &r->slots[index];
    int expected = SLOT_PENDING;
    if (!atomic_compare_exchange_strong(&slot->state, &expected,
                                        SLOT_WRITING))
        return;
    int64_t cpu = r->timed ? clock_thread_cpu_ns() : 0;
    slot->no_room = !room;
    slot->depth = room ? (unsigned)unwind_context(uc, r->pcs[index],
                                                  STACK_MAX_FRAMES,
                                                  &slot->flags, NULL)
                       : 0;
    if (r->timed)
        atomic_fetch_add_explicit(&handlers_cpu_ns,
                                  clock_thread_cpu_ns() - cpu,
                                  memory_order_relaxed);
    atomic_store(&slot->state, SLOT_DONE);
    if (atomic_fetch_sub(&r->remaining, 1) == 1)
        futex_wake(&r->remaining, 1);
}

/* SIGNAL-SAFE.  The census's signals come from its timers (SI_TIMER);
 * the value, checked against the round, tells them from anyone else's. */
static void on_census_signal(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    if (si->si_code != SI_TIMER)
        return;
    int saved_errno = errno;
    uintptr_t value = (uintptr_t)si->si_value.sival_ptr;
    uint32_t gen = (uint32_t)(value >> 32), index = (uint32_t)value;
    atomic_fetch_add(&in_flight, 1);
    struct round *r = atomic_load(&published);
    if (r && r->generation == gen && index < r->n) {
        uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
        answer(r, index, uc,
               unwind_stack_left(uc, sp) >= CENSUS_HANDLER_STACK);
    }
    atomic_fetch_sub(&in_flight, 1);
    errno = saved_errno;
}

/* ---- The handler installed, and its CPU counted ----------------------- */

void census_time_handlers(bool on)
{
    atomic_store_explicit(&handlers_timed, on, memory_order_relaxed);
}

int64_t census_handlers_cpu_ns(void)
{
    return atomic_load_explicit(&handlers_cpu_ns, memory_order_relaxed);
}

/* Installs the handler on signo unless it is there already.  A handler
 * that is not ours means the application uses the signal: refuse. */
int census_ensure_handler(int signo)
{
    int rc = signal_claim_check(signo, on_census_signal);
    if (rc != 0)
        return rc > 0 ? 0 : rc;
    sigonstack_claim(signo);
    struct sigaction sa = {0};
    sa.sa_sigaction = on_census_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    return sigaction(signo, &sa, NULL) == 0 ? 0 : -errno;
}

bool census_signal_is_programs(void)
{
    return signal_owner((int)cfg_int(CFG_CENSUS_SIGNAL), on_census_signal) ==
           OWNER_PROGRAM;
}

/* The child: a wall window of the parent's that timed the handlers is
 * forgotten (wall.c). */
ATFORK_CHILD void census_signal_after_fork(void)
{
    if (atomic_load_explicit(&handlers_timed, memory_order_relaxed))
        atomic_store_explicit(&handlers_timed, false, memory_order_relaxed);
}

/* ---- The round: running threads signalled, their answers awaited ------- */

/* A round of n slots, zeroed (IDLE), with their stacks' room after them
 * (calloc: pages no handler writes are never touched). */
struct round *census_round_new(size_t n)
{
    size_t slots_end = sizeof(struct round) + n * sizeof(struct slot);
    size_t pcs_at = (slots_end + _Alignof(uintptr_t) - 1) &
                    ~(_Alignof(uintptr_t) - 1);
    struct round *r = calloc(1, pcs_at + n * sizeof *r->pcs);
    if (r) {
        r->pcs = (void *)((char *)r + pcs_at);
        /* The slots are all read (gather_answers): populated in one
         * call rather than a fault at each page's first look. */
        prefault_for_write(r, slots_end);
    }
    return r;
}

void census_round_publish(struct round *r, size_t n)
{
    r->generation = ++generation;
    r->timed = atomic_load_explicit(&handlers_timed, memory_order_relaxed);
    r->n = (uint32_t)n;
    atomic_store(&published, r);
}

/* The census signal reaches a running thread through a one-shot timer
 * on the thread's own CPU-time clock, 1 ns from now, rather than straight
 * from rt_tgsigqueueinfo, because a thread in state R may be running
 * inside a system call, and nothing outside it can tell: its syscall file
 * reads "running" for any thread in state R, in the kernel or not (the
 * kernel reads a thread's registers only once it is off the CPU), and
 * stat's fields say no more.  A signal queued to it there makes the
 * call stop at its next signal check: getrandom and read of /dev/urandom
 * then return fewer bytes than asked (SA_RESTART restarts only calls that
 * return EINTR), and 40 of 40 censuses shortened one.  A CPU-time
 * timer's expiry is seen at a scheduler tick while the thread runs, and
 * Linux (POSIX_CPU_TIMERS_TASK_WORK: x86-64 since 5.9, and wherever
 * PREEMPT_RT is) handles it as task work on the thread's way back to
 * user space: the signal is generated there and delivered at once,
 * between two user instructions, after any call has run to its end, as
 * the CPU profile's are.  The cost: three system calls instead of one,
 * and a running thread answers at its next tick (up to one tick of its
 * CPU time) or when its call ends, not at once.  The timer holds a unit
 * of the queued-signal budget until it is deleted (disarm_answered,
 * disarm_all). */
/* Sets the slot's timer to expire 1 ns of its thread's CPU time from
 * now.  0 or -errno. */
static int rearm_census_timer(struct slot *slot)
{
    struct itimerspec once = {.it_value = {0, 1}};
    return timer_settime(slot->timer, 0, &once, NULL) == 0 ? 0 : -errno;
}

static int arm_census_timer(struct slot *slot, pid_t tid, int signo,
                            uint32_t gen, uint32_t index)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = signo;
    sev.sigev_value.sival_ptr = (void *)(((uintptr_t)gen << 32) | index);
    sev._sigev_un._tid = tid;
    if (timer_create(thread_cpu_clock(tid), &sev, &slot->timer) != 0)
        /* The kernel names a thread gone as an invalid clock. */
        return errno == EINVAL && tid_cpu_ns(tid) < 0 ? -ESRCH : -errno;
    int rc = rearm_census_timer(slot);
    if (rc == 0)
        slot->armed = true;
    else
        timer_delete(slot->timer);
    return rc;
}

/* Deletes the census timer of slot s, giving back its budget unit (a
 * signal it sent and that is still queued is the kernel's to free). */
static void disarm(struct slot *s, unsigned *held)
{
    timer_delete(s->timer);
    s->armed = false;
    sigbudget_give();
    (*held)--;
}

/* Deletes the timers of the threads that answered since (or were walked
 * from outside, or given up on): a timer holds its unit of
 * RLIMIT_SIGPENDING until it is deleted.  How many. */
static unsigned disarm_answered(struct round *r, unsigned *held)
{
    unsigned freed = 0;
    for (uint32_t i = 0; i < r->n && *held > 0; i++)
        if (r->slots[i].armed &&
            atomic_load(&r->slots[i].state) != SLOT_PENDING) {
            disarm(&r->slots[i], held);
            freed++;
        }
    return freed;
}

static void disarm_all(struct round *r, unsigned *held)
{
    for (uint32_t i = 0; i < r->n && *held > 0; i++)
        if (r->slots[i].armed)
            disarm(&r->slots[i], held);
}

/* A unit of the queued-signal budget for one more timer, after deleting
 * those of the threads that answered since when there is none, and waiting
 * for more answers while none is to be had.  False when none comes before
 * the deadline, or no timer is outstanding to free one.  (The slots are
 * scanned only when the budget is short: a census within it pays
 * nothing.) */
static bool take_unit(struct round *r, unsigned *held, int64_t deadline)
{
    for (;;) {
        if (sigbudget_take())
            break;
        if (disarm_answered(r, held) > 0)
            continue;
        unsigned left = atomic_load(&r->remaining);
        int64_t wait = deadline - clock_mono_ns();
        if (*held == 0 || wait <= 0)
            return false;
        struct timespec ts = {0, wait < 1000000 ? wait : 1000000};
        futex_wait(&r->remaining, left, &ts);
    }
    (*held)++;
    return true;
}

/* Makes slot i one the census waits for (PENDING), unless it is already
 * (census_look_again). */
static void await_slot(struct round *r, uint32_t i)
{
    if (atomic_load(&r->slots[i].state) == SLOT_PENDING)
        return;
    atomic_fetch_add(&r->remaining, 1);
    atomic_store(&r->slots[i].state, SLOT_PENDING);
}

/* A running thread found blocking the signal keeps it blocked once it has
 * run BLOCKED_RUN_NS between two looks that found it so (struct
 * blocked_run, thread.h).  A thread inside the census's handler needs
 * microseconds of CPU to leave it: given up on at once, a busy thread
 * still returning from the last census's handler, or preempted in this
 * one's before it claimed its slot, lost its stack in back-to-back
 * censuses. */
#define BLOCKED_RUN_NS 1000000

/* A running thread found blocking the signal: its slot awaits, without a
 * timer, the census's next look (recheck_pending), which gives it one if
 * it has unblocked the signal by then and gives up on it with the reason
 * if it keeps the signal blocked. */
void census_look_again(struct round *r, census_thread *t, uint32_t i)
{
    blocked_run_start(&t->blocked, t->tid);
    await_slot(r, i);
}

/* Signals thread i, through its census timer, within the queued-signal
 * budget (*held counts the units this census holds: its armed timers);
 * marks it gone (tid 0) when it exited first. */
void census_signal_thread(census *c, struct round *r, uint32_t i, int signo,
                          unsigned *held, int64_t deadline)
{
    census_thread *t = &c->threads[i];
    struct slot *s = &r->slots[i];
    await_slot(r, i);
    bool unit = take_unit(r, held, deadline);
    int rc = unit ? arm_census_timer(s, t->tid, signo, r->generation, i) : 0;
    if (unit && rc == 0)
        return;
    int expected = SLOT_PENDING;
    if (atomic_compare_exchange_strong(&s->state, &expected, SLOT_ABANDONED))
        atomic_fetch_sub(&r->remaining, 1);
    if (!unit) {
        strcpy(t->missing, "queued-signal limit");
        return;
    }
    sigbudget_give();
    (*held)--;
    if (rc == -ESRCH)
        t->tid = 0;
    else
        snprintf(t->missing, sizeof t->missing, "signal not sent: %s",
                 strerror(-rc));
}

/* Thread i, signalled while it ran, sleeps in the kernel now: its timer
 * expires only while it runs, so it is walked from outside after all, its
 * slot taken back from the handler (PENDING -> IDLE).  Found running again
 * by then, it is left to its timer, set afresh (the handler may have
 * found the slot IDLE meanwhile and let that signal go). */
static void walk_instead(struct pass *p, uint32_t i)
{
    struct round *r = p->r;
    struct slot *s = &r->slots[i];
    census_thread *t = &p->c->threads[i];
    int expected = SLOT_PENDING;
    if (!atomic_compare_exchange_strong(&s->state, &expected, SLOT_IDLE))
        return; /* it answered meanwhile */
    atomic_fetch_sub(&r->remaining, 1);
    /* Its clock moved since the listing: the walk's first try starts from
     * now, and the thread is not kept as still (its wait channel, read
     * while it ran, is empty). */
    t->cpu_ns = tid_cpu_ns(t->tid);
    int rc = census_walk_blocked(p->td, t);
    t->still = false;
    t->walked_late = rc == BLOCKED;
    if (rc == NOT_BLOCKED) {
        await_slot(r, i);
        /* Without a timer, the next look gives it one. */
        if (!s->armed || (rc = rearm_census_timer(s)) == 0)
            return;
        expected = SLOT_PENDING;
        if (atomic_compare_exchange_strong(&s->state, &expected,
                                           SLOT_ABANDONED))
            atomic_fetch_sub(&r->remaining, 1);
        snprintf(t->missing, sizeof t->missing, "signal not sent: %s",
                 strerror(-rc));
    } else if (rc == -EAGAIN || rc == -EPROTO) {
        strcpy(t->missing, "stack changed while read");
    } else if (rc < 0) {
        t->tid = 0; /* exited */
    }
}

/* At each look while the answers are awaited, each running thread
 * that has not answered is looked at again (its status file).  One that
 * sleeps in the kernel now is walked from outside (walk_instead).  One
 * without a timer yet (census_look_again) that no longer blocks the
 * signal gets one.  One still running with the signal blocked (it was on
 * its way into pthread_sigmask, or keeps it blocked) will not answer
 * before the deadline: its slot is given up on now, with the reason,
 * rather than let the whole census wait out the timeout for it. */
static void recheck_pending(struct pass *p)
{
    struct round *r = p->r;
    for (uint32_t i = 0; i < r->n; i++) {
        if (atomic_load(&r->slots[i].state) != SLOT_PENDING)
            continue;
        census_thread *t = &p->c->threads[i];
        int64_t cpu_before = tid_cpu_ns(t->tid); /* blocked_run_held */
        bool blocked;
        if (census_recheck_before_signal(p->td, t, p->signo, &blocked) != 0)
            continue;
        if (t->state == 'S' || t->state == 'D') {
            walk_instead(p, i);
            continue;
        }
        if (!t->missing[0] && !blocked) {
            t->blocked = (struct blocked_run){0};
            if (!r->slots[i].armed)
                census_signal_thread(p->c, r, i, p->signo, &p->held,
                                     p->deadline);
            continue;
        }
        if (!t->missing[0] &&
            !blocked_run_held(&t->blocked, t->tid, cpu_before, BLOCKED_RUN_NS))
            continue;
        if (!t->missing[0])
            strcpy(t->missing, "signal blocked");
        int expected = SLOT_PENDING;
        if (atomic_compare_exchange_strong(&r->slots[i].state, &expected,
                                           SLOT_ABANDONED))
            atomic_fetch_sub(&r->remaining, 1);
        else
            t->missing[0] = '\0'; /* it answered after all */
    }
}

/* Sleeps on the futex until every slot answered or the deadline passed,
 * looking at the threads yet to answer FIRST_RECHECK_NS after sending,
 * then at doubling intervals up to every RECHECK_NS. */
static void wait_answers(struct pass *p)
{
    struct round *r = p->r;
    int64_t step = FIRST_RECHECK_NS, deadline = p->deadline;
    int64_t recheck = clock_mono_ns() + step;
    for (;;) {
        unsigned left = atomic_load(&r->remaining);
        int64_t now = clock_mono_ns();
        if (left == 0 || now >= deadline)
            return;
        if (now >= recheck) {
            recheck_pending(p);
            step = step * 2 < RECHECK_NS ? step * 2 : RECHECK_NS;
            recheck = now + step;
            continue;
        }
        int64_t wait = (recheck < deadline ? recheck : deadline) - now;
        struct timespec ts = {wait / 1000000000, wait % 1000000000};
        futex_wait(&r->remaining, left, &ts);
    }
}

/* Waits (at most DRAIN_NS) until no handler is inside any round. */
static bool drain_handlers(void)
{
    int64_t deadline = clock_mono_ns() + DRAIN_NS;
    while (atomic_load(&in_flight) != 0) {
        if (clock_mono_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

/* After the wait: copies the answers of the signalled threads (DONE slots
 * only: a slot that a handler never left, when draining timed out, counts
 * as unanswered) and gives up on the rest, leaving out the threads that
 * have exited.  Threads walked from outside have IDLE slots. */
static void gather_answers(const struct task_dir *td, census *c,
                           struct round *r, long timeout_ms)
{
    for (uint32_t i = 0; i < r->n; i++) {
        census_thread *t = &c->threads[i];
        struct slot *s = &r->slots[i];
        int state = atomic_load(&s->state);
        if (state == SLOT_IDLE || t->tid == 0 || t->missing[0])
            continue;
        if (state == SLOT_DONE && s->no_room) {
            strcpy(t->missing, "no stack left for the walk (sigaltstack)");
            continue;
        }
        if (state == SLOT_DONE) {
            t->depth = s->depth;
            t->flags = s->flags;
            t->syscall = CENSUS_RAN;
            memcpy(t->pcs, r->pcs[i], s->depth * sizeof *t->pcs);
            continue;
        }
        char path[24];
        snprintf(path, sizeof path, "%d", (int)t->tid);
        if (faccessat(td->fd, path, F_OK, 0) != 0)
            t->tid = 0; /* exited before it could answer */
        else
            snprintf(t->missing, sizeof t->missing,
                     "no answer within %ld ms", timeout_ms);
    }
}

/* Abandons every slot still PENDING, so that a late handler leaves it. */
static void abandon_pending(struct round *r)
{
    if (atomic_load(&r->remaining) == 0)
        return; /* none is: a slot leaves PENDING before it is counted out */
    for (uint32_t i = 0; i < r->n; i++) {
        int expected = SLOT_PENDING;
        atomic_compare_exchange_strong(&r->slots[i].state, &expected,
                                       SLOT_ABANDONED);
    }
}

void census_round_finish(struct pass *p, long timeout_ms)
{
    struct round *r = p->r;
    wait_answers(p);
    abandon_pending(r);
    atomic_store(&published, NULL);
    bool drained = drain_handlers();
    disarm_all(r, &p->held);
    gather_answers(p->td, p->c, r, timeout_ms);
    if (drained)
        free(r);
    /* else a handler is still inside r: leak it rather than free it. */
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(census_signal_is_programs);
