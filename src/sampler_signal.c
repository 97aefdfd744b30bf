/*
 * sampler_signal.c -- the profiling signal: its handler, which records a
 * sample into the ring, and the handler installed, checked and put back.
 * Apart from sampler.c because everything a handler reaches must be
 * signal-safe (the first section below, which test/signal_safe.sh
 * checks), and the rest of the sampler need not be.
 *
 * Handler.  It records into a preallocated ring of fixed slots, a bounded
 * multi-producer queue (Vyukov's): a handler claims a slot by advancing the
 * head with a compare-and-swap, fills it, and publishes it through the
 * slot's sequence number; the collector, the only consumer, drains every
 * TICK_NS into a stacktab keyed by (stack, label set).  A full ring drops
 * the sample and counts it, and the profile reports the count.  The handler
 * takes no lock and calls nothing but unwind_context() and two atomic label
 * functions; the signal is ignored unless a timer of the running session
 * sent it (si_code and a per-session cookie in si_value).
 *
 * Stack room.  The handler is installed with SA_ONSTACK: a
 * thread on a small or foreign stack (a fiber's, a Go runtime's goroutine
 * stack) takes the signal on its altstack when the program gave it one.
 * A signal that arrives while the thread already runs on its altstack
 * (inside the program's own SA_ONSTACK handler) nests there whatever the
 * flag says, below the program's handler's frames and a second kernel
 * frame, so the program's SA_ONSTACK handlers block the signal
 * (sigonstack.c) and it comes after they return.  A handler installed
 * where cpprof could not see it still lets it nest: on an 8 KB altstack
 * that left less than the walk needs, and the walk ran past its bottom.
 * So the handler first measures what is left below its frame
 * (unwind_stack_left) and, with less than SAMPLER_HANDLER_STACK, does not
 * walk: the sample's weight is counted as unsampled CPU time
 * (cpprof.unsampled.stackTooShort, with the number of threads it happened
 * on).  A nested kernel frame that does not fit at all kills the program
 * in the kernel, before any handler runs; no handler can help that.
 *
 * Whose labels.  A sample carries the labels of the thread it interrupted,
 * read through that thread's TLS.  A thread made with raw clone(2) without
 * CLONE_SETTLS shares its creator's TLS, so the timer's value carries the
 * tid it signals next to the cookie, and thread_labels_if_tid gives the
 * labels only when the TLS entry is that thread's: one compare.
 */
#define _GNU_SOURCE
#include "sampler_int.h"
#include "atfork.h"
#include "labelhooks.h"
#include "labels.h"
#include "own.h"
#include "sigonstack.h"
#include "sigowner.h"
#include "thread.h"
#include "unwind.h"
#include "util.h"
#include "upper_calls.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#define SNAPSHOTS_ALL_BUSY (~0ull)

/* The cookie of the last session that refused this thread a walk, so
 * that each thread counts once per session. */
static __thread int no_room_session __attribute__((tls_model("initial-exec")));

/* ---- Signal handler: everything in this section is SIGNAL-SAFE -------- */

/* SIGNAL-SAFE: claims the next free slot, or returns NULL when full. */
static struct slot *ring_claim(struct session *s, size_t *pos_out)
{
    size_t pos = atomic_load_explicit(&s->head, memory_order_relaxed);
    for (;;) {
        struct slot *slot = &s->ring[pos & s->mask];
        size_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
        intptr_t diff = (intptr_t)(seq - pos);
        if (diff < 0)
            return NULL;
        if (diff > 0) {
            pos = atomic_load_explicit(&s->head, memory_order_relaxed);
            continue;
        }
        if (atomic_compare_exchange_weak_explicit(&s->head, &pos, pos + 1,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *pos_out = pos;
            return slot;
        }
    }
}

/* SIGNAL-SAFE: wakes the collector now rather than at its next tick (a
 * futex wake is one system call; errno is the handler's to restore). */
void sampler_nudge_collector(struct session *s)
{
    atomic_fetch_add(&s->nudge, 1);
    futex_wake(&s->nudge, 1);
}

/* SIGNAL-SAFE: a free snapshot buffer claimed, or -1. */
static int snapshot_claim(struct session *s)
{
    unsigned long long busy = atomic_load(&s->snapshots_busy);
    for (;;) {
        if (busy == SNAPSHOTS_ALL_BUSY)
            return -1;
        int i = __builtin_ctzll(~busy);
        if (atomic_compare_exchange_weak(&s->snapshots_busy, &busy,
                                         busy | 1ull << i))
            return i;
    }
}

/* SIGNAL-SAFE: the walk met code without a table: the collector builds it
 * now, and walks this sample again from a copy of its stack when a buffer
 * is free. */
static void defer_walk(struct session *s, struct slot *slot,
                       const void *ucontext)
{
    if (!atomic_exchange(&s->tables_wanted, true))
        sampler_nudge_collector(s);
    int i = snapshot_claim(s);
    if (i < 0)
        return;
    if (unwind_snapshot_take(ucontext, &s->snapshots[i])) {
        slot->snapshot = i;
        s->put_off[i].slot = slot;
        atomic_store(&s->put_off[i].state, PUT_OFF_READY);
    } else
        atomic_fetch_and(&s->snapshots_busy, ~(1ull << i));
}

/* SIGNAL-SAFE.  Not inlined: its frame and its callees' are allocated
 * only once on_profiling_signal found room for them. */
static __attribute__((noinline)) void
record_sample(struct session *s, const void *ucontext, int64_t weight,
              pid_t tid)
{
    size_t pos;
    struct slot *slot = ring_claim(s, &pos);
    if (!slot) {
        atomic_fetch_add_explicit(&s->lost, weight, memory_order_relaxed);
        return;
    }
    slot->depth = unwind_context(ucontext, slot->pcs, STACK_MAX_FRAMES,
                                 &slot->flags, &slot->gen);
    slot->snapshot = -1;
    if (slot->flags & STACK_NO_TABLE)
        defer_walk(s, slot, ucontext);
    /* A collector's work inside an interposed call (a heap sample's
     * walk, a wait's bookkeeping) is cpprof's CPU, not the program's. */
    slot->in_collector = own_busy && !own_work;
    const cpprof_labelset *labels = slot->in_collector
                                        ? s->collector_labels
                                        : thread_labels_if_tid(tid);
    if (labels)
        labelset_ref_signal_safe(labels);
    if (!slot->in_collector)
        thread_check_scope(tid, unwind_context_sp(ucontext));
    slot->labels = labels;
    slot->weight = weight;
    slot->tid = tid;
    slot->when = (int64_t)acct_clock_ticks();
    atomic_store_explicit(&slot->seq, pos + 1, memory_order_release);
    /* Every quarter of the ring: the collector drains before it fills,
     * however long its tick. */
    size_t quarter = s->mask >= 3 ? (s->mask + 1) / 4 : 1;
    if (((pos + 1) & (quarter - 1)) == 0 &&
        !atomic_exchange(&s->drain_wanted, true))
        sampler_nudge_collector(s);
}

/* SIGNAL-SAFE: a walk refused for want of stack, counted with its
 * thread (once per session).  The no_room_session store is a plain TLS
 * word: a thread made with raw clone(2) shares it with its creator, and
 * at worst one of them goes uncounted among the threads. */
static void refuse_walk(struct session *s, int64_t weight)
{
    atomic_fetch_add_explicit(&s->no_room, weight, memory_order_relaxed);
    if (no_room_session != s->cookie) {
        no_room_session = s->cookie;
        atomic_fetch_add_explicit(&s->no_room_threads, 1,
                                  memory_order_relaxed);
    }
}

/* The stack record_sample and everything it calls may use below
 * on_profiling_signal's frame address: UNWIND_CONTEXT_STACK for the walk,
 * plus the rest of on_profiling_signal's frame, 80 bytes, and
 * record_sample's, 112 [288] (gcc -fstack-usage as in unwind.h, ASan+UBSan
 * in brackets); unwind_snapshot_take (160 [368]) and the futex call come
 * after the walk, not inside it. */
#define SAMPLER_HANDLER_STACK (UNWIND_CONTEXT_STACK + 512)

/* SIGNAL-SAFE: the profiling signal handler. */
static void on_profiling_signal(int signo, siginfo_t *si, void *ucontext)
{
    (void)signo;
    int saved_errno = errno;
    atomic_fetch_add(&sampler_in_handler, 1);
    struct session *s = atomic_load(&sampler_active);
    uintptr_t value = (uintptr_t)si->si_value.sival_ptr;
    if (s && si->si_code == SI_TIMER &&
        (uint32_t)value == (uint32_t)s->cookie) {
        int64_t weight = 1 + (int64_t)si->si_overrun;
        uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
        if (unwind_stack_left(ucontext, sp) < SAMPLER_HANDLER_STACK)
            refuse_walk(s, weight);
        else
            record_sample(s, ucontext, weight, (pid_t)(value >> 32));
    }
    atomic_fetch_sub(&sampler_in_handler, 1);
    errno = saved_errno;
}

/* ---- The handler installed, checked and put back ----------------------- */

/* SIGNAL-SAFE (sigaction may be called from a handler): a nudge, so that
 * the collector sees the program's handler at once instead of at its next
 * tick.  Counted in `sampler_in_handler` like sampler_thread_started. */
void sampler_signal_claimed(int signo)
{
    atomic_fetch_add(&sampler_in_handler, 1);
    struct session *s = atomic_load(&sampler_active);
    if (s && s->signo == signo && !atomic_exchange(&s->signal_claimed, true))
        sampler_nudge_collector(s);
    atomic_fetch_sub(&sampler_in_handler, 1);
}

/* Whether the signal's handler is still ours (also in a forked child). */
ATFORK_CHILD bool sampler_handler_is_ours(int signo)
{
    return signal_owner(signo, on_profiling_signal) == OWNER_CPPROF;
}

bool sampler_signal_is_programs(int signo)
{
    return signal_owner(signo, on_profiling_signal) == OWNER_PROGRAM;
}

/* Installs the handler unless the application has one of its own. */
int sampler_install_handler(struct session *s)
{
    struct sigaction sa = {0};
    sa.sa_sigaction = on_profiling_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaction(s->signo, &sa, &s->previous) != 0)
        return -errno;
    bool has_handler = (s->previous.sa_flags & SA_SIGINFO)
                           ? s->previous.sa_sigaction != NULL
                           : (s->previous.sa_handler != SIG_DFL &&
                              s->previous.sa_handler != SIG_IGN);
    if (has_handler) {
        sigaction(s->signo, &s->previous, NULL);
        return CPPROF_ESIGTAKEN;
    }
    sigonstack_claim(s->signo); /* before the first timer is set */
    return 0;
}

/* How long SIG_IGN is held before SIG_DFL comes back
 * (sampler_restore_handler). */
#define IGNORE_HOLD_NS 25000000L

/* Puts the previous disposition back, unless the program has installed a
 * handler of its own since, which stays.  SIG_IGN first: it discards
 * signals still pending from deleted timers, which SIG_DFL would turn into
 * the process's death.  The kernel discards them at once and sends none
 * after timer_delete returns; an emulator need not.  qemu-user takes a
 * signal into a queue of its own and acts on it, by the disposition of
 * that moment, only when the target thread next runs: a tick queued just
 * before the SIG_IGN killed a test process under qemu 7.2 about once in
 * 5,000 stops at 1,000 Hz.  So before SIG_DFL comes back, SIG_IGN is held
 * for longer than a runnable thread waits for a CPU (a scheduler period:
 * under CFS's defaults 12 ms on two CPUs, 24 ms at most): 25 ms, paid only
 * by a stop whose signal had the default disposition, the one that
 * kills. */
void sampler_restore_handler(struct session *s)
{
    if (!sampler_handler_is_ours(s->signo))
        return;
    struct sigaction ignore = {0};
    ignore.sa_handler = SIG_IGN;
    sigaction(s->signo, &ignore, NULL);
    if (!(s->previous.sa_flags & SA_SIGINFO) &&
        s->previous.sa_handler == SIG_DFL) {
        struct timespec hold = {0, IGNORE_HOLD_NS};
        while (nanosleep(&hold, &hold) != 0 && errno == EINTR)
            ;
    }
    sigaction(s->signo, &s->previous, NULL);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(sampler_signal_is_programs);
