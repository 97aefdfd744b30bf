/*
 * census.c -- the thread census: every thread's stack, labels, name and
 * state, taken without stopping the process and without interrupting any
 * blocking call.
 *
 * Go walks a goroutine's stack from outside because goroutines are not
 * running while it looks.  A thread blocked in the kernel is not running
 * either, so it is walked from outside too: /proc/self/task/TID/syscall
 * gives its user SP and PC ("NR args SP PC", or "-1 SP PC" when it is
 * blocked outside a call), unwind_blocked_thread walks from there through
 * the fault-proof path (the stack is another thread's), and the thread's
 * CPU-time clock, read before the file and again after the walk, proves
 * the stack held still: the clock advances whenever the thread runs, and
 * only then.  A thread whose clock moved is walked again (WALK_TRIES).
 * (The clock is one cheap system call and tells more than reading the
 * file again would: a loop re-entering the same call with the same
 * registers from other callers changes the file not at all.)  Signalling such a
 * thread instead, as this file once did, cut nanosleep, poll, epoll_wait,
 * select and sigtimedwait short with EINTR: the kernel never restarts
 * them.  A thread in vfork is the exception: its child runs on its stack,
 * so it gets a reason instead of a stack.
 *
 * A running or runnable thread (state R) cannot be read from outside (its
 * stack moves, and the kernel gives its registers only once it is off the
 * CPU), so it walks its own: the handler of a real-time signal (the
 * "census_signal" setting) runs unwind_context() on the interrupted
 * context.  (The thread taking the census walks its own stack in place,
 * without a signal.)  State R is no proof of user code: a thread may be
 * running inside a long system call (getrandom or read of /dev/urandom
 * of 16 MB), which a signal pending there cuts short, and /proc cannot
 * tell (its syscall file reads "running" for any thread in state R).  So
 * the signal comes from a one-shot timer on the thread's own CPU clock
 * (arm_census_timer), whose expiry Linux handles on the thread's way back
 * to user space: it arrives between user instructions, after any call ran
 * to its end.  Its status file is read just before the timer is set
 * (state and blocked-signal mask); a thread that sleeps in the kernel
 * before its timer expires (which it does only while the thread runs) is
 * walked from outside at the census's next look (wait_answers).  A
 * signal carries a value, the census generation and the thread's slot
 * index, so a late signal from an earlier census, or one somebody else
 * sent, is recognised and ignored.
 *
 * Everything else comes from outside the thread, so it is there even when
 * the stack is not: name and state from /proc/self/task/TID/stat (a third
 * of status's size; status only for the running threads, for SigBlk), the
 * kernel wait channel from .../wchan, and the label set from the thread
 * registry.  Every file is opened relative to /proc/self/task, kept open
 * for the census.  Only the goroutine profile's debug=2 shows name, state
 * and wait channel: census_take_stacks, for every other form, reads none
 * of them for a thread blocked in the kernel (its syscall file says it is
 * blocked, and "-1 0x0 0x0" that it has exited), so such a thread costs
 * one file instead of three; a thread that runs costs its stat and status
 * files either way (start time, state, SigBlk), and there also the
 * syscall file that showed it running.
 *
 * A thread that has not run since the last census is taken from it
 * (census_still.c), for one clock read instead of its files and a walk.
 * A running thread that blocks the signal, a stopped thread and a zombie
 * leader are not signalled (census_take_stacks, which does not read the
 * state of a blocked thread, walks a thread stopped by a debugger from
 * outside: it holds still as well as a blocked one); a running thread
 * found blocking the signal is looked at again at the next look and given
 * up on once it has run BLOCKED_RUN_NS with the signal blocked (one
 * inside the census's own handler has it blocked for microseconds), and
 * one that does not answer within "census_timeout_ms" at the deadline.
 * Either way it stays in the census with a reason instead of a stack.  A
 * thread that exits meanwhile (ESRCH, or its /proc entry gone) is left
 * out.
 *
 * The first census of many new threads costs their files whatever is
 * kept, about 15 us a thread, so a large census shares the reading with
 * the crew's helper threads (census_crew.c), one per further CPU: the
 * thread taking the census lists /proc/self/task in small batches while
 * the helpers describe and walk the threads listed so far, then joins
 * them.  While the process has as many threads as the last census found,
 * that census's list stands in for the listing, checked as it is read
 * (list_known).  A helper does everything a thread blocked in the kernel
 * needs and leaves to the caller what needs the round (a running thread's
 * signal) or the caller itself (its own stack); the helpers themselves,
 * which move while they read, are read once the run is over and they sleep
 * again.
 *
 * The family, one concern a file around census_int.h: this file takes a
 * census (the listing, each thread's pass, the entry points) and gives
 * its threads their label sets; census_proc.c reads a thread's /proc
 * files; census_still.c keeps what the last census read of the threads
 * that have not run since; census_blocked.c walks a blocked thread from
 * outside; census_maps.c refreshes the unwinder's table before a thread
 * is signalled; census_signal.c is the round: the running threads'
 * timers, the handler and the wait for its answers; census_tasks.c reads
 * and marks the parked tasks; census_crew.c is the helper threads;
 * census_leak.c finds the threads that cannot run again, from glibc's
 * locks as census_locks.c reads them.
 */
#define _GNU_SOURCE
#include "census_int.h"
#include "atfork.h"
#include "collect.h"
#include "config.h"
#include "labels.h"
#include "own.h"
#include "proctasks.h"
#include "thread.h"
#include "unwind.h"
#include "util.h"
#include "warn.h"
#include "upper_calls.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t census_mu ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;

int census_by_tid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* Appends threads with these tids, their entries cleared up to pcs;
 * there is room (c->n + n at most the capacity). */
static void append_threads(census *c, const pid_t *tids, int n)
{
    for (int k = 0; k < n; k++) {
        census_thread *t = &c->threads[c->n++];
        memset(t, 0, offsetof(census_thread, pcs));
        t->tid = tids[k];
        t->syscall = CENSUS_UNREAD;
    }
}

/* /proc/self/task lists threads in the order they joined the process,
 * which is the order of their tids until tids wrap: sorted already,
 * mostly, and the entries are large. */
static void sort_by_tid(census *c)
{
    for (size_t i = 1; i < c->n; i++)
        if (c->threads[i].tid < c->threads[i - 1].tid) {
            qsort(c->threads, c->n, sizeof *c->threads, census_by_tid);
            return;
        }
}

/* ---- Labels from the registry ------------------------------------------- */

struct tid_labels {
    pid_t tid;
    const cpprof_labelset *labels; /* holds a reference */
    uint64_t task;
};

struct label_index {
    struct tid_labels *v;
    size_t n, cap;
    bool failed;
};

/* Runs under the registry lock: only references and memory. */
static void collect_labels(pid_t tid, const char *name,
                           const cpprof_labelset *labels, uint64_t task,
                           void *arg)
{
    (void)name;
    struct label_index *ix = arg;
    if ((!labels && !task) || ix->failed)
        return;
    if (ARRAY_RESERVE(ix->v, ix->n, ix->cap, 1) != 0) {
        ix->failed = true;
        return;
    }
    ix->v[ix->n++] = (struct tid_labels){tid, labelset_hold(labels), task};
}

/* Gives every thread the registry's label set for its tid, and the task
 * it runs with them (read in one step: a thread never shows a task's
 * labels without its task), reading the registry once. */
int census_attach_labels(census *c)
{
    struct label_index ix = {0};
    registry_foreach(collect_labels, &ix);
    int rc = ix.failed ? -ENOMEM : 0;
    /* ix.v is NULL when no thread has labels, and qsort and bsearch must
     * not be given NULL even for zero elements (UBSan stops there). */
    if (ix.n > 0)
        qsort(ix.v, ix.n, sizeof *ix.v, census_by_tid);
    for (size_t i = 0; rc == 0 && ix.n > 0 && i < c->n; i++) {
        struct tid_labels *hit = bsearch(&c->threads[i].tid, ix.v, ix.n,
                                         sizeof *ix.v, census_by_tid);
        if (hit) {
            c->threads[i].labels = hit->labels;
            c->threads[i].task = hit->task;
            hit->labels = NULL;
        }
    }
    for (size_t i = 0; i < ix.n; i++)
        labelset_drop(ix.v[i].labels);
    free(ix.v);
    return rc;
}

/* ---- Each thread's pass: described, walked or signalled ----------------- */

/* The thread taking the census runs too, in the census: it walks its own
 * stack from here (return addresses only), without a signal. */
static __attribute__((noinline)) void walk_self(census_thread *t)
{
    int busy = own_busy;
    own_busy = 1;
    t->depth = collect_stack(0, t->pcs, STACK_MAX_FRAMES, &t->flags, NULL);
    t->syscall = CENSUS_RAN;
    own_busy = busy;
    COLLECT_NO_TAIL_CALL();
}

/* Takes thread i's stack: read from outside while it is blocked in the
 * kernel; a signal only when it runs, and from its census timer
 * (arm_census_timer), so that it arrives on the thread's way back to user
 * space and cuts no call short, whether the thread was in user code or
 * inside a call when its status was read, or entered one since.  What it
 * can still interrupt (measured on Linux 6.18, x86-64: no short call
 * after 2,000 such signals to a thread looping on 16 MB getrandom calls,
 * nor after 2,000 to one reading 16 MB of /dev/urandom, where
 * rt_tgsigqueueinfo shortened 40 calls of 40 signals): on a kernel that sends CPU-timer
 * signals from the tick itself (without POSIX_CPU_TIMERS_TASK_WORK: x86-64
 * before 5.9, and architectures that do not select it), a call running
 * at that tick, as before; and the few calls that run pending task work
 * inside themselves (io_uring_enter waiting for completions, KVM_RUN),
 * which return EINTR for it as for any signal.  The status read is the
 * last thing before the timer is set.  `walk`: try the walk from outside
 * first (false: a helper found the thread running just now).  The
 * caller's only. */
static void take_stack(struct pass *p, uint32_t i, bool walk)
{
    census_thread *t = &p->c->threads[i];
    if (t->tid == p->caller) {
        walk_self(t);
        return;
    }
    for (int try = 0; try < WALK_TRIES && !t->missing[0]; try++) {
        if (t->state != 'R' && (walk || try > 0)) {
            int rc = census_walk_blocked(p->td, t);
            if (rc == BLOCKED)
                return;
            if (rc == -EAGAIN) {
                strcpy(t->missing, "stack changed while read");
                return;
            }
            if (rc < 0 && rc != -EPROTO) {
                t->tid = 0; /* exited */
                return;
            }
        }
        /* census_take_stacks did not read its start time, which tells the
         * table's view of it from that of an earlier thread with its tid. */
        if (!t->start_ticks && census_read_stat(p->td, t) != 0) {
            t->tid = 0;
            return;
        }
        if (t->missing[0])
            break; /* stopped or exited: its state says which */
        census_refresh_for(t, &p->refreshed);
        bool blocked;
        if (census_recheck_before_signal(p->td, t, p->signo, &blocked) != 0) {
            t->tid = 0;
            return;
        }
        if (t->state == 'R' && !t->missing[0]) {
            if (blocked)
                census_look_again(p->r, t, i);
            else
                census_signal_thread(p->c, p->r, i, p->signo, &p->held,
                                     p->deadline);
            return;
        }
    }
    if (!t->missing[0])
        strcpy(t->missing, "stack changed while read");
}

/* A helper's part of take_stack: the walk from outside of a thread
 * blocked in the kernel.  What needs the caller (a running thread's
 * signal, the caller's own stack) is left to it in p->outcome[i]. */
static void walk_for_caller(struct pass *p, uint32_t i)
{
    census_thread *t = &p->c->threads[i];
    if (t->tid == p->caller || t->state == 'R') {
        p->outcome[i] = WALK_AGAIN;
        return;
    }
    int rc = census_walk_blocked(p->td, t);
    if (rc == BLOCKED)
        return;
    if (rc == -EAGAIN)
        strcpy(t->missing, "stack changed while read");
    else if (rc == NOT_BLOCKED)
        p->outcome[i] = SIGNAL_ONLY;
    else if (rc == -EPROTO)
        p->outcome[i] = WALK_AGAIN;
    else
        p->outcome[i] = GONE; /* exited */
}

/* Describes thread i and takes its stack, on the caller. */
static void read_thread(struct pass *p, uint32_t i)
{
    census_thread *t = &p->c->threads[i];
    if (!census_describe_thread(p->td, t, p->details, p->renamed))
        t->tid = 0;
    else if (!t->missing[0] && !t->still)
        take_stack(p, i, true);
}

/* census_crew_run's item: thread i read (read_thread), or as much of it
 * as a helper may.  The crew's own helpers move while the run lasts:
 * they are read after it (AFTER_RUN).  Once a thread of the last
 * census's list is found gone, the census will be taken again, listed
 * (list_known): the rest are not read for nothing. */
static void census_one(void *arg, size_t i, bool on_caller)
{
    struct pass *p = arg;
    census_thread *t = &p->c->threads[i];
    if (atomic_load_explicit(&p->lost, memory_order_relaxed)) {
        p->outcome[i] = GONE;
    } else if (census_crew_is_helper(t->tid)) {
        p->outcome[i] = AFTER_RUN;
    } else if (on_caller) {
        read_thread(p, (uint32_t)i);
    } else if (!census_describe_thread(p->td, t, p->details, p->renamed)) {
        p->outcome[i] = GONE;
    } else if (!t->missing[0] && !t->still) {
        walk_for_caller(p, (uint32_t)i);
    }
    if (p->listed_known && (p->outcome[i] == GONE || t->tid == 0))
        atomic_store_explicit(&p->lost, true, memory_order_relaxed);
}

/* Removes the threads marked gone (tid 0), keeping the order. */
static void drop_gone(census *c)
{
    size_t kept = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (c->threads[i].tid == 0) {
            labelset_drop(c->threads[i].labels);
            continue;
        }
        if (kept != i)
            c->threads[kept] = c->threads[i];
        kept++;
    }
    c->n = kept;
}

/* Whether the threads are those of the last census: as many as it had
 * (the task directory's link count, read first).  Each of them found alive
 * after that was alive then, so when none is found gone (!p->lost),
 * they are every thread that was: the listing of /proc/self/task, 1.5 ms
 * of a 3-4 ms census of 1,000 still threads (bench/mariadb.sh), told
 * nothing more.  A thread created since is missed as by a listing that
 * had passed it; one that replaced a thread gone shows as a thread lost,
 * and the census is taken again, listed (take_locked).  A tid reused
 * within the census is the one case this cannot tell: its CPU clock reads
 * another time, so the thread is read afresh all the same. */
static bool list_known(struct pass *p, size_t expected)
{
    size_t n;
    const pid_t *tids = census_still_tids(&n);
    if (!p->may_list_known || expected == 0 || expected != n)
        return false;
    append_threads(p->c, tids, (int)n);
    p->listed_known = true; /* before the helpers read (census_one) */
    census_crew_offer(&p->run, p->c->n);
    return true;
}

/* Lists the threads into p->c (list_known, or /proc/self/task) while the
 * crew's helpers read those listed so far (census_one, not on the
 * caller): the run is left closed, for the caller to join (p->run_open),
 * or, when the listing outgrew the room made for it at the start,
 * finished where it stopped (p->run.listed), with the rest listed after
 * it.  Every helper is done with p when this returns an error. */
static int list_while_reading(struct pass *p)
{
    census *c = p->c;
    size_t expected = proctasks_count(p->td->fd);
    p->cap = expected + expected / 2 + PROCTASKS_BATCH_MAX;
    c->n = 0;
    c->threads = malloc(p->cap * sizeof *c->threads);
    p->outcome = calloc(p->cap, 1);
    if (!c->threads || !p->outcome)
        return -ENOMEM;
    prefault_for_write(c->threads, expected * sizeof *c->threads);
    census_crew_begin(&p->run, 0, expected, census_one, p);
    bool reading = true; /* the helpers' run takes what is listed */
    pid_t tids[PROCTASKS_BATCH_TIDS];
    int got = 0, rc = 0;
    bool known = list_known(p, expected);
    while (!known && (got = proctasks_next(p->td->fd, tids,
                                           sizeof tids / sizeof *tids)) > 0) {
        if (c->n + (size_t)got > p->cap) {
            if (reading) {
                census_crew_close(&p->run, c->n);
                census_crew_finish(&p->run, false);
                reading = false;
            }
            size_t cap = p->cap;
            unsigned char *grown = NULL;
            rc = ARRAY_RESERVE(c->threads, c->n, p->cap, (size_t)got);
            if (rc == 0 && !(grown = realloc(p->outcome, p->cap)))
                rc = -ENOMEM;
            if (rc)
                break;
            memset(grown + cap, 0, p->cap - cap);
            p->outcome = grown;
        }
        append_threads(c, tids, got);
        if (reading)
            census_crew_offer(&p->run, c->n);
    }
    if (got < 0)
        rc = got;
    if (reading) {
        census_crew_close(&p->run, c->n);
        if (rc)
            census_crew_finish(&p->run, false);
    }
    p->run_open = reading && rc == 0;
    return rc;
}

/* Describes every thread and takes its stack, the crew sharing the
 * reading (census_crew.h): signals go out as the caller meets running
 * threads, so their handlers walk while the blocked threads' stacks are
 * read; those a helper met running follow once the reading is done. */
static int collect_stacks(struct pass *p, long timeout_ms)
{
    census *c = p->c;
    int rc = list_while_reading(p);
    if (rc == 0)
        rc = census_attach_labels(c); /* while the helpers read */
    if (rc == 0 && !(p->r = census_round_new(c->n)))
        rc = -ENOMEM;
    if (rc) {
        if (p->run_open)
            census_crew_finish(&p->run, false);
        free(p->outcome);
        return rc;
    }
    struct round *r = p->r;
    census_round_publish(r, c->n);
    if (p->run_open)
        census_crew_finish(&p->run, true);
    else
        census_crew_run(atomic_load(&p->run.listed), c->n, census_one, p);
    for (uint32_t i = 0; i < r->n; i++) {
        if (p->outcome[i] == GONE)
            c->threads[i].tid = 0;
        else if (p->outcome[i] == AFTER_RUN)
            read_thread(p, i);
        else if (p->outcome[i] != TAKEN && c->threads[i].tid != 0)
            take_stack(p, i, p->outcome[i] == WALK_AGAIN);
    }
    free(p->outcome);
    census_round_finish(p, timeout_ms);
    sort_by_tid(c);
    size_t listed = c->n;
    drop_gone(c);
    if (c->n < listed)
        atomic_store(&p->lost, true);
    if (p->refreshed)
        census_remember_mapped(c);
    return 0;
}

/* Stderr, once: censuses with stacks are declined while the program
 * handles the census's signal itself. */
static void say_signal_taken(int signo)
{
    static atomic_bool said;
    if (!atomic_exchange(&said, true))
        warn_stderr("cpprof: thread censuses with stacks are declined: the "
                    "program has its own handler for signal %d; set "
                    "CPPROF_CENSUS_SIGNAL to a signal it leaves alone\n",
                    signo);
}

/* `details`: read every thread's name, state and wait channel. */
static int take_locked(census *out, bool details)
{
    int signo = (int)cfg_int(CFG_CENSUS_SIGNAL);
    long timeout_ms = cfg_int(CFG_CENSUS_TIMEOUT_MS);
    int rc = census_ensure_handler(signo);
    if (rc == CPPROF_ESIGTAKEN)
        say_signal_taken(signo);
    if (rc)
        return rc;
    struct task_dir td;
    if ((rc = census_open_task_dir(&td)) != 0)
        return rc;
    /* Without a table for an object the walk stops there. */
    unwind_refresh_if_loaded();
    bool renamed;
    unsigned long renames = census_still_renames(&renamed);
    for (bool may_list_known = true;; may_list_known = false) {
        struct pass p = {.td = &td, .c = out, .signo = signo,
                         .details = details, .renamed = renamed,
                         .caller = gettid(),
                         .may_list_known = may_list_known,
                         .deadline = clock_mono_ns() + timeout_ms * 1000000};
        rc = collect_stacks(&p, timeout_ms);
        if (rc || !p.listed_known || !atomic_load(&p.lost))
            break;
        /* A thread of the last census is gone though the count had not
         * changed: another may have come unlisted (list_known). */
        census_release(out);
        *out = (census){0};
    }
    close(td.fd);
    if (rc == 0) {
        census_keep_still(out, renames);
        rc = census_add_tasks(out, details);
    }
    if (rc)
        census_release(out);
    return rc;
}

/* fork(): census_mu is held across it, so no round is in flight and the
 * child can take censuses, afresh: its threads are not the parent's
 * (census_keep_still frees the parent's later). */
static void census_lock(void) { pthread_mutex_lock(&census_mu); }
static void census_unlock(void) { pthread_mutex_unlock(&census_mu); }
ATFORK_CHILD static void census_child(void)
{
    census_still_after_fork();
    census_maps_after_fork();
    census_signal_after_fork();
    census_crew_after_fork();
    census_leak_after_fork();
    atfork_mutex_release(&census_mu);
}

void census_enter(void)
{
    static const atfork_handlers on_fork = {census_lock, census_unlock,
                                            census_child};
    atfork_add(ATFORK_CENSUS, &on_fork);
    pthread_mutex_lock(&census_mu);
}

void census_leave(void) { pthread_mutex_unlock(&census_mu); }

static int take(census *out, bool details)
{
    if (!out)
        return -EINVAL;
    *out = (census){0};
    census_enter();
    int rc = take_locked(out, details);
    census_leave();
    return rc;
}

int census_take(census *out) { return take(out, true); }

int census_take_stacks(census *out) { return take(out, false); }

int census_take_labels(census *out)
{
    if (!out)
        return -EINVAL;
    *out = (census){0};
    struct task_dir td;
    int rc = census_open_task_dir(&td);
    if (rc)
        return rc;
    size_t cap = 0;
    pid_t tids[PROCTASKS_BATCH_TIDS];
    int got;
    while ((got = proctasks_next(td.fd, tids,
                                 sizeof tids / sizeof *tids)) > 0 &&
           (rc = ARRAY_RESERVE(out->threads, out->n, cap, (size_t)got)) == 0)
        append_threads(out, tids, got);
    close(td.fd);
    if (rc == 0 && got < 0)
        rc = got;
    if (rc == 0) {
        sort_by_tid(out);
        rc = census_attach_labels(out);
    }
    if (rc)
        census_release(out);
    return rc;
}

void census_release(census *c)
{
    for (size_t i = 0; i < c->n; i++)
        labelset_drop(c->threads[i].labels);
    for (size_t i = 0; i < c->n_parked; i++)
        labelset_drop(c->parked[i].labels);
    free(c->threads);
    free(c->parked);
    free(c->tasks);
    free(c->parked_pcs);
    *c = (census){0};
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(census_release);
UPPER_CALLS(census_take);
UPPER_CALLS(census_take_labels);
UPPER_CALLS(census_take_stacks);
