/*
 * sampler.c -- the CPU sampler: per-thread CPU-time timers, the profiling
 * signal handler, and the collector thread that aggregates its samples.
 *
 * Timers.  As Go does on Linux since 1.18, every thread gets a timer of its
 * own on its own CPU-time clock, delivered to it alone (SIGEV_THREAD_ID):
 * a single process-wide setitimer delivers at most about one signal per
 * tick, so it loses samples once more than a couple of cores are busy (Go
 * issue 35057).  The clock of any thread can be named from its tid, so the
 * collector thread covers threads that never used cpprof.  A thread
 * created with pthread_create while a profile runs announces itself:
 * threadcreate.c wraps its function in thread.c's thread_start_run, which
 * calls sampler_thread_started() before anything else; that puts its tid
 * in a fixed array of slots (a compare-and-swap, no allocation, no lock)
 * and wakes the collector, which gives it its timer at once.  Threads
 * created otherwise (clone(), before cpprof loaded, in the instant a
 * session starts) are found by listing /proc/self/task, which also
 * retires the timers of threads that exited: every SCAN_NS when the
 * process's thread count (an fstat of that directory) differs from the
 * table's.  Listing it every tick, as before, cost the collector 1.7% of
 * a core with 100 idle threads (bench/collector), and every second 0.3 ms
 * with 1,000.  A program that starts threads faster than
 * that gets a scan after every SCAN_AFTER announcements, so that exited
 * threads' timers give their queued-signal budget back at the pace it
 * creates threads.  First expiries are random within one
 * period so that threads are not sampled in lockstep.  An expiry the kernel
 * could not deliver in time (a short period checked at tick granularity)
 * comes back as si_overrun and is counted in the sample's weight, so the
 * sampled CPU time stays the CPU time spent.
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
 * Code with no table yet.  A sample that meets code mapped since the last
 * refresh (a plugin dlopened a moment ago) would keep only the frames
 * below it.  Its handler nudges the collector to build the table and, if
 * one of SNAPSHOTS buffers is free, copies the registers and the top 16 KB
 * of the stack into it (unwind_snapshot_take: one process_vm_readv); the
 * collector walks the copy again once the table is built, before the
 * sample enters the profile.  With every buffer busy the sample keeps its
 * partial stack and STACK_NO_TABLE, as before.
 *
 * Code unloaded since.  A sample keeps the generation of the
 * mappings its walk saw (unwind.h), one word from the table the walk
 * already holds, and its stack table entry is keyed by it, so that the
 * builder resolves its PCs against the object that was mapped when it
 * was taken, not one dlopened at the same address before the profile is
 * built.  cpu_profile.c pins the generation for the window and the build.
 * A put-off walk is done again only if no object went away since its
 * sample (its code may be another object's by now); so that a plugin
 * unloaded soon after it was loaded keeps its samples' stacks, the thread
 * that dlcloses it does the pending walks itself first
 * (sampler_before_unload, from dlinterpose.c), while the plugin is still
 * mapped and in the tables: the collector may come after the unload.
 *
 * Threads without a timer.  A thread that blocks the signal (xz's workers
 * block every signal) would never be sampled, and a profile of it would
 * look idle; a thread past the queued-signal budget (sigbudget.h: each
 * timer holds a unit of RLIMIT_SIGPENDING) gets no timer, so that the
 * program's own real-time signals still fit.  Such threads are read from
 * outside instead: the collector reads their CPU clocks every CHARGE_NS, and
 * the profile reports, per reason, how many threads and how much CPU time
 * went unsampled.
 *
 * Idle threads.  A server's thousand connection threads mostly sleep
 * through a profile, and each costs what is done for it one by one:
 * reading its signal mask (a status file, 9-15 us) for its timer, and
 * reading it again once it ran, which a read of its CPU clock (1.7 us)
 * tells.  Done for every thread at the start and every second, that was
 * 4% of a core over a 5 s profile with 1,000 idle threads
 * (bench/idle_threads).  So a thread announced gets its mask read at
 * once, but one found by a listing gets its timer (and a clock read)
 * only; a sleeping thread needs no more, and its timer samples it as
 * soon as it wakes.  Whether some timed thread's mask needs a look is
 * told by the process as a whole, every RECHECK_NS and one tick after
 * the start: its CPU clock against the CPU its samples and the untimed
 * threads' charges account for (cpu_unaccounted).  A timed thread that
 * takes its signal leaves at most a period unaccounted; one that blocks
 * it leaves all its CPU, and then each timed thread's clock is read, the
 * status of those that ran, and one that blocks the signal through a
 * period of its CPU is untimed with that CPU charged (recheck_timed).
 * Otherwise only the threads
 * that ran by the last look are looked at.  Left open: a thread that
 * blocks the signal, slept through the start and exits within a second
 * of waking is neither sampled nor reported.
 *
 * The program's own handler.  The disposition is checked at every
 * collector tick: a program that installs its own handler for the signal
 * while a profile runs keeps it.  The timers are deleted (at most one tick
 * of cpprof's signals reaches its handler first), the rest of the window
 * counts as unsampled, stderr says so once, and stopping leaves the
 * handler alone instead of restoring the one from before the profile.
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
 *
 * Shutdown.  Handlers reach the session only through `active`, after
 * counting themselves in `in_handler`; stopping deletes the timers, sets
 * the signal to SIG_IGN (which discards any pending instance) before
 * restoring the previous disposition, clears `active` and waits for
 * `in_handler` to drop to zero.  Only then is the ring freed.  The
 * unwinder's tables stay: the census walks with them too.
 */
#define _GNU_SOURCE
#include "sampler.h"
#include "atfork.h"
#include "collect.h"
#include "labelhooks.h"
#include "labels.h"
#include "own.h"
#include "procfile.h"
#include "proctasks.h"
#include "sigbudget.h"
#include "sigonstack.h"
#include "sigowner.h"
#include "thread.h"
#include "trace.h"
#include "unwind.h"
#include "util.h"
#include "warn.h"
#include "upper_calls.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NSEC_PER_SEC 1000000000LL
#define TICK_NS 100000000LL /* collector: drain and tend, 10 a second */
#define SCAN_NS 1000000000LL /* /proc/self/task listed this often */
#define MAPS_MAX_AGE_NS 10000000000LL /* mappings re-read at least this often */
#define SCAN_AFTER 64       /* ...or after this many threads announced */
#define ANNOUNCE_SLOTS 256  /* announced tids not yet taken by the collector */
#define CHARGE_NS 100000000LL /* untimed threads' CPU read this often */
#define RECHECK_NS 1000000000LL /* signal masks re-read this often */
#define RING_MIN 1024       /* slots; about 0.6 MiB */
#define RING_MAX 65536
/* Put-off walks in flight (1 MiB mapped, touched as used).  A buffer is
 * free again once the collector drains its sample, so a program that
 * loads plugins faster than the collector's ticks holds one a load; on a
 * loaded machine, whose collector runs late, 8 ran out (chains.sh's
 * plugin, loaded 40 times a second, with 8 busy threads on 2 cores: 2-4
 * samples in 70 kept their leaf alone), and so did 32 once in CI (24 of
 * 1,577 samples: its calls take 28 samples each at 1000 Hz, so a call
 * longer than average, with the collector waiting, filled them).  64 is
 * 64 ms of a thread's CPU at 1000 Hz, one bit each of a 64-bit mask. */
#define SNAPSHOTS 64
#define SNAPSHOTS_ALL_BUSY (~0ull)
#define COOKIE_MAGIC 0x43500000 /* "CP" in si_value, plus a session number */

/* A put-off walk is done again once, by the collector or, when an object
 * is about to be unloaded, by the thread unloading it (sampler.h):
 * whichever moves it from READY to WALKING. */
enum { PUT_OFF_FREE, PUT_OFF_READY, PUT_OFF_WALKING, PUT_OFF_DONE };
struct put_off {
    atomic_int state;
    struct slot *slot; /* the sample's, set before READY */
};

struct slot {
    atomic_size_t seq; /* == position: free; position + 1: filled */
    unsigned depth, flags;
    uint64_t gen;   /* the mappings' generation the walk saw (unwind.h) */
    int64_t weight; /* expirations this sample stands for */
    int64_t when;   /* acct_clock_ticks(), for a trace being recorded */
    pid_t tid;
    const cpprof_labelset *labels; /* holds a reference */
    bool in_collector;             /* taken inside cpprof's collector work */
    int snapshot;                  /* index into session.snapshots, or -1 */
    uintptr_t pcs[STACK_MAX_FRAMES];
};

/* A thread of the process and its timer, or why it has none. */
struct thread_timer {
    pid_t tid;
    int why;          /* TIMED, NEW or a sampler_reason */
    unsigned counted; /* bit per reason the thread was counted under */
    timer_t timer;    /* when TIMED */
    int64_t cpu_mark; /* untimed: its CPU clock when last read; timed:
                         when it was given its timer */
    int64_t mask_cpu; /* its CPU clock when its signal mask was last read,
                         or, until then, when it was given its timer */
    /* Found by a listing and timed without a look at its signal mask: most
     * threads of a large process sleep, and what they block matters only
     * once they run, which a read of their CPU clock tells (recheck_timed).
     * The look could not be made at once anyway: glibc's pthread_create
     * starts every thread with all signals blocked until start_thread sets
     * its mask. */
    bool mask_unread;
    bool ran; /* timed, and ran by the last look at it (look_at_timed) */
    struct blocked_run blocked; /* timed: recheck_timed */
    /* A sample of its was drained since the last look at its mask: its
     * signal gets through, whatever a look finds it blocking. */
    bool sampled;
};

#define TIMED (-1)
#define NEW (-2) /* first seen, nothing decided yet */

struct session {
    int signo;
    int cookie;
    int64_t period;
    struct sigaction previous;

    struct slot *ring;
    size_t mask;
    atomic_size_t head; /* next position handlers claim */
    size_t tail;        /* next position the collector reads */
    atomic_llong lost;  /* weight of dropped samples */
    /* pprof_internal=collectors: what a sample taken while a collector
     * works on a program's thread (own_busy) is labelled with. */
    cpprof_labelset *collector_labels;
    /* Walks refused for want of stack (on_profiling_signal): their weight,
     * and the threads they were refused on (no_room_session). */
    atomic_llong no_room;
    atomic_long no_room_threads;
    /* Put-off walks (mmap'd: memory the program's allocator never sees);
     * bit i of snapshots_busy is set while a slot holds snapshot i, and
     * put_off[i] says who walks it again (finish_walk). */
    struct unwind_snapshot *snapshots;
    atomic_ullong snapshots_busy;
    _Static_assert(SNAPSHOTS == 64, "snapshots_busy has a bit each");
    struct put_off put_off[SNAPSHOTS];

    stacktab *samples;   /* the collector's, until stop */
    struct thread_timer *timers; /* every thread seen, sorted by tid */
    size_t ntimers;
    uint64_t rng;
    int64_t charged_ns;
    int64_t masks_checked_ns;
    int64_t scanned_ns;
    int64_t maps_read_ns;
    unsigned announced_since_scan;
    /* The look at every timed thread is made only when the process used
     * CPU the samples do not account for (cpu_unaccounted): the weight of
     * the samples drained so far; at the last look, the process's CPU and
     * what samples and charges accounted for; and how many timed threads
     * had run since the look before it. */
    int64_t drained;
    int64_t process_cpu_mark, accounted_mark;
    size_t movers;
    bool taken;   /* the program installed its own handler meanwhile */
    int refused;  /* timer_create's error other than a gone thread */
    sampler_unsampled unsampled[SAMPLER_NREASONS];

    pthread_t collector;
    atomic_int collector_tid; /* 0 until the collector runs */
    /* The collector sleeps on `nudge` (a futex word) between ticks; stop
     * and a handler that met code without a table (a dlopen since the
     * last refresh) bump it and wake it.  `tables_wanted` keeps that to
     * one wake per refresh, however many samples meet the new code. */
    atomic_uint nudge;
    atomic_bool tables_wanted;
    atomic_bool threads_announced; /* likewise: one wake per batch */
    atomic_bool drain_wanted;      /* the ring is a quarter fuller */
    atomic_bool signal_claimed;    /* the program sets the signal's action */
    atomic_bool stopping;
};

static pthread_mutex_t sampler_mu ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;
static struct session *running; /* under sampler_mu */
static _Atomic(struct session *) active; /* what handlers see */
static atomic_long in_handler; /* handlers and announcing threads inside */
/* Tids of threads started since the collector last looked; 0: free.  A
 * thread that finds no free slot sets `announce_overflow`, and the
 * collector lists /proc/self/task instead. */
static atomic_int announced[ANNOUNCE_SLOTS];
static atomic_bool announce_overflow;
static atomic_uint sessions;
static atomic_size_t ring_slots_fixed;
/* The cookie of the last session that refused this thread a walk, so
 * that each thread counts once per session. */
static __thread int no_room_session __attribute__((tls_model("initial-exec")));
/* CPU time of the collectors of finished sessions; under sampler_mu (a
 * collector adds its own as it ends, which is inside sampler_stop). */
static int64_t retired_collector_ns;

int64_t sampler_period_ns(long hz)
{
    return NSEC_PER_SEC / hz;
}

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
static void nudge_collector(struct session *s)
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
        nudge_collector(s);
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
        nudge_collector(s);
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
    atomic_fetch_add(&in_handler, 1);
    struct session *s = atomic_load(&active);
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
    atomic_fetch_sub(&in_handler, 1);
    errno = saved_errno;
}

/* ---- Collector side --------------------------------------------------- */

/* Walks put-off walk i again, from its stack's copy, with the tables as
 * they are, unless an object was unloaded since the sample (then its
 * partial walk stands) or another thread has taken it. */
static void walk_put_off(struct session *s, int i)
{
    struct put_off *p = &s->put_off[i];
    int ready = PUT_OFF_READY;
    if (!atomic_compare_exchange_strong(&p->state, &ready, PUT_OFF_WALKING))
        return;
    struct slot *slot = p->slot;
    size_t depth = unwind_snapshot_walk(&s->snapshots[i], slot->pcs,
                                        STACK_MAX_FRAMES, &slot->flags,
                                        &slot->gen);
    if (depth)
        slot->depth = (unsigned)depth;
    atomic_store(&p->state, PUT_OFF_DONE);
}

/* A put-off sample's walk, done again with the table its handler asked
 * for (built here if the collector has not yet), unless a dlclose did it
 * already; its buffer back. */
static void finish_walk(struct session *s, struct slot *slot)
{
    int i = slot->snapshot;
    if (atomic_exchange(&s->tables_wanted, false))
        unwind_refresh_if_loaded();
    walk_put_off(s, i);
    while (atomic_load(&s->put_off[i].state) != PUT_OFF_DONE)
        sched_yield(); /* a dlclosing thread is walking it */
    atomic_store(&s->put_off[i].state, PUT_OFF_FREE);
    atomic_fetch_and(&s->snapshots_busy, ~(1ull << i));
    slot->snapshot = -1;
}

/* Not from a signal handler; counted in `in_handler` like
 * sampler_thread_started, so that the session stays.  With walks put
 * off, the tables are brought up to date first: by this thread, or by the
 * collector, which may be building them right now for a walk it finishes
 * (then the writer's lock waits for it): the collector may have taken the
 * want already, and this thread would walk its pending snapshots again
 * without the table. */
void sampler_before_unload(void)
{
    atomic_fetch_add(&in_handler, 1);
    struct session *s = atomic_load(&active);
    if (s && (atomic_exchange(&s->tables_wanted, false) |
              (atomic_load(&s->snapshots_busy) != 0)))
        unwind_refresh_if_loaded();
    for (int i = 0; s && i < SNAPSHOTS; i++)
        walk_put_off(s, i);
    atomic_fetch_sub(&in_handler, 1);
}

static int compare_timer_tid(const void *key, const void *entry)
{
    pid_t x = *(const pid_t *)key;
    pid_t y = ((const struct thread_timer *)entry)->tid;
    return (x > y) - (x < y);
}

/* Thread tid's signal got through: one of its samples came in. */
static void note_sampled(struct session *s, pid_t tid)
{
    struct thread_timer *t =
        bsearch(&tid, s->timers, s->ntimers, sizeof *t, compare_timer_tid);
    if (t)
        t->sampled = true;
}

/* Moves every published slot into s->samples. */
static void ring_drain(struct session *s)
{
    for (;;) {
        struct slot *slot = &s->ring[s->tail & s->mask];
        size_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
        if (seq != s->tail + 1)
            return;
        if (slot->snapshot >= 0)
            finish_walk(s, slot);
        if (!slot->in_collector)
            slot->depth = (unsigned)collect_drop_wrappers(slot->pcs,
                                                          slot->depth);
        int64_t values[2] = {slot->weight, slot->weight * s->period};
        if (stacktab_add(s->samples, slot->pcs, slot->depth, slot->flags,
                         slot->gen, slot->labels, values) != 0)
            atomic_fetch_add(&s->lost, slot->weight);
        else
            s->drained += slot->weight;
        note_sampled(s, slot->tid);
        if (trace_recording() && !slot->in_collector)
            trace_cpu_sample(slot->tid, slot->when, slot->pcs, slot->depth,
                             slot->flags & STACK_LEAF_EXACT, slot->labels);
        labelset_drop(slot->labels);
        atomic_store_explicit(&slot->seq, s->tail + s->mask + 1,
                              memory_order_release);
        s->tail++;
    }
}

static uint64_t next_random(struct session *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
}

static struct timespec ns_to_timespec(int64_t ns)
{
    return (struct timespec){ns / NSEC_PER_SEC, ns % NSEC_PER_SEC};
}

/* The timer's si_value: the session's cookie in the low half, the thread
 * it signals in the high half, so that the handler knows whose labels it
 * may read without a system call (thread_labels_if_tid). */
static void *timer_value(const struct session *s, pid_t tid)
{
    return (void *)((uintptr_t)(uint32_t)tid << 32 | (uint32_t)s->cookie);
}

/* A timer on thread `tid`'s CPU clock that signals that thread every
 * period, first after a random fraction of one.  Takes a unit of the
 * queued-signal budget, or fails with -EAGAIN. */
static int thread_timer_start(struct session *s, pid_t tid, timer_t *out,
                              sigbudget_view *budget)
{
    if (!sigbudget_take_viewed(budget))
        return -EAGAIN;
    struct sigevent sev = {0};
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = s->signo;
    sev.sigev_value.sival_ptr = timer_value(s, tid);
    sev._sigev_un._tid = tid;
    int rc = 0;
    if (timer_create(thread_cpu_clock(tid), &sev, out) != 0) {
        rc = -errno;
    } else {
        struct itimerspec its = {
            .it_interval = ns_to_timespec(s->period),
            .it_value = ns_to_timespec(1 + (int64_t)(next_random(s) %
                                                     (uint64_t)s->period)),
        };
        if (timer_settime(*out, 0, &its, NULL) != 0) {
            rc = -errno;
            timer_delete(*out);
        }
    }
    if (rc != 0)
        sigbudget_give();
    return rc;
}

static void thread_timer_delete(struct thread_timer *t)
{
    timer_delete(t->timer);
    sigbudget_give();
}

static int compare_tids(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* The tids of every thread of the process, sorted. */
static int list_threads(pid_t **out, size_t *n)
{
    int dirfd = proctasks_open();
    if (dirfd < 0)
        return dirfd;
    pid_t *tids = NULL;
    size_t cap = 0, len = 0;
    int got;
    while ((got = ARRAY_RESERVE(tids, len, cap, PROCTASKS_BATCH_TIDS)) == 0 &&
           (got = proctasks_next(dirfd, tids + len, cap - len)) > 0)
        len += (size_t)got;
    close(dirfd);
    if (got < 0) {
        free(tids);
        return got;
    }
    qsort(tids, len, sizeof *tids, compare_tids);
    *out = tids;
    *n = len;
    return 0;
}

/* Whether thread `tid` has `signo` blocked (its status file's SigBlk). */
static bool blocks_signal(pid_t tid, int signo)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    return procfile_read(AT_FDCWD, path, buf, sizeof buf) > 0 &&
           procfile_blocks_signal(buf, signo);
}

/* Moves the CPU an untimed thread used since its mark into its reason's
 * total. */
static void charge_unsampled(struct session *s, struct thread_timer *t)
{
    int64_t now = t->why >= 0 ? tid_cpu_ns(t->tid) : -1;
    if (now < 0)
        return;
    s->unsampled[t->why].cpu_ns += now - t->cpu_mark;
    t->cpu_mark = now;
}

/* From now on the thread has no timer, for `why`. */
static void make_untimed(struct session *s, struct thread_timer *t, int why)
{
    if (t->why == TIMED)
        thread_timer_delete(t);
    if (t->why == TIMED || t->why == NEW)
        t->cpu_mark = tid_cpu_ns(t->tid);
    charge_unsampled(s, t);
    t->why = why;
    if (!(t->counted & (1u << why))) {
        t->counted |= 1u << why;
        s->unsampled[why].threads++;
    }
}

/* Gives the thread a timer if it can take the signal and one is to be
 * had; otherwise records why not.  Returns false when the thread is gone.
 * `mask_settled`: the thread runs its own code already (it announced
 * itself, or a recheck saw it run), so its mask is read now; one found by
 * a listing is timed with its mask unread (mask_unread).  A thread found
 * blocking the signal may be inside a handler that blocks it for a moment
 * (the program's SA_ONSTACK handlers do: sigonstack.c), so it is timed
 * with its blocked run started, and untimed at the next look only if none
 * of its samples came meanwhile (recheck_timed); one untimed for blocking
 * it already gets its timer back once a look finds it unblocked.
 * `budget`: the pass's one read of SigQ. */
static bool give_timer(struct session *s, struct thread_timer *t,
                       bool mask_settled, sigbudget_view *budget)
{
    if (s->taken) {
        make_untimed(s, t, SAMPLER_SIGNAL_TAKEN);
        return true;
    }
    int64_t cpu = tid_cpu_ns(t->tid);
    if (cpu < 0)
        return false; /* exited meanwhile: its clock is gone */
    bool blocked = mask_settled && blocks_signal(t->tid, s->signo);
    if (blocked && t->why == SAMPLER_BLOCKED) {
        make_untimed(s, t, SAMPLER_BLOCKED);
        return true;
    }
    timer_t timer;
    int rc = thread_timer_start(s, t->tid, &timer, budget);
    if (rc == -EINVAL || rc == -ESRCH)
        return false;
    if (rc == 0) {
        charge_unsampled(s, t);
        t->why = TIMED;
        t->timer = timer;
        t->cpu_mark = t->mask_cpu = cpu;
        t->blocked = (struct blocked_run){0};
        t->sampled = false;
        if (blocked)
            blocked_run_start(&t->blocked, t->tid);
        t->mask_unread = !mask_settled;
        t->ran = mask_settled; /* it runs its own code now */
    } else if (rc == -EAGAIN) {
        make_untimed(s, t, SAMPLER_OVER_BUDGET);
    } else {
        if (!s->refused)
            s->refused = rc;
        make_untimed(s, t, SAMPLER_REFUSED);
    }
    return true;
}

/* Refreshes the unwinder's table of mappings (its failure only costs
 * stacks: the walker keeps the older table or records bare PCs). */
static void refresh_maps(struct session *s)
{
    unwind_refresh_maps();
    s->maps_read_ns = clock_mono_ns();
}

/* Whether the thread ran since its signal mask was last read: only the
 * thread itself changes its mask, so one that did not run kept it, and one
 * clock read spares a status file read (most threads of a large process
 * sleep from one check to the next). */
static bool ran_since_mask_read(struct thread_timer *t)
{
    int64_t now = tid_cpu_ns(t->tid);
    if (now >= 0 && now == t->mask_cpu)
        return false;
    t->mask_cpu = now;
    return true;
}

/* A timed thread that ran since its mask was last read is untimed if it
 * keeps the signal blocked through a period of its CPU (struct
 * blocked_run, thread.h: a look also finds threads inside a handler, the
 * sampler's own among them; untimed at once, a busy thread went unsampled
 * until the next recheck, CI: 39 ms of 0.4 s).  Its mask never read, it
 * counts from its timer's start: its CPU since then is unsampled if it
 * blocked the signal all along.  A sample of its since the last look
 * proves its signal got through between the looks: the run starts anew.
 * (A thread that spends most of its time in the program's SA_ONSTACK
 * handlers, which block the signal (sigonstack.c), is found blocking it
 * at look after look, and its samples come as each handler returns:
 * untimed, its CPU went to signalBlocked, two thirds of it in
 * test/altstack_walk.)  Returns whether the thread ran. */
static bool recheck_timed(struct session *s, struct thread_timer *t)
{
    if (!ran_since_mask_read(t))
        return false;
    bool unread = t->mask_unread, got_through = t->sampled;
    t->mask_unread = t->sampled = false;
    if (!blocks_signal(t->tid, s->signo)) {
        t->blocked = (struct blocked_run){0};
        return true;
    }
    if (got_through) { /* the run counts from this look */
        t->blocked = (struct blocked_run){0};
        blocked_run_start(&t->blocked, t->tid);
        return true;
    }
    if (unread && !t->blocked.seen)
        t->blocked = (struct blocked_run){.seen = true, .since = t->cpu_mark};
    if (!blocked_run_held(&t->blocked, t->tid, t->mask_cpu, s->period))
        return true;
    make_untimed(s, t, SAMPLER_BLOCKED);
    t->cpu_mark = t->blocked.since;
    charge_unsampled(s, t);
    return true;
}

/* CPU time the samples drained so far stand for, with those a full ring
 * dropped or a short stack refused, and the untimed threads' charges. */
static int64_t accounted_ns(struct session *s)
{
    int64_t weight = s->drained + atomic_load(&s->lost) +
                     atomic_load(&s->no_room);
    int64_t ns = weight * s->period;
    for (int why = 0; why < SAMPLER_NREASONS; why++)
        ns += s->unsampled[why].cpu_ns;
    return ns;
}

static void mark_accounted(struct session *s)
{
    s->process_cpu_mark = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    s->accounted_mark = accounted_ns(s);
}

/* Whether the process used more CPU since the last look at every timed
 * thread than its samples and charges account for: one read of its CPU
 * clock, which the kernel sums over every thread (0.3-0.6 ms with 1,000
 * whose task structures are out of the cache, too much for every tick).
 * A timed thread that takes its signal is sampled a period of CPU at a
 * time: it leaves at most the period it has begun unaccounted, and a
 * thread that wakes from a long sleep is sampled by its timer at once,
 * unlooked at.  More is a timed thread that blocks the signal, or one no
 * listing has found yet.  The slack allows a period for each thread that
 * ran before (two: its signals may wait for a CPU), and four for those
 * that start to. */
static bool cpu_unaccounted(struct session *s)
{
    int64_t used = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - s->process_cpu_mark;
    int64_t accounted = accounted_ns(s) - s->accounted_mark;
    return used - accounted > s->period * (2 * (int64_t)s->movers + 4);
}

/* The look at the timed threads: each one's CPU clock read (1.7 us), and
 * its status if it ran since its mask was read; one that blocks the signal
 * is untimed, its CPU charged so far.  At every thread (`all`) only when
 * cpu_unaccounted says so: 1,000 sleeping threads looked at every second
 * were 0.2% of a core.  Otherwise at those that ran by the last look, as
 * every thread was looked at before: a thread among many that run is
 * found within a second once it blocks the signal, however much slack
 * their periods begun leave cpu_unaccounted. */
static void look_at_timed(struct session *s, bool all)
{
    s->movers = 0;
    for (size_t i = 0; i < s->ntimers; i++) {
        struct thread_timer *t = &s->timers[i];
        if (t->why == TIMED && (all || t->ran)) {
            t->ran = recheck_timed(s, t);
            s->movers += t->ran;
        }
    }
    if (all)
        mark_accounted(s);
}

/* Every RECHECK_NS, and one tick after the start (for threads the first
 * listing timed that block the signal): the timed threads are looked at,
 * every one if the process's CPU is not all accounted for, else those
 * that ran by the last look; and an untimed thread that can take the
 * signal again (or that the budget now has room for) is given a timer. */
static void recheck_threads(struct session *s)
{
    look_at_timed(s, cpu_unaccounted(s));
    sigbudget_view budget = {0};
    for (size_t i = 0; i < s->ntimers; i++) {
        struct thread_timer *t = &s->timers[i];
        if (t->why == SAMPLER_OVER_BUDGET ||
            (t->why == SAMPLER_BLOCKED && ran_since_mask_read(t)))
            give_timer(s, t, true, &budget);
    }
    s->masks_checked_ns = clock_mono_ns();
}

/* Merges the sorted `tids` into the thread table, each new thread given
 * a timer (or its reason for none) after the mappings were re-read
 * (unless `refreshed` says the caller just did), so that every thread
 * with a timer has its stack in the unwinder's table.
 * A full list (the scan) also says which threads are gone.  Announced
 * tids are threads just started: one already in the table is a tid reused
 * since the last scan, or a thread the scan saw during its start, and its
 * entry starts afresh. */
static int merge_threads(struct session *s, const pid_t *tids, size_t n,
                         bool full, bool refreshed)
{
    size_t cap = full ? n : s->ntimers + n;
    struct thread_timer *next = malloc((cap ? cap : 1) * sizeof *next);
    if (!next)
        return -ENOMEM;
    sigbudget_view budget = {0};
    size_t i = 0, j = 0, k = 0;
    while (i < s->ntimers || j < n) {
        struct thread_timer *old = i < s->ntimers ? &s->timers[i] : NULL;
        if (old && (j == n || old->tid < tids[j])) {
            i++;
            if (!full)
                next[k++] = *old;
            else if (old->why == TIMED)
                thread_timer_delete(old); /* exited */
            continue;
        }
        if (old && old->tid == tids[j]) {
            i++;
            if (full) {
                next[k++] = *old;
                j++;
                continue;
            }
            if (old->why == TIMED)
                thread_timer_delete(old);
        }
        if (!refreshed) {
            refresh_maps(s);
            refreshed = true;
        }
        next[k] = (struct thread_timer){.tid = tids[j++], .why = NEW};
        if (give_timer(s, &next[k], !full, &budget))
            k++;
    }
    free(s->timers);
    s->timers = next;
    s->ntimers = k;
    return 0;
}

/* Lists /proc/self/task: new threads get timers, exited ones lose theirs.
 * The mappings are re-read after the listing when it found a new thread
 * (merge_threads, before its timer: its stack block is mapped by then),
 * and at least every MAPS_MAX_AGE_NS: besides new threads' stacks and
 * objects the loader added (both re-read as they come), only mappings
 * made otherwise (a fiber's stack, code outside any object) change them,
 * and the walker reads those with process_vm_readv meanwhile.  Reading
 * them every second was half of the collector's CPU on the demo (perf). */
static int scan_threads(struct session *s)
{
    pid_t *tids = NULL;
    size_t n = 0;
    int rc = list_threads(&tids, &n);
    bool stale = clock_mono_ns() - s->maps_read_ns >= MAPS_MAX_AGE_NS;
    if (rc == 0 && stale)
        refresh_maps(s);
    if (rc == 0)
        rc = merge_threads(s, tids, n, true, stale);
    free(tids);
    s->scanned_ns = clock_mono_ns();
    s->announced_since_scan = 0;
    return rc;
}

/* Takes every announced tid out of its slot; returns how many, sorted and
 * without repeats, in `tids`. */
static size_t take_announced(pid_t tids[ANNOUNCE_SLOTS])
{
    size_t n = 0;
    for (size_t i = 0; i < ANNOUNCE_SLOTS; i++) {
        pid_t tid = atomic_exchange(&announced[i], 0);
        if (tid)
            tids[n++] = tid;
    }
    qsort(tids, n, sizeof *tids, compare_tids);
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (kept == 0 || tids[kept - 1] != tids[i])
            tids[kept++] = tids[i];
    return kept;
}

/* The threads that announced themselves get their timers now. */
static void learn_announced(struct session *s)
{
    pid_t tids[ANNOUNCE_SLOTS];
    size_t n = take_announced(tids);
    if (n && merge_threads(s, tids, n, false, false) == 0)
        s->announced_since_scan += (unsigned)n;
}

/* No lock and no allocation: it runs first thing in every thread started
 * while a profile runs (sampler.h).  Counted in `in_handler`, as a handler
 * is, so that the session it nudges is not freed meanwhile. */
void sampler_thread_started(void)
{
    atomic_fetch_add(&in_handler, 1);
    struct session *s = atomic_load(&active);
    if (s) {
        pid_t tid = gettid();
        bool placed = false;
        for (size_t i = 0; i < ANNOUNCE_SLOTS && !placed; i++) {
            int expected = 0;
            placed = atomic_compare_exchange_strong(
                &announced[((size_t)tid + i) % ANNOUNCE_SLOTS], &expected,
                tid);
        }
        if (!placed)
            atomic_store(&announce_overflow, true);
        if (!atomic_exchange(&s->threads_announced, true))
            nudge_collector(s);
    }
    atomic_fetch_sub(&in_handler, 1);
}

/* Threads started through the label core (thread_start_run) announce
 * themselves from their first instruction, before any constructor of the
 * program's could start one. */
__attribute__((constructor(102))) static void sampler_hooks(void)
{
    atomic_store(&label_hooks.thread_started, sampler_thread_started);
}

/* SIGNAL-SAFE (sigaction may be called from a handler): a nudge, so that
 * the collector sees the program's handler at once instead of at its next
 * tick.  Counted in `in_handler` like sampler_thread_started. */
void sampler_signal_claimed(int signo)
{
    atomic_fetch_add(&in_handler, 1);
    struct session *s = atomic_load(&active);
    if (s && s->signo == signo && !atomic_exchange(&s->signal_claimed, true))
        nudge_collector(s);
    atomic_fetch_sub(&in_handler, 1);
}

bool sampler_running(void)
{
    return atomic_load_explicit(&active, memory_order_relaxed) != NULL;
}

/* Whether the process's thread count (one fstat) differs from the
 * table's, which a thread that exited or one that was not announced
 * makes it: only then is /proc/self/task listed, 2-3 us a thread. */
static bool threads_changed(struct session *s)
{
    s->scanned_ns = clock_mono_ns();
    int dirfd = proctasks_open();
    if (dirfd < 0)
        return true; /* the listing says why */
    size_t n = proctasks_count(dirfd);
    close(dirfd);
    return n == 0 || n != s->ntimers;
}

/* Every TICK_NS: a table is built for any object the loader added, and
 * every CHARGE_NS the untimed threads' CPU is charged; once many threads
 * were announced or one found no slot, or every SCAN_NS if the thread
 * count changed, /proc/self/task is listed, and the mappings are read at
 * least every MAPS_MAX_AGE_NS; every RECHECK_NS the threads' signal
 * masks. */
static void tend_threads(struct session *s)
{
    unwind_refresh_if_loaded(); /* a dlopened object: its table now */
    if (clock_mono_ns() - s->charged_ns >= CHARGE_NS) {
        s->charged_ns = clock_mono_ns();
        for (size_t i = 0; i < s->ntimers; i++)
            charge_unsampled(s, &s->timers[i]);
    }
    if (s->announced_since_scan >= SCAN_AFTER ||
        atomic_exchange(&announce_overflow, false) ||
        (clock_mono_ns() - s->scanned_ns >= SCAN_NS && threads_changed(s)))
        scan_threads(s);
    else if (clock_mono_ns() - s->maps_read_ns >= MAPS_MAX_AGE_NS)
        refresh_maps(s);
    if (clock_mono_ns() - s->masks_checked_ns >= RECHECK_NS)
        recheck_threads(s);
}

/* Deletes every timer; the untimed threads' last CPU is charged. */
static void delete_timers(struct session *s)
{
    for (size_t i = 0; i < s->ntimers; i++) {
        if (s->timers[i].why == TIMED)
            thread_timer_delete(&s->timers[i]);
        else
            charge_unsampled(s, &s->timers[i]);
    }
    s->ntimers = 0;
}

/* Whether the signal's handler is still ours. */
static bool handler_is_ours(int signo)
{
    return signal_owner(signo, on_profiling_signal) == OWNER_CPPROF;
}

bool sampler_signal_is_programs(int signo)
{
    return signal_owner(signo, on_profiling_signal) == OWNER_PROGRAM;
}

/* The program installed its own handler for the signal: stop sending it
 * there, count the rest of the window as unsampled, and say so once. */
static void yield_signal(struct session *s)
{
    static atomic_int reported;
    s->taken = true;
    for (size_t i = 0; i < s->ntimers; i++)
        make_untimed(s, &s->timers[i], SAMPLER_SIGNAL_TAKEN);
    if (!atomic_exchange(&reported, 1))
        warn_stderr("cpprof: the program installed its own handler for "
                    "signal %d during a CPU profile; the profile stops "
                    "sampling and leaves the program's handler in "
                    "place\n", s->signo);
}

/* Sleeps until `deadline` (CLOCK_MONOTONIC ns) or a nudge, whichever
 * comes first. */
static void sleep_until_nudged(struct session *s, int64_t deadline)
{
    unsigned seen = atomic_load(&s->nudge);
    int64_t left = deadline - clock_mono_ns();
    if (left <= 0 || atomic_load(&s->stopping) ||
        atomic_load(&s->tables_wanted) || atomic_load(&s->threads_announced) ||
        atomic_load(&s->drain_wanted) || atomic_load(&s->signal_claimed))
        return;
    struct timespec ts = ns_to_timespec(left);
    futex_wait(&s->nudge, seen, &ts);
}

/* Every TICK_NS: the handler check, the drain and tending the threads.
 * In between, a nudge from a handler that met code mapped since the last
 * refresh (a plugin just dlopened) builds its table at once, so that only
 * the samples of the first moments keep their leaf alone; one from a
 * thread just started gives it its timer; one from a handler whose sample
 * filled another quarter of the ring drains it; and one from the
 * program's sigaction for the signal (sampler_signal_claimed) checks the
 * handler at once.  The tick was 20 ms, and its 50 wake-ups a second
 * were a third of the collector's CPU (perf, demo under scrapes): the
 * nudges make the drain and the handler check independent of it.
 * The thread is the profiler's:
 * named and labelled so (pprof_internal=sampler), so that
 * `-tagignore pprof_internal=sampler` leaves it out of a profile. */
static void *collector_main(void *arg)
{
    struct session *s = arg;
    atomic_store(&s->collector_tid, gettid());
    pthread_setname_np(pthread_self(), "cpprof-sampler");
    thread_label_internal("sampler"); /* unlabelled if out of memory */
    int64_t next_tick = clock_mono_ns() + TICK_NS;
    while (!atomic_load(&s->stopping)) {
        sleep_until_nudged(s, next_tick);
        if (atomic_load(&s->stopping))
            break;
        if (atomic_exchange(&s->tables_wanted, false)) {
            unwind_refresh_if_loaded();
            ring_drain(s); /* the put-off walks, and their buffers back */
        }
        if (atomic_exchange(&s->threads_announced, false))
            learn_announced(s);
        bool claimed = atomic_exchange(&s->signal_claimed, false);
        if (claimed && !s->taken && !handler_is_ours(s->signo))
            yield_signal(s);
        if (atomic_exchange(&s->drain_wanted, false))
            ring_drain(s);
        if (clock_mono_ns() < next_tick)
            continue;
        if (!s->taken && !handler_is_ours(s->signo))
            yield_signal(s);
        ring_drain(s);
        tend_threads(s);
        next_tick = clock_mono_ns() + TICK_NS;
    }
    retired_collector_ns += clock_thread_cpu_ns();
    return NULL;
}

int64_t sampler_collector_cpu_ns(void)
{
    pthread_mutex_lock(&sampler_mu);
    int64_t ns = retired_collector_ns;
    pid_t tid = running ? atomic_load(&running->collector_tid) : 0;
    int64_t now = tid ? tid_cpu_ns(tid) : -1;
    if (now > 0)
        ns += now;
    pthread_mutex_unlock(&sampler_mu);
    return ns;
}

void sampler_set_ring_slots(size_t slots)
{
    atomic_store(&ring_slots_fixed, slots);
}

/* Ring slots, a power of two: unless fixed, enough for a quarter second
 * of every CPU sampling at full rate, more than ten drains' worth. */
static size_t ring_slots(long hz)
{
    size_t want = atomic_load(&ring_slots_fixed), n = 1;
    if (!want) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        want = (size_t)(cpus > 0 ? cpus : 1) * (size_t)hz / 4;
        want = want < RING_MIN ? RING_MIN : want > RING_MAX ? RING_MAX : want;
    }
    while (n < want)
        n *= 2;
    return n;
}

static void session_free(struct session *s)
{
    if (!s)
        return;
    stacktab_free(s->samples);
    if (s->collector_labels)
        cpprof_labelset_release(s->collector_labels);
    if (s->snapshots)
        munmap(s->snapshots, SNAPSHOTS * sizeof *s->snapshots);
    free(s->ring);
    free(s->timers);
    free(s);
}

static struct session *session_new(long hz, int signo)
{
    struct session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    size_t nslots = ring_slots(hz);
    s->signo = signo;
    s->cookie = COOKIE_MAGIC | (atomic_fetch_add(&sessions, 1) & 0xfffff);
    s->period = sampler_period_ns(hz);
    s->rng = (uint64_t)clock_mono_ns() | 1;
    /* The first recheck one tick after the start (recheck_threads). */
    s->masks_checked_ns = clock_mono_ns() - RECHECK_NS + TICK_NS;
    s->mask = nslots - 1;
    s->ring = calloc(nslots, sizeof *s->ring);
    s->samples = stacktab_new(2);
    const char *kv[] = {PPROF_INTERNAL_KEY, "collectors"};
    if (cpprof_labels(&s->collector_labels, 2, kv) != 0)
        s->collector_labels = NULL; /* such samples go unlabelled */
    s->snapshots = mmap(NULL, SNAPSHOTS * sizeof *s->snapshots,
                        PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    if (s->snapshots == MAP_FAILED)
        s->snapshots = NULL;
    if (!s->ring || !s->samples || !s->snapshots) {
        session_free(s);
        return NULL;
    }
    for (size_t i = 0; i < nslots; i++)
        atomic_init(&s->ring[i].seq, i);
    return s;
}

/* Installs the handler unless the application has one of its own. */
static int install_handler(struct session *s)
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

/* How long SIG_IGN is held before SIG_DFL comes back (restore_handler). */
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
static void restore_handler(struct session *s)
{
    if (!handler_is_ours(s->signo))
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

/* Waits until no handler can still be using the session. */
static void deactivate(void)
{
    atomic_store(&active, NULL);
    while (atomic_load(&in_handler) != 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static int session_begin(struct session *s)
{
    int rc = install_handler(s);
    if (rc != 0)
        return rc;
    /* Announcements left from an earlier session: the scan below finds
     * those threads if they still run. */
    for (size_t i = 0; i < ANNOUNCE_SLOTS; i++)
        atomic_store(&announced[i], 0);
    atomic_store(&announce_overflow, false);
    atomic_store(&active, s);
    rc = scan_threads(s);
    mark_accounted(s);
    if (rc == 0 && s->refused)
        rc = CPPROF_ENOTIMER; /* seccomp or a container said no */
    if (rc == 0)
        rc = -pthread_create(&s->collector, NULL, collector_main, s);
    if (rc != 0) {
        delete_timers(s);
        restore_handler(s);
        deactivate();
        ring_drain(s);
    }
    return rc;
}

/* fork(): sampler_mu is held across it, so no session is half started or
 * stopped in the child. */
static void sampler_atfork_prepare(void) { pthread_mutex_lock(&sampler_mu); }
static void sampler_atfork_parent(void) { pthread_mutex_unlock(&sampler_mu); }

/* The child has none of the parent's timers and no collector thread, so a
 * running session is dropped (its memory stays: no allocator calls after
 * fork) and the signal gets its disposition from before the profile, as a
 * stop would have left it. */
ATFORK_CHILD static void sampler_atfork_child(void)
{
    struct session *s = running;
    if (s && handler_is_ours(s->signo))
        sigaction(s->signo, &s->previous, NULL);
    running = NULL;
    retired_collector_ns = 0; /* the parent's */
    atomic_store(&active, NULL);
    atomic_store(&in_handler, 0);
    atfork_mutex_release(&sampler_mu);
}

int sampler_start(long hz, int signo)
{
    if (hz < 1 || hz > 1000 || signo < 1 || signo >= NSIG)
        return -EINVAL;
    static const atfork_handlers on_fork = {
        sampler_atfork_prepare, sampler_atfork_parent, sampler_atfork_child};
    atfork_add(ATFORK_SAMPLER, &on_fork);
    pthread_mutex_lock(&sampler_mu);
    int rc = CPPROF_EBUSY;
    if (!running) {
        struct session *s = session_new(hz, signo);
        rc = s ? session_begin(s) : -ENOMEM;
        if (rc == 0)
            running = s;
        else
            session_free(s);
    }
    pthread_mutex_unlock(&sampler_mu);
    return rc;
}

static void stop_collector(struct session *s)
{
    atomic_store(&s->stopping, true);
    atomic_fetch_add(&s->nudge, 1);
    futex_wake(&s->nudge, 1);
    pthread_join(s->collector, NULL);
}

int sampler_stop(sampler_result *out)
{
    pthread_mutex_lock(&sampler_mu);
    struct session *s = running;
    if (!s) {
        pthread_mutex_unlock(&sampler_mu);
        return CPPROF_ENOTRUNNING;
    }
    stop_collector(s);
    if (!s->taken && !handler_is_ours(s->signo))
        yield_signal(s);
    delete_timers(s);
    restore_handler(s);
    deactivate();
    ring_drain(s);
    running = NULL;
    pthread_mutex_unlock(&sampler_mu);
    out->samples = s->samples;
    out->lost = atomic_load(&s->lost);
    memcpy(out->unsampled, s->unsampled, sizeof out->unsampled);
    out->unsampled[SAMPLER_NO_STACK_ROOM] =
        (sampler_unsampled){atomic_load(&s->no_room_threads),
                            atomic_load(&s->no_room) * s->period};
    s->samples = NULL;
    session_free(s);
    return 0;
}

const char *sampler_reason_frame(sampler_reason why)
{
    static const char *const frames[SAMPLER_NREASONS] = {
        [SAMPLER_BLOCKED] = "cpprof.unsampled.signalBlocked",
        [SAMPLER_OVER_BUDGET] = "cpprof.unsampled.queuedSignalLimit",
        [SAMPLER_SIGNAL_TAKEN] = "cpprof.unsampled.signalTakenByProgram",
        [SAMPLER_REFUSED] = "cpprof.unsampled.timerRefused",
        [SAMPLER_NO_STACK_ROOM] = "cpprof.unsampled.stackTooShort",
    };
    return frames[why];
}

const char *sampler_reason_text(sampler_reason why)
{
    static const char *const texts[SAMPLER_NREASONS] = {
        [SAMPLER_BLOCKED] = "they block the profiling signal",
        [SAMPLER_OVER_BUDGET] =
            "timers for them would have taken the program's share of the "
            "queued-signal limit (ulimit -i)",
        [SAMPLER_SIGNAL_TAKEN] = "the program installed its own handler for "
                                 "the profiling signal during the profile",
        [SAMPLER_REFUSED] = "the system refused their CPU timers",
        [SAMPLER_NO_STACK_ROOM] =
            "the signal came while they ran on a stack with too little left "
            "for the walk (a small sigaltstack)",
    };
    return texts[why];
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(sampler_collector_cpu_ns);
UPPER_CALLS(sampler_period_ns);
UPPER_CALLS(sampler_reason_frame);
UPPER_CALLS(sampler_reason_text);
UPPER_CALLS(sampler_running);
UPPER_CALLS(sampler_signal_is_programs);
UPPER_CALLS(sampler_start);
UPPER_CALLS(sampler_stop);
