/*
 * census_leak.c -- the threads that cannot run again, the C form of Go's
 * goroutineleak profile: cycles of threads each blocked on a lock the
 * next one holds (a deadlock), and the threads blocked behind such a
 * cycle or behind a lock whose owner has exited.  Go proves its leaks by
 * reachability in a GC pass; here the proof is the locks' owners.
 *
 * Read from outside, as the census reads a blocked thread
 * (census_blocked.c), so nothing is stopped, signalled or cut short:
 *   1. every thread's CPU clock, then its syscall file: which threads
 *      sleep in a lock's futex wait, on which word (census_lock_wait) --
 *      unless its clock reads what it read at the last detection, which
 *      then read the file (struct seen);
 *   2. each such lock's recorded owner (census_lock_owner), a live
 *      thread of the process or one that has exited (in no listing, and
 *      tgkill's probe says there is no such thread in this process);
 *   3. the wait-for graph, one edge from each waiter to its lock's owner:
 *      its cycles, and the waiters whose chain of owners ends in one or
 *      at an exited owner; a chain that ends at a thread that is not
 *      waiting for a lock is healthy, however long;
 *   4. each thread found so has its syscall file read again and is
 *      walked (census_walk_blocked): the same wait, a stack in glibc's
 *      function for that lock (which makes the word a lock's), and its
 *      CPU clock still at what it read in 1.  A thread that fails any is
 *      no waiter, and 3 is done again without it.
 * Every owner word is read after every clock reading of 1 and before
 * every proof, so each proven thread slept in the same wait throughout
 * those reads: an owner that never ran since cannot have released the
 * lock, and a lock word that read "locked, with waiters" still did.
 */
#define _GNU_SOURCE
#include "census_int.h"
#include "atfork.h"
#include "labels.h"
#include "proctasks.h"
#include "thread.h"
#include "unwind.h"
#include "util.h"
#include "upper_calls.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NONE SIZE_MAX

/* What the graph makes of a waiter. */
enum verdict { UNSEEN, ON_PATH, HEALTHY, IN_CYCLE, BEHIND_CYCLE,
               BEHIND_EXITED };

/* A thread asleep in a lock's futex wait. */
struct waiter {
    pid_t tid;
    enum census_lock_kind kind; /* LOCK_NONE once found no lock's waiter */
    uintptr_t word;             /* the futex word it sleeps on */
    unsigned val;               /* what it expects that word to hold */
    int64_t cpu_ns;             /* its CPU clock before its wait was read */
    pid_t owner;                /* the lock's recorded owner */
    bool owner_exited;
    size_t next;                /* the owner's index, or NONE */
    enum verdict verdict;
    unsigned cycle;             /* its cycle, or the one it waits behind */
    pid_t exited;               /* BEHIND_EXITED: the owner that exited */
    census_thread *walked;      /* its stack, once proven */
};

struct leaks {
    const struct task_dir *td;
    pid_t pid;
    pid_t *live; /* every thread listed, sorted */
    size_t n_live;
    struct seen *seen; /* each listed thread, as read */
    struct waiter *w; /* sorted by tid */
    size_t n;
    unsigned cycles;
};

static void leaks_free(struct leaks *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->w[i].walked);
    free(l->w);
    free(l->seen);
    free(l->live);
}

/* ---- 1. The waiters ---------------------------------------------------- */

static int list_threads(const struct task_dir *td, struct leaks *l)
{
    size_t cap = 0;
    pid_t tids[PROCTASKS_BATCH_TIDS];
    int got;
    while ((got = proctasks_next(td->fd, tids,
                                 sizeof tids / sizeof *tids)) > 0) {
        if (ARRAY_RESERVE(l->live, l->n_live, cap, (size_t)got) != 0)
            return -ENOMEM;
        memcpy(l->live + l->n_live, tids, (size_t)got * sizeof *tids);
        l->n_live += (size_t)got;
    }
    if (l->n_live)
        qsort(l->live, l->n_live, sizeof *l->live, census_by_tid);
    return got;
}

/* The lock wait thread `tid` sleeps in, from its syscall file (*at),
 * or LOCK_NONE. */
static enum census_lock_kind read_wait(const struct task_dir *td, pid_t tid,
                                       struct census_syscall *at)
{
    char path[24];
    snprintf(path, sizeof path, "%d/syscall", (int)tid);
    int fd = openat(td->fd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return LOCK_NONE;
    int rc = census_read_syscall(fd, at);
    close(fd);
    return rc == BLOCKED ? census_lock_wait(at) : LOCK_NONE;
}

/* What one detection read of a thread: its CPU clock, then the wait its
 * syscall file showed (LOCK_NONE: none of a lock's).  The last
 * detection's, sorted by tid, are kept (under the census lock): a thread
 * whose clock still reads the same has not run since, so it sleeps in
 * the same wait, and its file is not read again (census_still.c does the
 * same for the census), one clock reading instead of three calls. */
struct seen {
    pid_t tid;
    enum census_lock_kind kind;
    int64_t cpu_ns; /* -1: gone */
    uintptr_t word;
    unsigned val;
};
static struct {
    struct seen *v;
    size_t n;
} last;

static const struct seen *seen_last(pid_t tid)
{
    return last.n ? bsearch(&tid, last.v, last.n, sizeof *last.v,
                            census_by_tid)
                  : NULL;
}

/* Thread `tid` now: the clock first, so that the wait the file shows
 * after it holds for as long as the clock reads the same (the proof
 * checks that it still does). */
static void read_thread(const struct task_dir *td, pid_t tid,
                        struct seen *out)
{
    *out = (struct seen){.tid = tid, .cpu_ns = tid_cpu_ns(tid)};
    const struct seen *was = out->cpu_ns < 0 ? NULL : seen_last(tid);
    if (was && was->cpu_ns == out->cpu_ns) {
        *out = *was;
        return;
    }
    struct census_syscall at;
    if (out->cpu_ns < 0 || (out->kind = read_wait(td, tid, &at)) == LOCK_NONE)
        return;
    out->word = (uintptr_t)at.args[0];
    out->val = (unsigned)at.args[2];
}

/* census_crew_run's item: live thread i, into seen[i]. */
static void thread_item(void *arg, size_t i, bool on_caller)
{
    (void)on_caller;
    struct leaks *l = arg;
    read_thread(l->td, l->live[i], &l->seen[i]);
}

/* Reads every listed thread, sharing the reading with the census's crew
 * (a file each: their helpers halve the wall time on two CPUs), keeps
 * the waiters, and keeps what was read for the next detection. */
static int read_waiters(struct leaks *l)
{
    l->seen = malloc((l->n_live + 1) * sizeof *l->seen);
    l->w = malloc((l->n_live + 1) * sizeof *l->w);
    if (!l->seen || !l->w)
        return -ENOMEM;
    census_crew_run(0, l->n_live, thread_item, l);
    size_t kept = 0;
    for (size_t i = 0; i < l->n_live; i++) {
        const struct seen *t = &l->seen[i];
        if (t->cpu_ns < 0)
            continue;
        if (t->kind != LOCK_NONE)
            l->w[l->n++] = (struct waiter){.tid = t->tid, .kind = t->kind,
                                           .word = t->word, .val = t->val,
                                           .cpu_ns = t->cpu_ns};
        l->seen[kept++] = *t;
    }
    free(last.v);
    last.v = l->seen;
    last.n = kept;
    l->seen = NULL;
    return 0;
}

/* In a forked child: its threads are not the ones read. */
ATFORK_CHILD void census_leak_after_fork(void)
{
    last.n = 0;
}

/* ---- 2. The owners ------------------------------------------------------ */

static bool listed(const struct leaks *l, pid_t tid)
{
    return l->n_live &&
           bsearch(&tid, l->live, l->n_live, sizeof *l->live, census_by_tid);
}

static size_t waiter_index(const struct leaks *l, pid_t tid)
{
    const struct waiter *hit =
        l->n ? bsearch(&tid, l->w, l->n, sizeof *l->w, census_by_tid) : NULL;
    return hit ? (size_t)(hit - l->w) : NONE;
}

/* A thread in no listing is gone when this process has no thread of
 * that id (one created since the listing is alive, and waits for
 * nothing we know of). */
static bool exited(const struct leaks *l, pid_t tid)
{
    return !listed(l, tid) &&
           syscall(SYS_tgkill, l->pid, tid, 0) != 0 && errno == ESRCH;
}

static void read_owners(struct leaks *l)
{
    for (size_t i = 0; i < l->n; i++) {
        struct waiter *w = &l->w[i];
        w->owner = census_lock_owner(l->pid, w->kind, w->word, w->val);
        if (w->owner == 0)
            w->kind = LOCK_NONE;
        else
            w->owner_exited = exited(l, w->owner);
    }
    for (size_t i = 0; i < l->n; i++)
        l->w[i].next = l->w[i].kind == LOCK_NONE
                           ? NONE
                           : waiter_index(l, l->w[i].owner);
}

/* ---- 3. The graph ------------------------------------------------------- */

/* The end a waiter's chain of owners reaches when its last waiter's
 * owner waits for no lock. */
static void chain_end(const struct waiter *last, enum verdict *v,
                      pid_t *gone)
{
    bool stuck = last->kind != LOCK_NONE && last->owner_exited;
    *v = stuck ? BEHIND_EXITED : HEALTHY;
    *gone = stuck ? last->owner : 0;
}

/* Follows the owners from waiter i, marking the path; each waiter has
 * one owner, so the path ends in a cycle of its own, at a waiter judged
 * already, or at an owner that waits for no lock. */
static void judge_from(struct leaks *l, size_t i, size_t *path)
{
    size_t len = 0, j = i;
    while (j != NONE && l->w[j].verdict == UNSEEN) {
        l->w[j].verdict = ON_PATH;
        path[len++] = j;
        j = l->w[j].kind == LOCK_NONE ? NONE : l->w[j].next;
    }
    if (len == 0)
        return;
    size_t behind = len; /* path[0..behind) wait behind the end */
    enum verdict v;
    unsigned cycle = 0;
    pid_t gone = 0;
    if (j == NONE) {
        chain_end(&l->w[path[len - 1]], &v, &gone);
    } else if (l->w[j].verdict == ON_PATH) {
        cycle = ++l->cycles;
        while (path[behind - 1] != j)
            behind--;
        behind--;
        for (size_t k = behind; k < len; k++) {
            l->w[path[k]].verdict = IN_CYCLE;
            l->w[path[k]].cycle = cycle;
        }
        v = BEHIND_CYCLE;
    } else {
        v = l->w[j].verdict == IN_CYCLE ? BEHIND_CYCLE : l->w[j].verdict;
        cycle = l->w[j].cycle;
        gone = l->w[j].exited;
    }
    for (size_t k = 0; k < behind; k++) {
        struct waiter *w = &l->w[path[k]];
        w->verdict = v;
        w->cycle = cycle;
        w->exited = gone;
    }
}

static bool stuck(const struct waiter *w)
{
    return w->verdict == IN_CYCLE || w->verdict == BEHIND_CYCLE ||
           w->verdict == BEHIND_EXITED;
}

/* Stuck, and proven so (step 4). */
static bool proven(const struct waiter *w)
{
    return stuck(w) && w->walked;
}

static int judge(struct leaks *l)
{
    size_t *path = malloc((l->n + 1) * sizeof *path);
    if (!path)
        return -ENOMEM;
    l->cycles = 0;
    for (size_t i = 0; i < l->n; i++)
        l->w[i].verdict = UNSEEN;
    for (size_t i = 0; i < l->n; i++)
        judge_from(l, i, path);
    free(path);
    return 0;
}

/* ---- 4. The proof: each stuck thread walked ----------------------------- */

/* Whether waiter w sleeps in the same wait as when it was first read. */
static bool same_wait(const struct task_dir *td, const struct waiter *w)
{
    struct census_syscall at;
    return read_wait(td, w->tid, &at) == w->kind &&
           (uintptr_t)at.args[0] == w->word && (unsigned)at.args[2] == w->val;
}

/* Walks waiter w from outside into a new census entry: whether it sleeps
 * in the wait it was found in, in glibc's function for its lock, with its
 * CPU clock unchanged since it was found there (so it never left). */
static int prove(const struct task_dir *td, struct waiter *w)
{
    census_thread *t = malloc(sizeof *t);
    if (!t)
        return -ENOMEM;
    memset(t, 0, offsetof(census_thread, pcs));
    t->tid = w->tid;
    t->cpu_ns = w->cpu_ns;
    t->syscall = CENSUS_UNREAD;
    bool same = same_wait(td, w);
    int rc = same ? census_walk_blocked(td, t) : -EAGAIN;
    if (rc == BLOCKED && !t->missing[0] && t->still &&
        t->syscall == SYS_futex && census_waits_in_lock(t, w->kind)) {
        w->walked = t;
    } else {
        w->kind = LOCK_NONE;
        free(t);
    }
    return 0;
}

/* Judges the graph, proves each stuck waiter not proven yet, and judges
 * again while a proof failed (each failure takes a waiter away). */
static int judge_and_prove(const struct task_dir *td, struct leaks *l)
{
    for (;;) {
        int rc = judge(l);
        bool failed = false;
        for (size_t i = 0; rc == 0 && i < l->n; i++) {
            struct waiter *w = &l->w[i];
            if (!stuck(w) || w->walked)
                continue;
            rc = prove(td, w);
            failed |= rc == 0 && !w->walked;
        }
        if (rc || !failed)
            return rc;
    }
}

/* Steps 1-4 into *l. */
static int find_leaks(struct leaks *l)
{
    *l = (struct leaks){0};
    struct task_dir td;
    int rc = census_open_task_dir(&td);
    if (rc)
        return rc;
    l->td = &td;
    l->pid = td.pid;
    unwind_refresh_if_loaded(); /* the walks need every object's table */
    census_enter();
    rc = list_threads(&td, l);
    if (rc == 0)
        rc = read_waiters(l);
    if (rc == 0) {
        read_owners(l);
        rc = judge_and_prove(&td, l);
    }
    census_leave();
    close(td.fd);
    if (rc)
        leaks_free(l);
    return rc;
}

/* ---- The census of them ------------------------------------------------- */

/* `set` plus the leak's keys (census.h), replacing *set's reference. */
static int mark(const cpprof_labelset **set, const struct waiter *w)
{
    char leak[48], lock[24], owner[16];
    if (w->verdict == IN_CYCLE)
        snprintf(leak, sizeof leak, "cycle %u", w->cycle);
    else if (w->verdict == BEHIND_CYCLE)
        snprintf(leak, sizeof leak, "behind cycle %u", w->cycle);
    else
        snprintf(leak, sizeof leak, "behind exited thread %d",
                 (int)w->exited);
    snprintf(lock, sizeof lock, "%#lx", (unsigned long)w->word);
    snprintf(owner, sizeof owner, "%d", (int)w->owner);
    const char *kv[] = {CENSUS_LEAK_KEY, leak, CENSUS_LOCK_KEY, lock,
                        CENSUS_LOCK_OWNER_KEY, owner};
    return census_mark_set(set, 6, kv);
}

/* Marks the census's threads (sorted by tid) that are stuck. */
static int mark_census(census *c, const struct leaks *l)
{
    for (size_t i = 0; i < l->n; i++) {
        const struct waiter *w = &l->w[i];
        census_thread *t =
            proven(w) && c->n ? bsearch(&w->tid, c->threads, c->n,
                                        sizeof *c->threads, census_by_tid)
                              : NULL;
        if (!t)
            continue;
        t->leaked = true;
        int rc = mark(&t->labels, w);
        if (rc)
            return rc;
    }
    return 0;
}

/* A census of the stuck threads alone, from their proofs' walks. */
static int census_of_stuck(census *out, const struct leaks *l)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += proven(&l->w[i]);
    out->threads = malloc((n + 1) * sizeof *out->threads);
    if (!out->threads)
        return -ENOMEM;
    for (size_t i = 0; i < l->n; i++)
        if (proven(&l->w[i]))
            out->threads[out->n++] = *l->w[i].walked;
    return census_attach_labels(out);
}

int census_take_leaked(census *out, bool all)
{
    if (!out)
        return -EINVAL;
    *out = (census){0};
    int rc = all ? census_take(out) : 0;
    struct leaks l;
    if (rc == 0 && (rc = find_leaks(&l)) == 0) {
        if (!all)
            rc = census_of_stuck(out, &l);
        if (rc == 0)
            rc = mark_census(out, &l);
        leaks_free(&l);
    }
    if (rc)
        census_release(out);
    return rc;
}

long census_count_leaked(void)
{
    struct leaks l;
    int rc = find_leaks(&l);
    if (rc)
        return rc;
    long n = 0;
    for (size_t i = 0; i < l.n; i++)
        n += proven(&l.w[i]);
    leaks_free(&l);
    return n;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(census_count_leaked);
UPPER_CALLS(census_take_leaked);
