/*
 * sampler.c -- the CPU sampler: per-thread CPU-time timers, the profiling
 * signal handler, and the collector thread that aggregates its samples.
 * This file is a profiling session: begun, its collector thread's loop,
 * stopped.  The rest of the family, one concern a file around
 * sampler_int.h: sampler_signal.c is the handler (what runs in the
 * signal) and its installation; sampler_ring.c the collector's side of
 * the ring the handler fills, with the walks put off until a table is
 * built; sampler_timers.c the threads of the process and their timers.
 *
 * The program's own handler.  The disposition is checked at every
 * collector tick: a program that installs its own handler for the signal
 * while a profile runs keeps it.  The timers are deleted (at most one tick
 * of cpprof's signals reaches its handler first), the rest of the window
 * counts as unsampled, stderr says so once, and stopping leaves the
 * handler alone instead of restoring the one from before the profile.
 *
 * Shutdown.  Handlers reach the session only through `sampler_active`,
 * after counting themselves in `sampler_in_handler`; stopping deletes the
 * timers, sets the signal to SIG_IGN (which discards any pending
 * instance) before restoring the previous disposition, clears
 * `sampler_active` and waits for `sampler_in_handler` to drop to zero.
 * Only then is the ring freed.  The unwinder's tables stay: the census
 * walks with them too.
 */
#define _GNU_SOURCE
#include "sampler_int.h"
#include "atfork.h"
#include "thread.h"
#include "unwind.h"
#include "util.h"
#include "warn.h"
#include "upper_calls.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define TICK_NS 100000000LL /* collector: drain and tend, 10 a second */
#define RING_MIN 1024       /* slots; about 0.6 MiB */
#define RING_MAX 65536
#define COOKIE_MAGIC 0x43500000 /* "CP" in si_value, plus a session number */

static pthread_mutex_t sampler_mu ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;
static struct session *running; /* under sampler_mu */
_Atomic(struct session *) sampler_active; /* what handlers see */
atomic_long sampler_in_handler; /* handlers and announcing threads inside */
static atomic_uint sessions;
static atomic_size_t ring_slots_fixed;
/* CPU time of the collectors of finished sessions; under sampler_mu (a
 * collector adds its own as it ends, which is inside sampler_stop). */
static int64_t retired_collector_ns;

int64_t sampler_period_ns(long hz)
{
    return NSEC_PER_SEC / hz;
}

bool sampler_running(void)
{
    return atomic_load_explicit(&sampler_active, memory_order_relaxed) != NULL;
}

/* The program installed its own handler for the signal: stop sending it
 * there, count the rest of the window as unsampled, and say so once. */
static void yield_signal(struct session *s)
{
    static atomic_int reported;
    s->taken = true;
    for (size_t i = 0; i < s->ntimers; i++)
        sampler_make_untimed(s, &s->timers[i], SAMPLER_SIGNAL_TAKEN);
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
            /* The put-off walks, and their buffers back. */
            sampler_ring_drain(s);
        }
        if (atomic_exchange(&s->threads_announced, false))
            sampler_learn_announced(s);
        bool claimed = atomic_exchange(&s->signal_claimed, false);
        if (claimed && !s->taken && !sampler_handler_is_ours(s->signo))
            yield_signal(s);
        if (atomic_exchange(&s->drain_wanted, false))
            sampler_ring_drain(s);
        if (clock_mono_ns() < next_tick)
            continue;
        if (!s->taken && !sampler_handler_is_ours(s->signo))
            yield_signal(s);
        sampler_ring_drain(s);
        sampler_tend_threads(s);
        thread_say_scope_left(); /* what the samples saw (thread.h) */
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

/* Waits until no handler can still be using the session. */
static void deactivate(void)
{
    atomic_store(&sampler_active, NULL);
    while (atomic_load(&sampler_in_handler) != 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static int session_begin(struct session *s)
{
    int rc = sampler_install_handler(s);
    if (rc != 0)
        return rc;
    /* Announcements left from an earlier session: the scan below finds
     * those threads if they still run. */
    sampler_forget_announced();
    atomic_store(&sampler_active, s);
    rc = sampler_scan_threads(s);
    sampler_mark_accounted(s);
    if (rc == 0 && s->refused)
        rc = CPPROF_ENOTIMER; /* seccomp or a container said no */
    if (rc == 0)
        rc = -pthread_create(&s->collector, NULL, collector_main, s);
    if (rc != 0) {
        sampler_delete_timers(s);
        sampler_restore_handler(s);
        deactivate();
        sampler_ring_drain(s);
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
    if (s && sampler_handler_is_ours(s->signo))
        sigaction(s->signo, &s->previous, NULL);
    running = NULL;
    retired_collector_ns = 0; /* the parent's */
    atomic_store(&sampler_active, NULL);
    atomic_store(&sampler_in_handler, 0);
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
    if (!s->taken && !sampler_handler_is_ours(s->signo))
        yield_signal(s);
    sampler_delete_timers(s);
    sampler_restore_handler(s);
    deactivate();
    sampler_ring_drain(s);
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
UPPER_CALLS(sampler_start);
UPPER_CALLS(sampler_stop);
