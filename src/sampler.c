/*
 * sampler.c -- the CPU sampler: per-thread CPU-time timers, the profiling
 * signal handler, and the collector thread that aggregates its samples.
 *
 * Timers.  As Go does on Linux since 1.18, every thread gets a timer of its
 * own on its own CPU-time clock, delivered to it alone (SIGEV_THREAD_ID):
 * a single process-wide setitimer delivers at most about one signal per
 * tick, so it loses samples once more than a couple of cores are busy (Go
 * issue 35057).  The clock of any thread can be named from its tid, so the
 * collector thread covers threads that never used cpprof: it lists
 * /proc/self/task every TICK_NS (a few microseconds), creates timers for new
 * threads and deletes those of threads that exited.  First expiries are random within one
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
 * Shutdown.  Handlers reach the session only through `active`, after
 * counting themselves in `in_handler`; stopping deletes the timers, sets
 * the signal to SIG_IGN (which discards any pending instance) before
 * restoring the previous disposition, clears `active` and waits for
 * `in_handler` to drop to zero.  Only then is the ring freed.  The
 * unwinder's tables stay: the census walks with them too.
 */
#define _GNU_SOURCE
#include "sampler.h"
#include "labels.h"
#include "thread.h"
#include "unwind.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NSEC_PER_SEC 1000000000LL
#define TICK_NS 20000000LL  /* collector: drain and thread scan, 50 a second */
#define MAPS_NS 100000000LL /* mappings re-read at least this often */
#define RING_MIN 1024       /* slots; about 0.6 MiB */
#define RING_MAX 65536
#define COOKIE_MAGIC 0x43500000 /* "CP" in si_value, plus a session number */

/* Linux names the CPU-time clock of thread `tid` (include/linux/posix-timers.h:
 * MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)). */
static clockid_t thread_cpu_clock(pid_t tid)
{
    return (clockid_t)((~(unsigned)tid << 3) | 6);
}

struct slot {
    atomic_size_t seq; /* == position: free; position + 1: filled */
    unsigned depth, flags;
    int64_t weight; /* expirations this sample stands for */
    const cpprof_labelset *labels; /* holds a reference */
    uintptr_t pcs[STACK_MAX_FRAMES];
};

struct thread_timer {
    pid_t tid;
    timer_t timer;
};

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

    stacktab *samples;   /* the collector's, until stop */
    struct thread_timer *timers; /* sorted by tid */
    size_t ntimers;
    uint64_t rng;
    int64_t maps_refreshed_ns;

    pthread_t collector;
    pthread_mutex_t mu;
    pthread_cond_t wake;
    bool stopping;
};

static pthread_mutex_t sampler_mu = PTHREAD_MUTEX_INITIALIZER;
static struct session *running; /* under sampler_mu */
static _Atomic(struct session *) active; /* what handlers see */
static atomic_long in_handler;
static atomic_uint sessions;
static atomic_size_t ring_slots_fixed;

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

/* SIGNAL-SAFE */
static void record_sample(struct session *s, const void *ucontext,
                          int64_t weight)
{
    size_t pos;
    struct slot *slot = ring_claim(s, &pos);
    if (!slot) {
        atomic_fetch_add_explicit(&s->lost, weight, memory_order_relaxed);
        return;
    }
    slot->depth = unwind_context(ucontext, slot->pcs, STACK_MAX_FRAMES,
                                 &slot->flags);
    const cpprof_labelset *labels = thread_current_labels();
    if (labels)
        labelset_ref_signal_safe(labels);
    slot->labels = labels;
    slot->weight = weight;
    atomic_store_explicit(&slot->seq, pos + 1, memory_order_release);
}

/* SIGNAL-SAFE: the profiling signal handler. */
static void on_profiling_signal(int signo, siginfo_t *si, void *ucontext)
{
    (void)signo;
    int saved_errno = errno;
    atomic_fetch_add(&in_handler, 1);
    struct session *s = atomic_load(&active);
    if (s && si->si_code == SI_TIMER && si->si_value.sival_int == s->cookie)
        record_sample(s, ucontext, 1 + (int64_t)si->si_overrun);
    atomic_fetch_sub(&in_handler, 1);
    errno = saved_errno;
}

/* ---- Collector side --------------------------------------------------- */

/* Moves every published slot into s->samples. */
static void ring_drain(struct session *s)
{
    for (;;) {
        struct slot *slot = &s->ring[s->tail & s->mask];
        size_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
        if (seq != s->tail + 1)
            return;
        int64_t values[2] = {slot->weight, slot->weight * s->period};
        if (stacktab_add(s->samples, slot->pcs, slot->depth, slot->flags,
                         slot->labels, values) != 0)
            atomic_fetch_add(&s->lost, slot->weight);
        cpprof_labelset_release(slot->labels);
        atomic_store_explicit(&slot->seq, s->tail + s->mask + 1,
                              memory_order_release);
        s->tail++;
    }
}

static int64_t monotonic_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * NSEC_PER_SEC + t.tv_nsec;
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

/* A timer on thread `tid`'s CPU clock that signals that thread every
 * period, first after a random fraction of one. */
static int thread_timer_start(struct session *s, pid_t tid, timer_t *out)
{
    struct sigevent sev = {0};
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = s->signo;
    sev.sigev_value.sival_int = s->cookie;
    sev._sigev_un._tid = tid;
    if (timer_create(thread_cpu_clock(tid), &sev, out) != 0)
        return -errno;
    struct itimerspec its = {
        .it_interval = ns_to_timespec(s->period),
        .it_value = ns_to_timespec(1 + (int64_t)(next_random(s) %
                                                 (uint64_t)s->period)),
    };
    if (timer_settime(*out, 0, &its, NULL) != 0) {
        int rc = -errno;
        timer_delete(*out);
        return rc;
    }
    return 0;
}

static int compare_tids(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* The tids of every thread of the process, sorted. */
static int list_threads(pid_t **out, size_t *n)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -errno;
    size_t cap = 64, len = 0;
    pid_t *tids = malloc(cap * sizeof *tids);
    struct dirent *e;
    while (tids && (e = readdir(d))) {
        pid_t tid = (pid_t)atoi(e->d_name);
        if (tid <= 0)
            continue;
        if (len == cap) {
            pid_t *bigger = realloc(tids, 2 * cap * sizeof *tids);
            if (!bigger) {
                free(tids);
                tids = NULL;
                break;
            }
            tids = bigger;
            cap *= 2;
        }
        tids[len++] = tid;
    }
    closedir(d);
    if (!tids)
        return -ENOMEM;
    qsort(tids, len, sizeof *tids, compare_tids);
    *out = tids;
    *n = len;
    return 0;
}

/* Refreshes the unwinder's table of mappings (its failure only costs
 * stacks: the walker keeps the older table or records bare PCs). */
static void refresh_maps(struct session *s)
{
    unwind_refresh_maps();
    s->maps_refreshed_ns = monotonic_ns();
}

/* Brings the timer list in line with the threads alive now: a timer for
 * each new thread, none for threads gone.  The mappings are re-read every
 * MAPS_NS and before any new timer, so that every thread with a timer has
 * its stack in the unwinder's table, and at any tick after the loader
 * added or removed an object, so that its code has a table. */
static int scan_threads(struct session *s)
{
    pid_t *tids = NULL;
    size_t n = 0;
    int rc = list_threads(&tids, &n);
    if (rc != 0)
        return rc;
    bool refreshed = monotonic_ns() - s->maps_refreshed_ns >= MAPS_NS;
    if (refreshed)
        refresh_maps(s);
    else
        unwind_refresh_if_loaded(); /* a dlopened object: its table now */
    struct thread_timer *next = malloc((n ? n : 1) * sizeof *next);
    if (!next) {
        free(tids);
        return -ENOMEM;
    }
    size_t i = 0, j = 0, k = 0;
    while (i < s->ntimers || j < n) {
        if (j == n || (i < s->ntimers && s->timers[i].tid < tids[j])) {
            timer_delete(s->timers[i++].timer); /* thread exited */
        } else if (i == s->ntimers || tids[j] < s->timers[i].tid) {
            if (!refreshed) {
                refresh_maps(s);
                refreshed = true;
            }
            next[k].tid = tids[j++];
            if (thread_timer_start(s, next[k].tid, &next[k].timer) == 0)
                k++; /* else it exited meanwhile */
        } else {
            next[k++] = s->timers[i++];
            j++;
        }
    }
    free(tids);
    free(s->timers);
    s->timers = next;
    s->ntimers = k;
    return 0;
}

static void delete_timers(struct session *s)
{
    for (size_t i = 0; i < s->ntimers; i++)
        timer_delete(s->timers[i].timer);
    s->ntimers = 0;
}

/* The collector thread: drains and rescans the threads every TICK_NS. */
static void *collector_main(void *arg)
{
    struct session *s = arg;
    pthread_setname_np(pthread_self(), "cpprof-sampler");
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec wake = ns_to_timespec(monotonic_ns() + TICK_NS);
        pthread_cond_timedwait(&s->wake, &s->mu, &wake);
        if (s->stopping)
            break;
        pthread_mutex_unlock(&s->mu);
        ring_drain(s);
        scan_threads(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
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
    free(s->ring);
    free(s->timers);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
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
    s->rng = (uint64_t)monotonic_ns() | 1;
    s->mask = nslots - 1;
    s->ring = calloc(nslots, sizeof *s->ring);
    s->samples = stacktab_new(2);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->mu, NULL);
    if (!s->ring || !s->samples) {
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
    return 0;
}

/* Puts the previous disposition back.  SIG_IGN first: it discards signals
 * still pending from deleted timers, which SIG_DFL would turn into the
 * process's death. */
static void restore_handler(struct session *s)
{
    struct sigaction ignore = {0};
    ignore.sa_handler = SIG_IGN;
    sigaction(s->signo, &ignore, NULL);
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
    atomic_store(&active, s);
    rc = scan_threads(s);
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

int sampler_start(long hz, int signo)
{
    if (hz < 1 || hz > 1000 || signo < 1 || signo >= NSIG)
        return -EINVAL;
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
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->collector, NULL);
}

int sampler_stop(stacktab **samples, int64_t *lost)
{
    pthread_mutex_lock(&sampler_mu);
    struct session *s = running;
    if (!s) {
        pthread_mutex_unlock(&sampler_mu);
        return CPPROF_ENOTRUNNING;
    }
    stop_collector(s);
    delete_timers(s);
    restore_handler(s);
    deactivate();
    ring_drain(s);
    running = NULL;
    pthread_mutex_unlock(&sampler_mu);
    *samples = s->samples;
    *lost = atomic_load(&s->lost);
    s->samples = NULL;
    session_free(s);
    return 0;
}
