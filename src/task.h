/*
 * task.h -- tasks (task.c): units of work that carry their own label set
 * from thread to thread (cpprof_task_*, cpprof.h), and what the census
 * reads of them: the parked ones (which threads run one, the label
 * registry says: thread.h).
 */
#ifndef CPPROF_TASK_H
#define CPPROF_TASK_H

#include "cpprof.h"
#include "unwind.h" /* STACK_MAX_FRAMES */

#include <stdint.h>
#include <sys/types.h>

/* A parked task as a census sees it. */
struct task_parked {
    uint64_t id;                   /* its handle's (cpprof_task.id) */
    uint64_t number;               /* 1, 2, ... in order of creation */
    const cpprof_labelset *labels; /* the task's, alive while fn runs */
    const char *reason;            /* the program's string, by address */
    int64_t parked_ns;             /* how long it has been parked */
    uint64_t creator;              /* the creating thread's tid, or task's
                                      number when a task made it */
    uintptr_t created_at;          /* the creating call's return address */
    unsigned depth, flags;         /* depth 0: left without its stack */
    uintptr_t pcs[STACK_MAX_FRAMES];
};

/* Calls fn(t, arg) for every task parked now, in slot order, under the
 * registry lock (labels.h), which is taken for 256 slots at a time: fn
 * must not call into the registry, and should do little more than copy
 * (the program's threads wait on the lock to end a task meanwhile).
 * t->labels may be freed once the lock is let go: fn holds it
 * (labelset_hold) to keep it.  A task entered meanwhile is left out: it
 * is running then, and shows as its thread.  fn returning non-zero stops
 * the walk with that value; else 0. */
typedef int (*task_parked_fn)(const struct task_parked *t, void *arg);
int task_foreach_parked(task_parked_fn fn, void *arg);

/* How many tasks are live (parked or running) now: a census's room. */
size_t task_live_count(void);

/* How many tasks are parked now (a look at every slot, no lock): what
 * the index counts beside the threads. */
size_t task_parked_count(void);


#endif
