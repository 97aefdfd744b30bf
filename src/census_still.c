/*
 * census_still.c -- the threads that have not run since the last census:
 * what it read of them is taken again instead of their files under
 * /proc/self/task (census_proc.c) and a walk.  Apart from census.c
 * because it is state kept from one census to the next, with its own
 * rules for when it still holds.
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
 * starts afresh.
 */
#define _GNU_SOURCE
#include "census_int.h"
#include "atfork.h"
#include "interpose.h"
#include "thread.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

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
        bsearch(&t->tid, still.v, still.n, sizeof *still.v, census_by_tid);
    if (!e || e->cpu_ns != t->cpu_ns)
        return false;
    t->details = e->details && !renamed;
    if (details && !t->details)
        return false;
    memcpy(t->name, e->name, sizeof t->name);
    memcpy(t->wchan, e->wchan, sizeof t->wchan);
    census_set_state(t, e->state);
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
void census_keep_still(const census *c, unsigned long renames)
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

/* Reads what a thread's stack walk needs before the walk: its CPU clock
 * (which proves the files read after it held still), and with `details`
 * its name, state and wait channel.  A thread that has not run since the
 * last census comes whole from it (reuse_still; `renamed`: a thread was
 * renamed since).  False when the thread is gone. */
bool census_describe_thread(const struct task_dir *td, census_thread *t,
                            bool details, bool renamed)
{
    t->cpu_ns = tid_cpu_ns(t->tid);
    if (t->cpu_ns < 0)
        return false; /* exited since the listing */
    if (reuse_still(t, details, renamed) || !details)
        return true;
    if (census_read_stat(td, t) != 0)
        return false;
    census_read_wchan(td, t);
    t->details = true;
    return true;
}

unsigned long census_still_renames(bool *renamed)
{
    unsigned long renames = atomic_load(&census_renames);
    *renamed = renames != still.renames;
    return renames;
}

const pid_t *census_still_tids(size_t *n)
{
    *n = still.n_tids;
    return still.tids;
}

/* The child's threads are not the parent's (census_keep_still frees the
 * parent's later). */
ATFORK_CHILD void census_still_after_fork(void)
{
    still.n = 0;
    still.n_tids = 0;
}
