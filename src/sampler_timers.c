/*
 * sampler_timers.c -- the threads of the process and their CPU-time
 * timers: which threads have one, which cannot have one and why, and the
 * CPU time of theirs that no sample counts.  The collector thread tends
 * them (sampler.c).  Apart from sampler.c because the table of threads is
 * state with rules of its own.
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
 */
#define _GNU_SOURCE
#include "sampler_int.h"
#include "labelhooks.h"
#include "procfile.h"
#include "proctasks.h"
#include "sigbudget.h"
#include "thread.h"
#include "unwind.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SCAN_NS 1000000000LL /* /proc/self/task listed this often */
#define MAPS_MAX_AGE_NS 10000000000LL /* mappings re-read at least this often */
#define SCAN_AFTER 64       /* ...or after this many threads announced */
#define ANNOUNCE_SLOTS 256  /* announced tids not yet taken by the collector */
#define CHARGE_NS 100000000LL /* untimed threads' CPU read this often */

/* Tids of threads started since the collector last looked; 0: free.  A
 * thread that finds no free slot sets `announce_overflow`, and the
 * collector lists /proc/self/task instead. */
static atomic_int announced[ANNOUNCE_SLOTS];
static atomic_bool announce_overflow;

static uint64_t next_random(struct session *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
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
void sampler_make_untimed(struct session *s, struct thread_timer *t, int why)
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
        sampler_make_untimed(s, t, SAMPLER_SIGNAL_TAKEN);
        return true;
    }
    int64_t cpu = tid_cpu_ns(t->tid);
    if (cpu < 0)
        return false; /* exited meanwhile: its clock is gone */
    bool blocked = mask_settled && blocks_signal(t->tid, s->signo);
    if (blocked && t->why == SAMPLER_BLOCKED) {
        sampler_make_untimed(s, t, SAMPLER_BLOCKED);
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
        sampler_make_untimed(s, t, SAMPLER_OVER_BUDGET);
    } else {
        if (!s->refused)
            s->refused = rc;
        sampler_make_untimed(s, t, SAMPLER_REFUSED);
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
    sampler_make_untimed(s, t, SAMPLER_BLOCKED);
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

void sampler_mark_accounted(struct session *s)
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
        sampler_mark_accounted(s);
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
int sampler_scan_threads(struct session *s)
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
void sampler_learn_announced(struct session *s)
{
    pid_t tids[ANNOUNCE_SLOTS];
    size_t n = take_announced(tids);
    if (n && merge_threads(s, tids, n, false, false) == 0)
        s->announced_since_scan += (unsigned)n;
}

/* No lock and no allocation: it runs first thing in every thread started
 * while a profile runs (sampler.h).  Counted in `sampler_in_handler`, as
 * a handler is, so that the session it nudges is not freed meanwhile. */
void sampler_thread_started(void)
{
    atomic_fetch_add(&sampler_in_handler, 1);
    struct session *s = atomic_load(&sampler_active);
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
            sampler_nudge_collector(s);
    }
    atomic_fetch_sub(&sampler_in_handler, 1);
}

/* Threads started through the label core (thread_start_run) announce
 * themselves from their first instruction, before any constructor of the
 * program's could start one. */
__attribute__((constructor(102))) static void sampler_hooks(void)
{
    atomic_store(&label_hooks.thread_started, sampler_thread_started);
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
void sampler_tend_threads(struct session *s)
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
        sampler_scan_threads(s);
    else if (clock_mono_ns() - s->maps_read_ns >= MAPS_MAX_AGE_NS)
        refresh_maps(s);
    if (clock_mono_ns() - s->masks_checked_ns >= RECHECK_NS)
        recheck_threads(s);
}

/* Deletes every timer; the untimed threads' last CPU is charged. */
void sampler_delete_timers(struct session *s)
{
    for (size_t i = 0; i < s->ntimers; i++) {
        if (s->timers[i].why == TIMED)
            thread_timer_delete(&s->timers[i]);
        else
            charge_unsampled(s, &s->timers[i]);
    }
    s->ntimers = 0;
}

void sampler_forget_announced(void)
{
    for (size_t i = 0; i < ANNOUNCE_SLOTS; i++)
        atomic_store(&announced[i], 0);
    atomic_store(&announce_overflow, false);
}
