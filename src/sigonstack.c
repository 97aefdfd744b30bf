/*
 * sigonstack.c -- cpprof's timer signals never nest on a program's
 * alternate signal stack.
 *
 * A signal that reaches a thread while it runs on its sigaltstack (inside
 * a handler the program installed with SA_ONSTACK) is delivered there,
 * whatever its own handler's flags, below the program's frames; when the
 * kernel's signal frame does not fit in what is left, the kernel kills
 * the process with SIGSEGV before any handler runs.  That frame grows with
 * the CPU's register state (AT_MINSIGSTKSZ: 3,376 bytes with AVX-512,
 * 11,952 with AMX): an 8 KB altstack that holds the program's own
 * handler's frame holds no second one, and a CPU profile killed the
 * program.  No room check in cpprof's handler can help: it never runs.
 *
 * So the program's SA_ONSTACK handlers block cpprof's signals (the
 * profiling signal, the census's, the accounting tick: the settings'
 * values at load, and any other cpprof claims before its first use): one
 * that comes while such a handler runs stays pending until the handler
 * returns, and is taken on the stack it returns to.  A CPU sample keeps
 * its weight (the timer's overrun counts the periods it waited) but goes
 * to the code the handler interrupted; the census treats a thread that
 * stays in such a handler as any thread that blocks its signal
 * (census_signal.c: given up on, bounded).
 *
 * Two ways in.  The interposed sigaction (siginterpose.c) adds them to
 * each SA_ONSTACK action the program installs, from load on: a handler
 * that is running when cpprof first sends a signal had its mask fixed
 * when it was delivered, so a signal claimed only then would nest in one
 * installed before (it did, test/altstack_walk: the first census's signal
 * inside a handler running since before the census, 1 run in 10).  And
 * when cpprof first sends a signal, every action in place is read and
 * given them: those from before cpprof was loaded or that went around the
 * interposer (glibc's __sigaction, a raw rt_sigaction); a handler of those
 * running at that moment is the one case left.  A handler's own signal
 * is never added (SA_NODEFER says whether it nests), nor one its mask has
 * already.  What was added is recorded per signal with the handler it was
 * added to, and taken out of the action sigaction returns while that
 * handler is in place: the program reads back what it set.  The signals
 * added are blocked only while the program's SA_ONSTACK handlers run,
 * whether or not cpprof ever sends them; a program that uses one of them
 * itself sees it wait for those handlers to return.
 *
 * Rewriting an action in place (read, add, write) races with the
 * program's own sigaction for that signal, whose action a stale write
 * would undo.  So each signal has a lock word holding the tid of the
 * thread in either, and the rewrite blocks every signal of its thread
 * meanwhile.  A call that finds its own tid there (a handler that
 * interrupted its thread's call) goes on without the lock, as two such
 * calls race without cpprof; one that finds a thread that no longer
 * exists (a holder in the parent of a fork) takes it over.  Not seen: an
 * action installed around the interposer after that first signal; for
 * those the sampler's room check (sampler_signal.c) still counts the walks
 * that would not fit, and a frame that does not fit at all kills as before.
 */
#define _GNU_SOURCE
#include "sigonstack.h"
#include "config.h"
#include "interpose.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

/* Signals 1..64, one bit each. */
#define SIGNALS 64

/* The signals SA_ONSTACK actions are given: only ever added to, as one
 * cpprof no longer uses may still be pending.  `applied`: those the
 * actions in place have been given. */
static _Atomic uint64_t guarded, applied;

/* Per signal: the thread in its critical section (0: none); lock word 0
 * is the scan's, which gives the actions in place their signals.  And
 * what cpprof added to the mask of which handler. */
#define SCAN_LOCK 0
static _Atomic pid_t holder[SIGNALS + 1];
static struct {
    _Atomic uintptr_t handler;
    _Atomic uint64_t added;
} added_to[SIGNALS + 1];

static uint64_t bit_of(int signo)
{
    return (uint64_t)1 << (signo - 1);
}

static uintptr_t handler_of(const struct sigaction *sa)
{
    return (uintptr_t)sa->sa_handler; /* sa_sigaction shares the word */
}

/* Whether thread tid of this process still exists (errno kept: the
 * program's handler may read it after its sigaction call). */
static bool thread_exists(pid_t tid)
{
    int saved = errno;
    bool gone = tgkill(getpid(), tid, 0) != 0 && errno == ESRCH;
    errno = saved;
    return !gone;
}

/* Takes signo's lock for thread `self`; false when self holds it already
 * (a handler that interrupted its own thread's call): go on without.
 * Another holder is inside two system calls at most: waited for, its
 * existence checked now and then. */
static bool lock_signal(int signo, pid_t self)
{
    for (unsigned spins = 1;; spins++) {
        pid_t seen = 0;
        if (atomic_compare_exchange_weak(&holder[signo], &seen, self))
            return true;
        if (seen == self)
            return false;
        if (seen != 0 && spins % 64 == 0 && !thread_exists(seen))
            atomic_compare_exchange_strong(&holder[signo], &seen, 0);
        else
            sched_yield();
    }
}

static void unlock_signal(int signo)
{
    atomic_store(&holder[signo], 0);
}

/* Adds the guarded signals (but signo) to sa's mask if it is an
 * SA_ONSTACK handler; the bits it added. */
static uint64_t guard(int signo, struct sigaction *sa)
{
    uintptr_t h = handler_of(sa);
    if (!(sa->sa_flags & SA_ONSTACK) || h == (uintptr_t)SIG_DFL ||
        h == (uintptr_t)SIG_IGN)
        return 0;
    uint64_t want = atomic_load(&guarded) & ~bit_of(signo), added = 0;
    for (int s = 1; s <= SIGNALS; s++)
        if ((want & bit_of(s)) && !sigismember(&sa->sa_mask, s)) {
            sigaddset(&sa->sa_mask, s);
            added |= bit_of(s);
        }
    return added;
}

static void record(int signo, uintptr_t handler, uint64_t added)
{
    atomic_store(&added_to[signo].handler, handler);
    atomic_store(&added_to[signo].added, added);
}

/* What cpprof added to signo's action, if *sa is still that action. */
static uint64_t added_for(int signo, const struct sigaction *sa)
{
    uint64_t added = atomic_load(&added_to[signo].added);
    return added && atomic_load(&added_to[signo].handler) == handler_of(sa)
               ? added
               : 0;
}

/* Takes what cpprof added out of *sa: the action as the program set it. */
static void unguard(int signo, struct sigaction *sa)
{
    uint64_t added = added_for(signo, sa);
    for (int s = 1; added && s <= SIGNALS; s++)
        if (added & bit_of(s))
            sigdelset(&sa->sa_mask, s);
}

int sigonstack_sigaction(sigonstack_next_fn *next, int signo,
                         const struct sigaction *act, struct sigaction *old)
{
    if (signo < 1 || signo > SIGNALS)
        return next(signo, act, old); /* its error */
    bool locked = lock_signal(signo, gettid());
    struct sigaction guarded;
    uint64_t added = 0;
    if (act) {
        guarded = *act;
        added = guard(signo, &guarded);
    }
    int rc = next(signo, act ? &guarded : NULL, old);
    if (rc == 0 && old)
        unguard(signo, old);
    if (rc == 0 && act)
        record(signo, handler_of(&guarded), added);
    if (locked)
        unlock_signal(signo);
    return rc;
}

__sighandler_t sigonstack_signal(__sighandler_t (*install)(int,
                                                           __sighandler_t),
                                 int signo, __sighandler_t handler)
{
    if (signo < 1 || signo > SIGNALS)
        return install(signo, handler);
    bool locked = lock_signal(signo, gettid());
    __sighandler_t previous = install(signo, handler);
    if (previous != SIG_ERR)
        record(signo, 0, 0);
    if (locked)
        unlock_signal(signo);
    return previous;
}

/* Gives signo's action in place the guarded signals, if it is an
 * SA_ONSTACK handler.  Through glibc's own sigaction: the kernel's action
 * is read and written back as it is, but for its mask. */
static void guard_in_place(int signo, pid_t self)
{
    struct sigaction cur;
    bool locked = lock_signal(signo, self);
    if (__sigaction(signo, NULL, &cur) == 0) {
        uint64_t before = added_for(signo, &cur);
        uint64_t added = guard(signo, &cur);
        if (added && __sigaction(signo, &cur, NULL) == 0)
            record(signo, handler_of(&cur), before | added);
    }
    if (locked)
        unlock_signal(signo);
}

void sigonstack_claim(int signo)
{
    if (signo < 1 || signo > SIGNALS)
        return;
    atomic_fetch_or(&guarded, bit_of(signo));
    if (!(atomic_load(&guarded) & ~atomic_load(&applied)))
        return;
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid_t self = gettid();
    lock_signal(SCAN_LOCK, self); /* a second claimer waits for the scan */
    uint64_t want = atomic_load(&guarded);
    if (want & ~atomic_load(&applied)) {
        for (int s = 1; s <= SIGNALS; s++)
            if (s != SIGKILL && s != SIGSTOP)
                guard_in_place(s, self);
        atomic_store(&applied, want);
    }
    unlock_signal(SCAN_LOCK);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
}

/* cpprof's signals as the settings have them at load (config.c's
 * constructor runs first): guarded from the program's first sigaction. */
__attribute__((constructor(102))) static void guard_configured_signals(void)
{
    static const cfg_id signals[] = {CFG_CPU_SIGNAL, CFG_CENSUS_SIGNAL,
                                     CFG_ACCOUNTING_SIGNAL, CFG_WORKER_SIGNAL};
    for (size_t i = 0; i < sizeof signals / sizeof *signals; i++) {
        long signo = cfg_int(signals[i]);
        if (signo >= 1 && signo <= SIGNALS)
            atomic_fetch_or(&guarded, bit_of((int)signo));
    }
}
