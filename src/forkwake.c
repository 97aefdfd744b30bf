/*
 * forkwake.c -- pre-fork workers that cost nothing until asked.
 *
 * PostgreSQL forks a backend per connection, nginx and Apache a worker per
 * CPU or client.  A worker that served its own profiles from the fork on
 * cost 10 threads, 3 MB and a listening socket on a port nobody chose, per
 * process (1,000 connections: 11,000 threads).  So a fork of a serving
 * process is only *armed*: its fork handler lists it in the family's table
 * (one MAP_SHARED mapping made before the first fork) and notes who forked
 * it.  No thread, descriptor or allocation of cpprof's exists in it until a
 * client asks the serving process for it (http_forks.c relays the request):
 * the parent then sends it the wake signal (worker_signal, SIGRTMIN+7).
 *
 * The handler cannot start anything itself (no allocation, no thread in a
 * signal handler).  It sets a flag, and the worker starts its part at its
 * next *wait*: epoll_wait, epoll_pwait, poll, ppoll, select, pselect and
 * sigsuspend are interposed, and a worker's event loop sits in one of them
 * whenever it is idle (PostgreSQL's backends and nginx's workers in
 * epoll_wait, nginx's master in sigsuspend), between requests when busy.
 * nanosleep, clock_nanosleep, usleep, sleep and pause too: a worker that
 * idles by sleeping is reached as one that polls.
 * A wait is a point where the program holds none of the C library's locks
 * and expects to give up the CPU: the interposer starts the part there, in
 * the program's thread, outside any handler.  The signal interrupts a
 * blocked wait, which returns EINTR whatever SA_RESTART says; the
 * interposer then starts the part and waits again for the time left, so
 * the program never sees the interruption.  (A signal of the program's
 * that lands in the same few microseconds loses its EINTR to that retry:
 * its handler has run, and a program that keeps a self-pipe or signalfd,
 * as PostgreSQL and nginx do, sees it at once.)  A signal that reaches a
 * thread outside any wait is passed on to a thread inside one, if any;
 * else the flag waits for the next wait to begin.  Waits the program makes
 * elsewhere (pthread_cond_wait, a raw system call) are not watched: the
 * parent sends again while it waits for the worker, and tells its client
 * why when none answered.
 *
 * A daemon's fork (nginx's `daemon on`) is the one the user must reach at
 * the address they chose once its parent exits: PR_SET_PDEATHSIG sends
 * the same signal when the parent goes, and within ADOPT_WINDOW_NS of the
 * fork that asks the worker to take the parent's place.
 *
 * Outside an armed worker each interposed wait costs one relaxed load.
 */
#define _GNU_SOURCE
#include "forkwake.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "atfork.h"
#include "config.h"
#include "cpprof.h"
#include "interpose.h"
#include "own.h"
#include "procfile.h"
#include "sigowner.h"
#include "upper_calls.h"
#include "util.h"

#define EXPORT __attribute__((visibility("default")))

/* The value a wake carries (sigqueue), so that a stray sigqueue of the
 * same signal by the parent is not taken for one. */
#define WAKE_VALUE 0x63707066 /* "cppf" */
/* How long after the fork a parent's exit makes the worker take its place:
 * a daemon's first process exits at once (under a sanitizer, 2 s later);
 * a worker whose parent dies after hours is no daemon. */
#define ADOPT_WINDOW_NS (10 * 1000000000LL)

static forkwake_slot *table;
static int wake_signo;
/* The family's secret, inherited by every fork (http_relay.c names its
 * listeners with it). */
static char secret[17];

const char *forkwake_secret(void) { return secret; }
UPPER_CALLS(forkwake_secret);

/* This process as a worker: who forked it (0: not armed), when, what to
 * start, its slot. */
static _Atomic pid_t armed_parent ATFORK_HELD;
static pid_t worker_parent ATFORK_HELD; /* kept while the part runs */
static int64_t armed_at_ns ATFORK_HELD;
static void (*start_part)(int what) ATFORK_HELD;
static int my_slot ATFORK_HELD = -1;
/* FORKWAKE_START / _ADOPT asked and not yet acted on. */
static atomic_int requested ATFORK_HELD;
/* A thread of this process in an interposed wait (any one will do), and
 * per thread: in one now, and whether the wake's handler ran during it. */
static _Atomic pid_t waiting_tid ATFORK_HELD;
static __thread int in_wait __attribute__((tls_model("initial-exec")));
static __thread int woken __attribute__((tls_model("initial-exec")));
/* The thread's id, read once: a wait asks it twice.  The fork handlers
 * that arm a child clear the forking thread's, the only one the child
 * has. */
static __thread pid_t own_tid __attribute__((tls_model("initial-exec")));

/* SIGNAL-SAFE */
static pid_t self_tid(void)
{
    if (own_tid == 0)
        own_tid = (pid_t)syscall(SYS_gettid);
    return own_tid;
}

forkwake_slot *forkwake_table(void) { return table; }
UPPER_CALLS(forkwake_table);

/* ---- The signal -------------------------------------------------------- */

/* SIGNAL-SAFE: the wake.  From the parent (sigqueue with WAKE_VALUE), from
 * the parent's exit (PR_SET_PDEATHSIG: the parent is no longer getppid),
 * or passed on by another thread of this process (tgkill).  Marks what is
 * asked; the wait it interrupted, if any, acts on it. */
static void on_wake_signal(int signo, siginfo_t *si, void *uc)
{
    (void)uc;
    pid_t parent = atomic_load(&armed_parent);
    if (parent == 0)
        return;
    int saved = errno;
    pid_t self = getpid();
    bool passed_on = si->si_code == SI_TKILL && si->si_pid == self;
    if (si->si_code == SI_QUEUE && si->si_pid == parent &&
        si->si_value.sival_int == WAKE_VALUE)
        atomic_fetch_or(&requested, FORKWAKE_START);
    else if (!passed_on && getppid() != parent &&
             clock_mono_ns() - armed_at_ns < ADOPT_WINDOW_NS)
        atomic_fetch_or(&requested, FORKWAKE_ADOPT);
    else if (!passed_on) {
        errno = saved;
        return;
    }
    if (in_wait) {
        woken = 1;
    } else if (!passed_on) {
        pid_t t = atomic_load(&waiting_tid);
        if (t > 0 && t != self_tid())
            syscall(SYS_tgkill, self, t, signo);
    }
    errno = saved;
}

int forkwake_prepare(const char **why)
{
    wake_signo = (int)cfg_int(CFG_WORKER_SIGNAL);
    static const cfg_id others[] = {CFG_CPU_SIGNAL, CFG_CENSUS_SIGNAL,
                                    CFG_ACCOUNTING_SIGNAL};
    for (size_t i = 0; i < sizeof others / sizeof *others; i++)
        if (cfg_int(others[i]) == wake_signo) {
            wake_signo = 0;
            *why = "the worker signal is also another of cpprof's "
                   "(cpu_signal, census_signal or accounting_signal): set "
                   "CPPROF_WORKER_SIGNAL to another";
            return CPPROF_ESIGTAKEN;
        }
    int rc = signal_claim_check(wake_signo, on_wake_signal);
    if (rc < 0) {
        wake_signo = 0; /* nothing is armed: forkwake_arm does nothing */
        *why = rc == CPPROF_ESIGTAKEN
                   ? "the program has a handler of its own on the worker "
                     "signal (set CPPROF_WORKER_SIGNAL to one it leaves "
                     "alone)"
                   : "the worker signal cannot be installed";
        return rc;
    }
    if (rc == 0) {
        struct sigaction sa = {.sa_flags = SA_SIGINFO | SA_RESTART};
        sa.sa_sigaction = on_wake_signal;
        sigemptyset(&sa.sa_mask);
        if (sigaction(wake_signo, &sa, NULL) != 0) {
            int err = -errno;
            wake_signo = 0;
            *why = "the worker signal cannot be installed";
            return err;
        }
    }
    if (secret[0] == '\0') {
        unsigned char r[8];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
            *why = "no random secret to name the workers' relay socket";
            return -EIO;
        }
        for (int i = 0; i < 8; i++)
            snprintf(secret + 2 * i, 3, "%02x", r[i]);
    }
    if (table == NULL) {
        void *p = mmap(NULL, FORKWAKE_SLOTS * sizeof *table,
                       PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                       0);
        if (p == MAP_FAILED) {
            wake_signo = 0;
            *why = "no memory for the family's table of workers";
            return -ENOMEM;
        }
        table = p;
    }
    return 0;
}
UPPER_CALLS(forkwake_prepare);

/* ---- The table --------------------------------------------------------- */

/* Writes this process into the table: the first free slot from the one
 * its pid picks, so that a fork touches one page of the table, not all of
 * them.  A stale entry with its pid met on the way (a process that exited
 * without a word, whose pid came back) is taken over. */
ATFORK_CHILD static void list_self(pid_t parent)
{
    if (table == NULL)
        return;
    pid_t self = getpid();
    unsigned first = (unsigned)self % FORKWAKE_SLOTS;
    for (unsigned n = 0; n < FORKWAKE_SLOTS; n++) {
        unsigned i = (first + n) % FORKWAKE_SLOTS;
        forkwake_slot *s = &table[i];
        pid_t seen = 0;
        if (!atomic_compare_exchange_strong(&s->pid, &seen, -1) &&
            (seen != self ||
             !atomic_compare_exchange_strong(&s->pid, &seen, -1)))
            continue;
        s->parent = parent;
        atomic_store(&s->serving, 0);
        if (prctl(PR_GET_NAME, s->comm) != 0)
            s->comm[0] = '\0';
        atomic_store(&s->pid, self);
        my_slot = (int)i;
        return;
    }
}

static void unlist_self(void)
{
    if (table != NULL && my_slot >= 0) {
        pid_t self = getpid();
        atomic_compare_exchange_strong(&table[my_slot].pid, &self, 0);
    }
    my_slot = -1;
}

/* An exiting worker leaves the table (one killed is dropped by readers). */
__attribute__((destructor)) static void unlist_at_exit(void) { unlist_self(); }

static void mark(int state)
{
    if (table != NULL && my_slot >= 0)
        atomic_store(&table[my_slot].serving, state);
}

void forkwake_mark_serving(bool serving)
{
    mark(serving ? FORKWAKE_SERVING : FORKWAKE_IDLE);
}
UPPER_CALLS(forkwake_mark_serving);

int forkwake_state_of(pid_t pid)
{
    for (unsigned i = 0; table != NULL && i < FORKWAKE_SLOTS; i++)
        if (atomic_load(&table[i].pid) == pid)
            return atomic_load(&table[i].serving);
    return FORKWAKE_IDLE;
}
UPPER_CALLS(forkwake_state_of);

/* ---- Arming ------------------------------------------------------------ */

ATFORK_CHILD void forkwake_arm(pid_t parent, void (*start)(int what))
{
    if (wake_signo <= 0) { /* forkwake_prepare declined: no worker */
        forkwake_forget_after_fork();
        return;
    }
    own_tid = 0;
    my_slot = -1; /* the parent's entry, not this process's */
    atomic_store(&requested, 0);
    atomic_store(&waiting_tid, 0);
    start_part = start;
    worker_parent = parent;
    armed_at_ns = clock_mono_ns();
    list_self(parent);
    atomic_store(&armed_parent, parent);
    /* The parent's exit, which a daemon's fork must see: the signal comes
     * then (the process that forked this one may have exited already). */
    if (wake_signo > 0)
        prctl(PR_SET_PDEATHSIG, wake_signo);
    if (getppid() != parent)
        atomic_fetch_or(&requested, FORKWAKE_ADOPT);
}
UPPER_CALLS(forkwake_arm);

void forkwake_disarm(bool unlist)
{
    atomic_store(&armed_parent, 0);
    if (!unlist)
        return;
    unlist_self();
    if (worker_parent != 0 && wake_signo > 0)
        prctl(PR_SET_PDEATHSIG, 0);
    worker_parent = 0;
}
UPPER_CALLS(forkwake_disarm);

ATFORK_CHILD void forkwake_forget_after_fork(void)
{
    own_tid = 0;
    atomic_store(&armed_parent, 0);
    worker_parent = 0;
    my_slot = -1;
}
UPPER_CALLS(forkwake_forget_after_fork);

void forkwake_rearm(void)
{
    if (worker_parent != 0)
        atomic_store(&armed_parent, worker_parent);
}
UPPER_CALLS(forkwake_rearm);

void forkwake_signal_claimed(int signo, void *handler)
{
    if (signo != wake_signo || wake_signo <= 0 ||
        handler == (void *)on_wake_signal)
        return;
    forkwake_disarm(true);
    wake_signo = 0; /* forks are armed no more: forkwake_send refuses */
}

/* ---- Sending ----------------------------------------------------------- */

/* Whether pid catches signo now, by /proc/PID/status's SigCgt: an exec
 * resets its handlers, and an exec'd process the wake reached would die of
 * it (a real-time signal's default action). */
static bool catches(pid_t pid, int signo)
{
    char path[32], mask[24];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (procfile_status_value(AT_FDCWD, path, "SigCgt", mask, sizeof mask) <=
        0)
        return false;
    unsigned long long caught = strtoull(mask, NULL, 16);
    return signo <= 64 && (caught >> (signo - 1) & 1);
}

int forkwake_send(pid_t pid)
{
    bool listed = false;
    for (unsigned i = 0; table != NULL && i < FORKWAKE_SLOTS && !listed; i++)
        listed = atomic_load(&table[i].pid) == pid &&
                 table[i].parent == getpid();
    if (!listed || wake_signo <= 0 || !catches(pid, wake_signo))
        return -ENOENT;
    union sigval v = {.sival_int = WAKE_VALUE};
    return sigqueue(pid, wake_signo, v) == 0 ? 0 : -errno;
}
UPPER_CALLS(forkwake_send);

/* ---- Exec -------------------------------------------------------------- */

static pid_t exec_parent;

void forkwake_exec(void)
{
    exec_parent = atomic_exchange(&armed_parent, 0);
    unlist_self();
}

void forkwake_exec_failed(void)
{
    if (exec_parent != 0) {
        list_self(exec_parent);
        atomic_store(&armed_parent, exec_parent);
    }
}

/* ---- The waits --------------------------------------------------------- */

/* Starts what was asked, unless this is cpprof's own code (its threads do
 * not wait through these once the part runs, but a program's callback may
 * run inside cpprof's work). */
static void act_if_asked(void)
{
    if (atomic_load_explicit(&requested, memory_order_relaxed) == 0 ||
        own_busy || own_work)
        return;
    int what = atomic_exchange(&requested, 0);
    if (what != 0 && start_part != NULL) {
        /* The relay waits longer for a part that is on its way. */
        if (what & FORKWAKE_START)
            mark(FORKWAKE_STARTING);
        start_part(what);
    }
}

/* One interposed wait in an armed worker: its deadline, for the retry. */
struct wait {
    int64_t deadline_ns; /* 0: none (no timeout, or zero) */
};

static void wait_mark(void)
{
    woken = 0;
    in_wait = 1;
    atomic_store(&waiting_tid, self_tid());
}

static void wait_begin(struct wait *w, int64_t timeout_ns)
{
    act_if_asked();
    w->deadline_ns = timeout_ns > 0 ? clock_mono_ns() + timeout_ns : 0;
    wait_mark();
}

/* After the call: whether to call it again, because it was interrupted
 * (`interrupted`) by the wake alone (then what was asked is done first).
 * errno is kept as the call left it. */
static bool wait_again_if(bool interrupted)
{
    int err = errno;
    in_wait = 0;
    pid_t tid = self_tid();
    atomic_compare_exchange_strong(&waiting_tid, &tid, 0);
    bool again = interrupted && woken;
    woken = 0;
    if (again) {
        act_if_asked();
        wait_mark();
    }
    errno = err;
    return again;
}

static bool wait_again(long rc)
{
    return wait_again_if(rc < 0 && errno == EINTR);
}

/* What is left of the wait's timeout: -1 for none, 0 once passed (the call
 * then returns what is ready, as at its timeout). */
static int64_t left_ns(const struct wait *w, int64_t timeout_ns)
{
    if (timeout_ns <= 0 || w->deadline_ns == 0)
        return timeout_ns;
    int64_t left = w->deadline_ns - clock_mono_ns();
    return left > 0 ? left : 0;
}

static int ms_left(const struct wait *w, int ms)
{
    int64_t ns = left_ns(w, ms > 0 ? ms * 1000000LL : ms);
    return ns <= 0 ? (int)ns : (int)((ns + 999999) / 1000000);
}

static const struct timespec *ts_left(const struct wait *w,
                                      const struct timespec *t,
                                      struct timespec *room)
{
    if (t == NULL)
        return NULL;
    int64_t ns = left_ns(w, (int64_t)t->tv_sec * 1000000000 + t->tv_nsec);
    room->tv_sec = ns / 1000000000;
    room->tv_nsec = ns % 1000000000;
    return room;
}

static int64_t ts_ns(const struct timespec *t)
{
    return t == NULL ? -1 : (int64_t)t->tv_sec * 1000000000 + t->tv_nsec;
}

static bool armed(void)
{
    return atomic_load_explicit(&armed_parent, memory_order_relaxed) != 0;
}

typedef int epoll_wait_fn(int, struct epoll_event *, int, int);
typedef int epoll_pwait_fn(int, struct epoll_event *, int, int,
                           const sigset_t *);
typedef int poll_fn(struct pollfd *, nfds_t, int);
typedef int ppoll_fn(struct pollfd *, nfds_t, const struct timespec *,
                     const sigset_t *);
typedef int select_fn(int, fd_set *, fd_set *, fd_set *, struct timeval *);
typedef int pselect_fn(int, fd_set *, fd_set *, fd_set *,
                       const struct timespec *, const sigset_t *);
typedef int sigsuspend_fn(const sigset_t *);
typedef int nanosleep_fn(const struct timespec *, struct timespec *);
typedef int clock_nanosleep_fn(clockid_t, int, const struct timespec *,
                               struct timespec *);
typedef int usleep_fn(useconds_t);
typedef unsigned sleep_fn(unsigned);
typedef int pause_fn(void);

static void *next_epoll_wait, *next_epoll_pwait, *next_poll, *next_ppoll,
    *next_select, *next_pselect, *next_sigsuspend, *next_nanosleep,
    *next_clock_nanosleep, *next_usleep, *next_sleep, *next_pause;

/* Looked up at load: a program may wait in a signal handler (poll, select
 * and sigsuspend are async-signal-safe), where dlsym is not. */
__attribute__((constructor)) static void find_next_waits(void)
{
    interpose_next(&next_epoll_wait, "epoll_wait");
    interpose_next(&next_epoll_pwait, "epoll_pwait");
    interpose_next(&next_poll, "poll");
    interpose_next(&next_ppoll, "ppoll");
    interpose_next(&next_select, "select");
    interpose_next(&next_pselect, "pselect");
    interpose_next(&next_sigsuspend, "sigsuspend");
    interpose_next(&next_nanosleep, "nanosleep");
    interpose_next(&next_clock_nanosleep, "clock_nanosleep");
    interpose_next(&next_usleep, "usleep");
    interpose_next(&next_sleep, "sleep");
    interpose_next(&next_pause, "pause");
}

#define NEXT(fn, name)                                                     \
    fn##_fn *next = (fn##_fn *)interpose_next(&next_##fn, name);            \
    if (next == NULL) {                                                    \
        errno = ENOSYS;                                                    \
        return -1;                                                         \
    }

/* epoll_wait in an armed worker: apart, so that the call outside one keeps
 * no locals of this (a cancelled thread unwinds through it). */
static __attribute__((noinline)) int epoll_wait_armed(epoll_wait_fn *next,
    int epfd, struct epoll_event *ev, int max, int ms)
{
    struct wait w;
    wait_begin(&w, ms * 1000000LL);
    int rc;
    do
        rc = next(epfd, ev, max, ms_left(&w, ms));
    while (wait_again(rc));
    return rc;
}

EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int ms)
{
    NEXT(epoll_wait, "epoll_wait");
    if (!armed())
        return next(epfd, ev, max, ms);
    return epoll_wait_armed(next, epfd, ev, max, ms);
}

static __attribute__((noinline)) int epoll_pwait_armed(epoll_pwait_fn *next,
    int epfd, struct epoll_event *ev, int max, int ms, const sigset_t *mask)
{
    struct wait w;
    wait_begin(&w, ms * 1000000LL);
    int rc;
    do
        rc = next(epfd, ev, max, ms_left(&w, ms), mask);
    while (wait_again(rc));
    return rc;
}

EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int ms,
                       const sigset_t *mask)
{
    NEXT(epoll_pwait, "epoll_pwait");
    if (!armed())
        return next(epfd, ev, max, ms, mask);
    return epoll_pwait_armed(next, epfd, ev, max, ms, mask);
}

static __attribute__((noinline)) int poll_armed(poll_fn *next,
    struct pollfd *fds, nfds_t n, int ms)
{
    struct wait w;
    wait_begin(&w, ms * 1000000LL);
    int rc;
    do
        rc = next(fds, n, ms_left(&w, ms));
    while (wait_again(rc));
    return rc;
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int ms)
{
    NEXT(poll, "poll");
    if (!armed())
        return next(fds, n, ms);
    return poll_armed(next, fds, n, ms);
}

static __attribute__((noinline)) int ppoll_armed(ppoll_fn *next,
    struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *mask)
{
    struct wait w;
    struct timespec room;
    wait_begin(&w, ts_ns(t));
    int rc;
    do
        rc = next(fds, n, ts_left(&w, t, &room), mask);
    while (wait_again(rc));
    return rc;
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t,
                 const sigset_t *mask)
{
    NEXT(ppoll, "ppoll");
    if (!armed())
        return next(fds, n, t, mask);
    return ppoll_armed(next, fds, n, t, mask);
}

/* select: Linux writes the time left into *t itself, so a retry with t
 * waits what is left. */
static __attribute__((noinline)) int select_armed(select_fn *next,
    int n, fd_set *r, fd_set *wr, fd_set *x, struct timeval *t)
{
    /* Linux leaves the sets as they were when it returns EINTR, so a retry
     * passes them as the program gave them. */
    struct wait w;
    wait_begin(&w, -1);
    int rc;
    do
        rc = next(n, r, wr, x, t);
    while (wait_again(rc));
    return rc;
}

EXPORT int select(int n, fd_set *r, fd_set *wr, fd_set *x, struct timeval *t)
{
    NEXT(select, "select");
    if (!armed())
        return next(n, r, wr, x, t);
    return select_armed(next, n, r, wr, x, t);
}

static __attribute__((noinline)) int pselect_armed(pselect_fn *next,
    int n, fd_set *r, fd_set *wr, fd_set *x, const struct timespec *t, const sigset_t *mask)
{
    struct wait w;
    struct timespec room;
    wait_begin(&w, ts_ns(t));
    int rc;
    do
        rc = next(n, r, wr, x, ts_left(&w, t, &room), mask);
    while (wait_again(rc));
    return rc;
}

EXPORT int pselect(int n, fd_set *r, fd_set *wr, fd_set *x,
                   const struct timespec *t, const sigset_t *mask)
{
    NEXT(pselect, "pselect");
    if (!armed())
        return next(n, r, wr, x, t, mask);
    return pselect_armed(next, n, r, wr, x, t, mask);
}

/* sigsuspend returns only with EINTR: after the wake alone it suspends
 * again, as if the wake had not come. */
static __attribute__((noinline)) int sigsuspend_armed(sigsuspend_fn *next,
    const sigset_t *mask)
{
    struct wait w;
    wait_begin(&w, -1);
    int rc;
    do
        rc = next(mask);
    while (wait_again(rc));
    return rc;
}

EXPORT int sigsuspend(const sigset_t *mask)
{
    NEXT(sigsuspend, "sigsuspend");
    if (!armed())
        return next(mask);
    return sigsuspend_armed(next, mask);
}

/* The sleeps: a worker that idles by sleeping is reached as one that
 * polls, and the wake never shortens its sleep. */
static __attribute__((noinline)) int nanosleep_armed(nanosleep_fn *next,
    const struct timespec *t, struct timespec *rem)
{
    struct wait w;
    struct timespec room;
    wait_begin(&w, ts_ns(t));
    int rc;
    do
        rc = next(ts_left(&w, t, &room), rem);
    while (wait_again(rc));
    return rc;
}

EXPORT int nanosleep(const struct timespec *t, struct timespec *rem)
{
    NEXT(nanosleep, "nanosleep");
    if (!armed())
        return next(t, rem);
    return nanosleep_armed(next, t, rem);
}

/* Returns the error rather than setting errno; an absolute time is slept
 * to again as it is. */
static __attribute__((noinline)) int clock_nanosleep_armed(clock_nanosleep_fn *next,
    clockid_t clock, int flags, const struct timespec *t, struct timespec *rem)
{
    bool absolute = flags & TIMER_ABSTIME;
    struct wait w;
    struct timespec room;
    wait_begin(&w, absolute ? -1 : ts_ns(t));
    int rc;
    do
        rc = next(clock, flags, absolute ? t : ts_left(&w, t, &room), rem);
    while (wait_again_if(rc == EINTR));
    return rc;
}

EXPORT int clock_nanosleep(clockid_t clock, int flags,
                           const struct timespec *t, struct timespec *rem)
{
    clock_nanosleep_fn *next = (clock_nanosleep_fn *)interpose_next(
        &next_clock_nanosleep, "clock_nanosleep");
    if (next == NULL)
        return ENOSYS;
    if (!armed())
        return next(clock, flags, t, rem);
    return clock_nanosleep_armed(next, clock, flags, t, rem);
}

static __attribute__((noinline)) int usleep_armed(usleep_fn *next,
    useconds_t us)
{
    struct wait w;
    wait_begin(&w, us * 1000LL);
    int rc;
    do {
        int64_t left = left_ns(&w, us * 1000LL);
        rc = next((useconds_t)(left > 0 ? (left + 999) / 1000 : 0));
    } while (wait_again(rc));
    return rc;
}

EXPORT int usleep(useconds_t us)
{
    NEXT(usleep, "usleep");
    if (!armed())
        return next(us);
    return usleep_armed(next, us);
}

/* sleep answers the seconds not slept: after the wake alone, it sleeps
 * what is left. */
static __attribute__((noinline)) unsigned sleep_armed(sleep_fn *next,
    unsigned seconds)
{
    struct wait w;
    wait_begin(&w, seconds * 1000000000LL);
    unsigned left;
    do {
        int64_t ns = left_ns(&w, seconds * 1000000000LL);
        left = next((unsigned)((ns + 999999999) / 1000000000));
    } while (wait_again_if(left > 0));
    return left;
}

EXPORT unsigned sleep(unsigned seconds)
{
    sleep_fn *next = (sleep_fn *)interpose_next(&next_sleep, "sleep");
    if (next == NULL)
        return seconds;
    if (!armed())
        return next(seconds);
    return sleep_armed(next, seconds);
}

static __attribute__((noinline)) int pause_armed(pause_fn *next)
{
    struct wait w;
    wait_begin(&w, -1);
    int rc;
    do
        rc = next();
    while (wait_again(rc));
    return rc;
}

EXPORT int pause(void)
{
    NEXT(pause, "pause");
    if (!armed())
        return next();
    return pause_armed(next);
}
