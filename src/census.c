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
 * Opening those files is most of a census's cost (open, read and close of
 * a new thread's file about 12 us on a small VM: bench/census_floor), and
 * most threads of a large process sit in the same call from one census to
 * the next.  A thread whose state, wait channel and stack were all read
 * while its CPU clock stood still, and whose clock still reads the same
 * at the next census, has not run since: its state, wait channel and
 * stack are what they were, so that census takes them from the last one
 * (the "still" threads, kept under census_mu) for one clock_gettime
 * instead of the files and a walk.  One kept by census_take_stacks has no
 * name, state or wait channel, so census_take reads it afresh.  The name
 * is the exception, as another thread may rename it: pthread_setname_np
 * is interposed to count renames of other threads (census_renames), and
 * after one the next census_take reads everything afresh
 * (census_take_stacks takes the stacks still, and marks the names
 * stale).  What this cannot see: a comm file written directly (by another
 * process, or by the program without pthread_setname_np) shows once the
 * thread runs again; and a tid reused by a new thread whose CPU clock
 * reads the same nanosecond as its predecessor's.  A census after fork()
 * starts afresh.  A running thread that blocks the signal, a stopped
 * thread and a zombie leader are not signalled (census_take_stacks, which
 * does not read the state of a blocked thread, walks a thread stopped by
 * a debugger from outside: it holds still as well as a blocked one); a
 * running thread found blocking the signal is looked at again at the
 * next look and given up on once it has run BLOCKED_RUN_NS with the
 * signal blocked (one inside the census's own handler has it blocked for
 * microseconds), and one that does not answer within "census_timeout_ms"
 * at the deadline.  Either way it
 * stays in the census with a reason instead of a stack.  A thread that
 * exits meanwhile (ESRCH, or its /proc entry gone) is left out.
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
#include "census.h"
#include "atfork.h"
#include "census_crew.h"
#include "census_tasks.h"
#include "collect.h"
#include "own.h"
#include "config.h"
#include "interpose.h"
#include "sigbudget.h"
#include "labels.h"
#include "procfile.h"
#include "proctasks.h"
#include "sigonstack.h"
#include "sigowner.h"
#include "task.h"
#include "thread.h"
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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

enum slot_state { SLOT_IDLE, SLOT_PENDING, SLOT_WRITING, SLOT_DONE,
                  SLOT_ABANDONED };

struct slot {
    atomic_int state;
    unsigned depth, flags;
    bool no_room; /* the handler had too little stack left to walk */
    /* The collector's alone: the thread's census timer, while armed. */
    bool armed;
    timer_t timer;
};

/* A slot per thread, and its stack apart: the collector scans the slots,
 * and only a running thread's handler writes a stack, so a census of
 * 1,000 threads mostly blocked touches 8 pages of slots rather than the
 * 130 they would take with the stacks inside (a page fault each, at
 * tens of microseconds on a VM, in the first census of new threads). */
struct round {
    uint32_t generation;
    bool timed; /* handlers add their walks' CPU to handlers_cpu_ns */
    uint32_t n;
    atomic_uint remaining; /* PENDING slots; the collector's futex word */
    uintptr_t (*pcs)[STACK_MAX_FRAMES]; /* slot i's stack: pcs[i] */
    struct slot slots[];
};

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

static pthread_mutex_t census_mu ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;
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

/* ---- Collector ------------------------------------------------------- */

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
static int ensure_handler(int signo)
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

/* /proc/self/task, kept open for one census (proctasks.h): it is listed,
 * and each file is opened relative to it; and our pid, asked once (glibc
 * does not keep it). */
struct task_dir {
    int fd;
    pid_t pid; /* ours */
};

static int open_task_dir(struct task_dir *td)
{
    td->pid = getpid();
    td->fd = proctasks_open();
    return td->fd >= 0 ? 0 : td->fd;
}

/* Reads a small file of /proc/self/task/TID into buf (NUL-terminated).
 * Returns its length or -errno. */
static ssize_t read_task_file(const struct task_dir *td, pid_t tid,
                              const char *file, char *buf, size_t len)
{
    char path[48];
    snprintf(path, sizeof path, "%d/%s", (int)tid, file);
    return procfile_read(td->fd, path, buf, len);
}

static void copy_field(char *dst, size_t cap, const char *v, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

/* The word the kernel's status file gives each state letter. */
static const char *state_word(char state)
{
    switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk sleep";
    case 'T': return "stopped";
    case 't': return "tracing stop";
    case 'X': return "dead";
    case 'Z': return "zombie";
    case 'P': return "parked";
    case 'I': return "idle";
    default: return "";
    }
}

/* Sets the state and, for a thread that cannot give a stack at all, the
 * reason. */
static void set_state(census_thread *t, char state)
{
    t->state = state;
    copy_field(t->state_name, sizeof t->state_name, state_word(state),
               strlen(state_word(state)));
    if (t->state == 'T' || t->state == 't')
        strcpy(t->missing, "thread stopped");
    else if (t->state == 'Z' || t->state == 'X')
        strcpy(t->missing, "thread exited");
}

/* Fills name and state from the thread's stat file ("TID (comm) S ..."),
 * a third the size of its status file.  Returns -ENOENT/-ESRCH when the
 * thread is gone. */
static int read_stat(const struct task_dir *td, census_thread *t)
{
    char buf[512];
    ssize_t n = read_task_file(td, t->tid, "stat", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    /* comm may hold ')' itself: the last one closes it. */
    const char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
    if (!open_paren || !close_paren || close_paren < open_paren ||
        close_paren[1] != ' ' || !close_paren[2])
        return -ESRCH;
    copy_field(t->name, sizeof t->name, open_paren + 1,
               (size_t)(close_paren - open_paren - 1));
    set_state(t, close_paren[2]);
    /* starttime is the 22nd field, the state the 3rd. */
    const char *field = close_paren + 2;
    for (int k = 3; k < 22 && field; k++) {
        field = strchr(field, ' ');
        if (field)
            field++;
    }
    t->start_ticks = field ? strtoull(field, NULL, 10) : 0;
    return 0;
}

/* Re-reads the state, and whether the thread blocks signo (*blocked;
 * only the status file has the whole mask), just before a running thread
 * is signalled.  Returns -ENOENT/-ESRCH when the thread is gone. */
static int recheck_before_signal(const struct task_dir *td, census_thread *t,
                                 int signo, bool *blocked)
{
    char buf[4096];
    ssize_t n = read_task_file(td, t->tid, "status", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    size_t len;
    const char *v = procfile_status_field(buf, "State", &len);
    if (!v || len < 1)
        return -ESRCH;
    set_state(t, v[0]);
    *blocked = procfile_blocks_signal(buf, signo);
    return 0;
}

/* The kernel function a sleeping thread waits in; "" when running or when
 * the kernel will not say ("0"). */
static void read_wchan(const struct task_dir *td, census_thread *t)
{
    char buf[sizeof t->wchan];
    if (t->state == 'R' ||
        read_task_file(td, t->tid, "wchan", buf, sizeof buf) <= 0 ||
        strcmp(buf, "0") == 0)
        return;
    copy_field(t->wchan, sizeof t->wchan, buf, strcspn(buf, "\n"));
}

/* Orders census_thread, struct tid_labels and struct still_thread, whose
 * first member is tid. */
static int by_tid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* ---- Still threads: unchanged since the last census --------------------- */

/* A thread the last census read while its CPU clock stood still. */
struct still_thread {
    pid_t tid;
    char state;
    bool details; /* name, state and wchan read, and no rename since */
    unsigned long long start_ticks;
    unsigned depth, flags;
    long syscall;
    int64_t cpu_ns;
    const uintptr_t *pcs; /* into still.pcs */
    char name[16];
    char wchan[64];
};

/* Under census_mu. */
static struct {
    struct still_thread *v; /* sorted by tid */
    size_t n;
    uintptr_t *pcs;
    unsigned long renames; /* census_renames when they were kept */
    pid_t *tids; /* every thread of the last census, sorted (list_known) */
    size_t n_tids;
} still;

/* Renames of one thread by another, which its CPU clock does not see. */
static atomic_ulong census_renames;

typedef int (*setname_fn)(pthread_t, const char *);

/* Interposed on glibc's, found on first use, to count renames. */
__attribute__((visibility("default"))) int
pthread_setname_np(pthread_t thread, const char *name)
{
    static void *next;
    setname_fn real = (setname_fn)interpose_next(&next, "pthread_setname_np");
    if (!real)
        return ENOSYS;
    int rc = real(thread, name);
    /* After the write: a census that missed the count read no new name. */
    if (!pthread_equal(thread, pthread_self()))
        atomic_fetch_add(&census_renames, 1);
    return rc;
}

static void forget_still(void)
{
    free(still.v);
    free(still.pcs);
    free(still.tids);
    still.v = NULL;
    still.pcs = NULL;
    still.tids = NULL;
    still.n = 0;
    still.n_tids = 0;
}

/* Fills t from the last census when the thread has not run since.  t->tid
 * and t->cpu_ns are set.  A census that wants details (name, state, wait
 * channel) takes only an entry that has them, and none after a rename
 * (`renamed`); one that wants the stack alone takes any, and marks its
 * details stale after a rename. */
static bool reuse_still(census_thread *t, bool details, bool renamed)
{
    if (still.n == 0)
        return false;
    const struct still_thread *e =
        bsearch(&t->tid, still.v, still.n, sizeof *still.v, by_tid);
    if (!e || e->cpu_ns != t->cpu_ns)
        return false;
    t->details = e->details && !renamed;
    if (details && !t->details)
        return false;
    memcpy(t->name, e->name, sizeof t->name);
    memcpy(t->wchan, e->wchan, sizeof t->wchan);
    set_state(t, e->state);
    t->start_ticks = e->start_ticks;
    t->depth = e->depth;
    t->flags = e->flags;
    t->syscall = e->syscall;
    memcpy(t->pcs, e->pcs, e->depth * sizeof *e->pcs);
    t->still = true;
    return true;
}

/* Keeps this census's threads (c is sorted by tid) for the next one: the
 * tids of all, and what was read of the still ones.  Out of memory, it
 * keeps none: the next census lists and reads everything. */
static void keep_still(const census *c, unsigned long renames)
{
    forget_still();
    if (c->n && (still.tids = malloc(c->n * sizeof *still.tids))) {
        for (size_t i = 0; i < c->n; i++)
            still.tids[i] = c->threads[i].tid;
        still.n_tids = c->n;
    }
    size_t n = 0, frames = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->threads[i].still) {
            n++;
            frames += c->threads[i].depth;
        }
    if (n == 0)
        return;
    still.v = malloc(n * sizeof *still.v);
    still.pcs = malloc((frames ? frames : 1) * sizeof *still.pcs);
    if (!still.v || !still.pcs) {
        forget_still();
        return;
    }
    /* Filled whole just below: 1,000 threads' entries and stacks are
     * about 60 pages, most of them new in a first census (half its page
     * faults once the rest were cut: bench/mariadb.sh). */
    prefault_for_write(still.v, n * sizeof *still.v);
    prefault_for_write(still.pcs, frames * sizeof *still.pcs);
    uintptr_t *pcs = still.pcs;
    for (size_t i = 0; i < c->n; i++) {
        const census_thread *t = &c->threads[i];
        if (!t->still)
            continue;
        struct still_thread *e = &still.v[still.n++];
        *e = (struct still_thread){.tid = t->tid, .state = t->state,
                                   .details = t->details,
                                   .start_ticks = t->start_ticks,
                                   .depth = t->depth, .flags = t->flags,
                                   .syscall = t->syscall,
                                   .cpu_ns = t->cpu_ns, .pcs = pcs};
        memcpy(e->name, t->name, sizeof e->name);
        memcpy(e->wchan, t->wchan, sizeof e->wchan);
        memcpy(pcs, t->pcs, t->depth * sizeof *pcs);
        pcs += t->depth;
    }
    still.renames = renames;
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
            qsort(c->threads, c->n, sizeof *c->threads, by_tid);
            return;
        }
}

/* Reads what a thread's stack walk needs before the walk: its CPU clock
 * (which proves the files read after it held still), and with `details`
 * its name, state and wait channel.  A thread that has not run since the
 * last census comes whole from it (reuse_still; `renamed`: a thread was
 * renamed since).  False when the thread is gone. */
static bool describe_thread(const struct task_dir *td, census_thread *t,
                            bool details, bool renamed)
{
    t->cpu_ns = tid_cpu_ns(t->tid);
    if (t->cpu_ns < 0)
        return false; /* exited since the listing */
    if (reuse_still(t, details, renamed) || !details)
        return true;
    if (read_stat(td, t) != 0)
        return false;
    read_wchan(td, t);
    t->details = true;
    return true;
}

/* ---- Labels from the registry ------------------------------------------- */

struct tid_labels {
    pid_t tid;
    const cpprof_labelset *labels; /* holds a reference */
};

struct label_index {
    struct tid_labels *v;
    size_t n, cap;
    bool failed;
};

/* Runs under the registry lock: only references and memory. */
static void collect_labels(pid_t tid, const char *name,
                           const cpprof_labelset *labels, void *arg)
{
    (void)name;
    struct label_index *ix = arg;
    if (!labels || ix->failed)
        return;
    if (ARRAY_RESERVE(ix->v, ix->n, ix->cap, 1) != 0) {
        ix->failed = true;
        return;
    }
    ix->v[ix->n++] = (struct tid_labels){tid, labelset_hold(labels)};
}

/* Gives every thread the registry's label set for its tid, reading the
 * registry once. */
static int attach_labels(census *c)
{
    struct label_index ix = {0};
    registry_foreach(collect_labels, &ix);
    int rc = ix.failed ? -ENOMEM : 0;
    /* ix.v is NULL when no thread has labels, and qsort and bsearch must
     * not be given NULL even for zero elements (UBSan stops there). */
    if (ix.n > 0)
        qsort(ix.v, ix.n, sizeof *ix.v, by_tid);
    for (size_t i = 0; rc == 0 && ix.n > 0 && i < c->n; i++) {
        struct tid_labels *hit = bsearch(&c->threads[i].tid, ix.v, ix.n,
                                         sizeof *ix.v, by_tid);
        if (hit) {
            c->threads[i].labels = hit->labels;
            hit->labels = NULL;
        }
    }
    for (size_t i = 0; i < ix.n; i++)
        labelset_drop(ix.v[i].labels);
    free(ix.v);
    return rc;
}

/* ---- Tasks: parked ones listed, running ones marked ---------------------- */

/* `set` plus CENSUS_TASK_KEY=`kind` (and CENSUS_WAIT_KEY=`reason` when
 * not NULL), replacing *set's reference with the merged set's. */
static int mark_task(const cpprof_labelset **set, const char *kind,
                     const char *reason)
{
    const char *kv[] = {CENSUS_TASK_KEY, kind, CENSUS_WAIT_KEY, reason};
    cpprof_labelset *marker, *merged;
    int rc = cpprof_labels(&marker, reason ? 4 : 2, kv);
    if (rc)
        return rc;
    rc = labelset_merge(&merged, *set, marker);
    cpprof_labelset_release(marker);
    if (rc)
        return rc;
    labelset_drop(*set);
    *set = merged;
    return 0;
}

struct runners {
    pid_t *tids;
    size_t n, cap;
    bool failed;
};

static void add_runner(pid_t tid, void *arg)
{
    struct runners *r = arg;
    if (ARRAY_RESERVE(r->tids, r->n, r->cap, 1) != 0)
        r->failed = true;
    else
        r->tids[r->n++] = tid;
}

/* Marks the threads (sorted by tid) that run a task now. */
static int mark_runners(census *c)
{
    struct runners r = {0};
    task_foreach_runner(add_runner, &r);
    int rc = r.failed ? -ENOMEM : 0;
    if (r.n > 0)
        qsort(r.tids, r.n, sizeof *r.tids, by_tid);
    for (size_t i = 0; rc == 0 && r.n > 0 && i < c->n; i++)
        if (bsearch(&c->threads[i].tid, r.tids, r.n, sizeof *r.tids, by_tid))
            rc = mark_task(&c->threads[i].labels, "running", NULL);
    free(r.tids);
    return rc;
}

/* The marked sets made so far in one census: the groups of parked tasks
 * share few (set, reason) pairs (a pair has a group per stack it parks
 * at), and merging interns a set (a lock and a hash) that the pair's
 * first group made already. */
struct marked {
    const cpprof_labelset *set; /* the task's, without a reference */
    const char *reason;
    const cpprof_labelset *merged; /* a reference of the cache's */
};
#define MARKED_CACHE 16

/* mark_task(set, "parked", reason), from the cache where it can. */
static int mark_parked(struct marked *cache, size_t *n,
                       const cpprof_labelset **set, const char *reason)
{
    for (size_t i = 0; i < *n; i++)
        if (cache[i].set == *set && cache[i].reason == reason) {
            labelset_drop(*set);
            *set = labelset_hold(cache[i].merged);
            return 0;
        }
    const cpprof_labelset *was = *set;
    int rc = mark_task(set, "parked", reason);
    if (rc == 0 && *n < MARKED_CACHE)
        cache[(*n)++] = (struct marked){was, reason, labelset_hold(*set)};
    return rc;
}

/* Adds the parked tasks to the census, in groups (census_tasks.h), and
 * with `each` one by one, marking their sets. */
static int add_tasks(census *c, bool each)
{
    int rc = mark_runners(c);
    if (rc == 0)
        rc = census_read_parked(c, each);
    struct marked cache[MARKED_CACHE];
    size_t cached = 0;
    for (size_t i = 0; rc == 0 && i < c->n_parked; i++)
        rc = mark_parked(cache, &cached, &c->parked[i].labels,
                         c->parked[i].reason);
    for (size_t i = 0; i < cached; i++)
        labelset_drop(cache[i].merged);
    return rc;
}

/* ---- Blocked threads: their stacks read from outside -------------------- */

/* A blocked thread's place, from /proc/self/task/TID/syscall: "NR arg1 ..
 * arg6 SP PC" in a system call, "-1 SP PC" blocked outside one (a page
 * fault), "running" otherwise. */
struct blocked_at {
    char text[160];
    long nr;
    unsigned long long arg1;
    uintptr_t sp, pc;
};

enum { BLOCKED = 1, NOT_BLOCKED = 0 };

/* Reads the thread's syscall file, open on `fd`: pread from 0 makes the
 * kernel write it afresh, so one open serves every try.  Returns BLOCKED (with *at filled), NOT_BLOCKED
 * when the thread runs, or -errno (-ESRCH: gone). */
static int read_blocked_at(int fd, struct blocked_at *at)
{
    ssize_t n = pread(fd, at->text, sizeof at->text - 1, 0);
    if (n < 0)
        return -errno;
    at->text[n] = '\0';
    if (n == 0)
        return -ESRCH;
    if (strncmp(at->text, "running", 7) == 0)
        return NOT_BLOCKED;
    char *end;
    at->nr = strtol(at->text, &end, 10);
    /* SP and PC are the last two fields, whatever came between. */
    unsigned long long v[8];
    int k = 0;
    while (k < 8 && *end && *end != '\n') {
        char *next;
        v[k] = strtoull(end, &next, 16);
        if (next == end)
            break;
        end = next;
        k++;
    }
    if (k < 2)
        return -EPROTO;
    at->arg1 = v[0];
    at->sp = (uintptr_t)v[k - 2];
    at->pc = (uintptr_t)v[k - 1];
    return BLOCKED;
}

/* Whether the thread waits in vfork.  arm64 has no vfork system call:
 * glibc's vfork there is clone with CLONE_VFORK in its first argument
 * (the flags), as a program's own clone may be on x86-64. */
static bool in_vfork(const struct blocked_at *at)
{
#ifdef SYS_vfork
    if (at->nr == SYS_vfork)
        return true;
#endif
    return at->nr == SYS_clone && (at->arg1 & CLONE_VFORK);
}

/* Tries per thread before it counts as changing too fast to read. */
#define WALK_TRIES 3

/* A blocked thread whose syscall file cannot be opened for want of
 * permission: a process that made itself non-dumpable (setuid to another
 * user, or PR_SET_DUMPABLE 0) has its /proc files owned by root, and that
 * file is its owner's alone.  Its stack cannot be had without a signal,
 * which would cut its blocking call short, so it stays in the census with
 * the reason instead, said once on stderr too.  (It was left out as if it
 * had exited: a census after setuid listed only its own thread.) */
static bool stack_unreadable(census_thread *t, int rc)
{
    static atomic_bool said;
    if (rc != -EACCES && rc != -EPERM)
        return false;
    snprintf(t->missing, sizeof t->missing,
             "stack unreadable: the process is not dumpable");
    if (!atomic_exchange(&said, true))
        warn_stderr("cpprof: census: the stacks of threads blocked in the "
                    "kernel cannot be read: the process is not dumpable "
                    "(setuid to another user, or PR_SET_DUMPABLE 0), so "
                    "only root may read /proc/self/task/TID/syscall; they "
                    "are listed without a stack, not signalled\n");
    return true;
}

/* Walks a thread that is blocked in the kernel without stopping it: the
 * thread does not run, so the stack above its SP holds still while the
 * walker reads it (through the fault-proof path).  Its CPU clock, read
 * before the syscall file and after the walk, proves that it did not run
 * meanwhile; otherwise the walk is discarded and tried again.  The first
 * try takes the clock the listing read (t->cpu_ns, before the stat and
 * wchan files, if any), one system call less per thread; when the clock
 * still reads that after the walk, all of it is one still moment
 * (t->still).  A thread that ran since fails that try: it gets one more.
 * Returns BLOCKED (stack in t, or the reason in t->missing), NOT_BLOCKED
 * (it runs now: signal it), -EAGAIN (it kept running), -ENOENT/-ESRCH
 * (gone). */
static int walk_blocked(const struct task_dir *td, census_thread *t)
{
    char path[24];
    snprintf(path, sizeof path, "%d/syscall", (int)t->tid);
    int fd = openat(td->fd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = -errno;
        return stack_unreadable(t, err) ? BLOCKED : err;
    }
    int rc = -EAGAIN;
    for (int try = 0; try <= WALK_TRIES && rc == -EAGAIN; try++) {
        int64_t cpu_before = try == 0 ? t->cpu_ns : tid_cpu_ns(t->tid);
        struct blocked_at at;
        rc = cpu_before < 0 ? -ESRCH : read_blocked_at(fd, &at);
        if (rc != BLOCKED)
            break;
        /* In vfork the child runs on this thread's stack: it cannot be
         * read, and a signal waits for the child's exec or exit. */
        if (in_vfork(&at)) {
            strcpy(t->missing, "in vfork: the child has its stack");
            break;
        }
        /* A thread without a kernel stack has exited: the file reads
         * "-1 0x0 0x0".  A zombie leader stays listed, with the reason (a
         * census with details knew it from its state already); any other
         * thread is on its way out and is left out, like one already
         * gone (counting it made a goroutine delta's ends differ). */
        if (at.sp == 0) {
            if (t->tid != getpid()) {
                rc = -ESRCH;
                break;
            }
            strcpy(t->missing, "thread exited");
            break;
        }
        t->depth = unwind_blocked_thread(td->pid, at.pc, at.sp, t->pcs,
                                         STACK_MAX_FRAMES, &t->flags);
        int64_t cpu_after = tid_cpu_ns(t->tid);
        if (cpu_after < 0)
            rc = -ESRCH;
        else if (cpu_after != cpu_before)
            rc = -EAGAIN;
        else
            t->still = cpu_before == t->cpu_ns;
        t->syscall = at.nr;
    }
    close(fd);
    if (rc != BLOCKED) {
        t->depth = 0;
        t->syscall = CENSUS_UNREAD;
    }
    return rc;
}

/* ---- The unwinder's table: refreshed for the threads signalled ---------- */

/* A signalled thread's handler reads its stack directly only inside the
 * stack block the unwinder's table gives it (unwind_walk.c, "Reads that cannot
 * fault"), so a thread is signalled only after a refresh that saw its
 * block.  Reading /proc/self/maps for that was a third of a census of the
 * demo, and a census meets the same running threads each time: the
 * threads listed before the census's last refresh (tid and start time, so
 * that a reused tid is not taken for one of them) are kept, and a census
 * refreshes only before signalling another thread, or when that refresh
 * is TABLE_MAX_AGE_NS old.  A census that signals nobody has tables built
 * for objects the loader added (unwind_refresh_if_loaded), all a walk from
 * outside needs. */
#define TABLE_MAX_AGE_NS 10000000000LL

struct known_thread {
    pid_t tid;
    unsigned long long start_ticks;
};

/* Under census_mu. */
static struct {
    struct known_thread *v; /* sorted by tid */
    size_t n;
    int64_t refreshed_ns; /* the last census refresh, 0: none yet */
} mapped;

/* Whether the table has t's stack block: t was listed before the last
 * census refresh. */
static bool table_knows(const census_thread *t)
{
    if (mapped.n == 0 ||
        clock_mono_ns() - mapped.refreshed_ns > TABLE_MAX_AGE_NS)
        return false;
    const struct known_thread *k =
        bsearch(&t->tid, mapped.v, mapped.n, sizeof *mapped.v, by_tid);
    return k && k->start_ticks == t->start_ticks;
}

/* Refreshes the table before t is signalled, unless it knows t's block or
 * this census refreshed it already (*refreshed). */
static void refresh_for(const census_thread *t, bool *refreshed)
{
    if (*refreshed || table_knows(t))
        return;
    unwind_refresh_maps();
    mapped.refreshed_ns = clock_mono_ns();
    *refreshed = true;
}

/* After a census that refreshed: every thread it listed was listed before
 * that refresh (c is sorted by tid).  Out of memory, none is kept. */
static void remember_mapped(const census *c)
{
    free(mapped.v);
    mapped.n = 0;
    mapped.v = malloc((c->n ? c->n : 1) * sizeof *mapped.v);
    if (!mapped.v)
        return;
    for (size_t i = 0; i < c->n; i++)
        if (c->threads[i].start_ticks) /* else unknown: not read */
            mapped.v[mapped.n++] = (struct known_thread){
                c->threads[i].tid, c->threads[i].start_ticks};
}

/* ---- Running threads: signalled, and walk their own stacks -------------- */

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

static bool take_unit(struct round *r, unsigned *held, int64_t deadline);

/* Signals thread i, through its census timer, within the queued-signal
 * budget (*held counts the units this census holds: its armed timers);
 * marks it gone (tid 0) when it exited first. */
/* Makes slot i one the census waits for (PENDING), unless it is already
 * (look_again). */
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
static void look_again(struct round *r, census_thread *t, uint32_t i)
{
    blocked_run_start(&t->blocked, t->tid);
    await_slot(r, i);
}

static void signal_thread(census *c, struct round *r, uint32_t i, int signo,
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

/* One census's reading of its threads, shared by the thread taking it
 * and the crew's helpers (census_crew.h).  Only the caller signals, and
 * so only it touches the round, `held` and `refreshed`; a helper
 * describes a thread and walks it from outside when it is blocked in the
 * kernel, and leaves the rest to the caller in `outcome`.  Each entry of
 * `c` is written by one reader at a time; a thread a helper finds gone is
 * marked in `outcome`, not by its tid, which the caller reads meanwhile
 * (attach_labels). */
enum outcome { TAKEN, WALK_AGAIN, SIGNAL_ONLY, GONE, AFTER_RUN };

struct pass {
    const struct task_dir *td;
    census *c;
    size_t cap; /* of c->threads and outcome */
    unsigned char *outcome; /* enum outcome, by helpers */
    struct census_crew_run run;
    bool run_open; /* the helpers' run is still reading (closed at c->n) */
    bool may_list_known; /* list_known, if the count allows */
    bool listed_known;   /* it did */
    atomic_bool lost;    /* a thread listed is gone (exited) */
    struct round *r;
    int signo;
    bool details, renamed;
    pid_t caller;
    int64_t deadline;
    unsigned held;  /* the caller's */
    bool refreshed; /* the caller's */
};

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
            int rc = walk_blocked(p->td, t);
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
        if (!t->start_ticks && read_stat(p->td, t) != 0) {
            t->tid = 0;
            return;
        }
        if (t->missing[0])
            break; /* stopped or exited: its state says which */
        refresh_for(t, &p->refreshed);
        bool blocked;
        if (recheck_before_signal(p->td, t, p->signo, &blocked) != 0) {
            t->tid = 0;
            return;
        }
        if (t->state == 'R' && !t->missing[0]) {
            if (blocked)
                look_again(p->r, t, i);
            else
                signal_thread(p->c, p->r, i, p->signo, &p->held,
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
    int rc = walk_blocked(p->td, t);
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
    if (!describe_thread(p->td, t, p->details, p->renamed))
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
    } else if (!describe_thread(p->td, t, p->details, p->renamed)) {
        p->outcome[i] = GONE;
    } else if (!t->missing[0] && !t->still) {
        walk_for_caller(p, (uint32_t)i);
    }
    if (p->listed_known && (p->outcome[i] == GONE || t->tid == 0))
        atomic_store_explicit(&p->lost, true, memory_order_relaxed);
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
    int rc = walk_blocked(p->td, t);
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
 * without a timer yet (look_again) that no longer blocks the signal gets
 * one.  One still running with the signal blocked (it was on its way into
 * pthread_sigmask, or keeps it blocked) will not answer before the
 * deadline: its slot is given up on now, with the reason, rather than let
 * the whole census wait out the timeout for it. */
static void recheck_pending(struct pass *p)
{
    struct round *r = p->r;
    for (uint32_t i = 0; i < r->n; i++) {
        if (atomic_load(&r->slots[i].state) != SLOT_PENDING)
            continue;
        census_thread *t = &p->c->threads[i];
        int64_t cpu_before = tid_cpu_ns(t->tid); /* blocked_run_held */
        bool blocked;
        if (recheck_before_signal(p->td, t, p->signo, &blocked) != 0)
            continue;
        if (t->state == 'S' || t->state == 'D') {
            walk_instead(p, i);
            continue;
        }
        if (!t->missing[0] && !blocked) {
            t->blocked = (struct blocked_run){0};
            if (!r->slots[i].armed)
                signal_thread(p->c, r, i, p->signo, &p->held, p->deadline);
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
    if (!p->may_list_known || expected == 0 || expected != still.n_tids)
        return false;
    append_threads(p->c, still.tids, (int)still.n_tids);
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

/* A round of n slots, zeroed (IDLE), with their stacks' room after them
 * (calloc: pages no handler writes are never touched). */
static struct round *new_round(size_t n)
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

/* Describes every thread and takes its stack, the crew sharing the
 * reading (census_crew.h): signals go out as the caller meets running
 * threads, so their handlers walk while the blocked threads' stacks are
 * read; those a helper met running follow once the reading is done. */
static int collect_stacks(struct pass *p, long timeout_ms)
{
    census *c = p->c;
    int rc = list_while_reading(p);
    if (rc == 0)
        rc = attach_labels(c); /* while the helpers read */
    if (rc == 0 && !(p->r = new_round(c->n)))
        rc = -ENOMEM;
    if (rc) {
        if (p->run_open)
            census_crew_finish(&p->run, false);
        free(p->outcome);
        return rc;
    }
    struct round *r = p->r;
    r->generation = ++generation;
    r->timed = atomic_load_explicit(&handlers_timed, memory_order_relaxed);
    r->n = (uint32_t)c->n;
    atomic_store(&published, r);
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
    wait_answers(p);
    abandon_pending(r);
    atomic_store(&published, NULL);
    bool drained = drain_handlers();
    disarm_all(r, &p->held);
    gather_answers(p->td, c, r, timeout_ms);
    if (drained)
        free(r);
    /* else a handler is still inside r: leak it rather than free it. */
    sort_by_tid(c);
    size_t listed = c->n;
    drop_gone(c);
    if (c->n < listed)
        atomic_store(&p->lost, true);
    if (p->refreshed)
        remember_mapped(c);
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

bool census_signal_is_programs(void)
{
    return signal_owner((int)cfg_int(CFG_CENSUS_SIGNAL), on_census_signal) ==
           OWNER_PROGRAM;
}

/* `details`: read every thread's name, state and wait channel. */
static int take_locked(census *out, bool details)
{
    int signo = (int)cfg_int(CFG_CENSUS_SIGNAL);
    long timeout_ms = cfg_int(CFG_CENSUS_TIMEOUT_MS);
    int rc = ensure_handler(signo);
    if (rc == CPPROF_ESIGTAKEN)
        say_signal_taken(signo);
    if (rc)
        return rc;
    struct task_dir td;
    if ((rc = open_task_dir(&td)) != 0)
        return rc;
    /* Without a table for an object the walk stops there. */
    unwind_refresh_if_loaded();
    unsigned long renames = atomic_load(&census_renames);
    for (bool may_list_known = true;; may_list_known = false) {
        struct pass p = {.td = &td, .c = out, .signo = signo,
                         .details = details,
                         .renamed = renames != still.renames,
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
        keep_still(out, renames);
        rc = add_tasks(out, details);
    }
    if (rc)
        census_release(out);
    return rc;
}

/* fork(): census_mu is held across it, so no round is in flight and the
 * child can take censuses, afresh: its threads are not the parent's
 * (keep_still frees the parent's later). */
static void census_lock(void) { pthread_mutex_lock(&census_mu); }
static void census_unlock(void) { pthread_mutex_unlock(&census_mu); }
ATFORK_CHILD static void census_child(void)
{
    still.n = 0;
    still.n_tids = 0;
    mapped.n = 0;
    if (atomic_load_explicit(&handlers_timed, memory_order_relaxed))
        atomic_store_explicit(&handlers_timed, false, memory_order_relaxed);
    census_crew_after_fork();
    atfork_mutex_release(&census_mu);
}

static int take(census *out, bool details)
{
    if (!out)
        return -EINVAL;
    *out = (census){0};
    static const atfork_handlers on_fork = {census_lock, census_unlock,
                                            census_child};
    atfork_add(ATFORK_CENSUS, &on_fork);
    pthread_mutex_lock(&census_mu);
    int rc = take_locked(out, details);
    pthread_mutex_unlock(&census_mu);
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
    int rc = open_task_dir(&td);
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
        rc = attach_labels(out);
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
UPPER_CALLS(census_signal_is_programs);
UPPER_CALLS(census_take);
UPPER_CALLS(census_take_labels);
UPPER_CALLS(census_take_stacks);
