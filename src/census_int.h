/*
 * census_int.h -- what the census's files share, and no one else (as
 * unwind_int.h is the unwinder's): the task directory a census reads, the
 * round its signals answer into, one census's pass over its threads, and
 * the functions one part calls in another (census.c's opening comment
 * lists the parts).  The helper threads' interface is census_crew.h, the
 * rest of cpprof's census.h.  Nothing declared here runs in a signal
 * handler: the round's handler is census_signal.c's alone.
 */
#ifndef CPPROF_CENSUS_INT_H
#define CPPROF_CENSUS_INT_H

#include "census.h"
#include "census_crew.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* /proc/self/task, kept open for one census (proctasks.h): it is listed,
 * and each file is opened relative to it; and our pid, asked once (glibc
 * does not keep it). */
struct task_dir {
    int fd;
    pid_t pid; /* ours */
};

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

/* What census_walk_blocked found. */
enum { BLOCKED = 1, NOT_BLOCKED = 0 };

/* Tries per thread before it counts as changing too fast to read. */
#define WALK_TRIES 3

/* One census's reading of its threads, shared by the thread taking it
 * and the crew's helpers (census_crew.h).  Only the caller signals, and
 * so only it touches the round, `held` and `refreshed`; a helper
 * describes a thread and walks it from outside when it is blocked in the
 * kernel, and leaves the rest to the caller in `outcome`.  Each entry of
 * `c` is written by one reader at a time; a thread a helper finds gone is
 * marked in `outcome`, not by its tid, which the caller reads meanwhile
 * (census_attach_labels). */
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

/* census.c */

/* Orders census_thread, struct tid_labels, struct still_thread and struct
 * known_thread, whose first member is tid. */
int census_by_tid(const void *a, const void *b);

/* One census, or one census's reading, at a time (its crew's runs
 * among them): census_enter waits for the one under way. */
void census_enter(void);
void census_leave(void);

/* Gives every thread the registry's label set for its tid, and the task
 * it runs with them, reading the registry once. */
int census_attach_labels(census *c);
/* *set plus the n/2 labels of kv, replacing *set's reference with the
 * merged set's (census_tasks.c): how a census marks what it adds to a
 * thread's or task's labels. */
int census_mark_set(const cpprof_labelset **set, size_t n,
                    const char *const *kv);

/* census_proc.c: a thread's files under /proc/self/task. */

int census_open_task_dir(struct task_dir *td);
void census_set_state(census_thread *t, char state);
int census_read_stat(const struct task_dir *td, census_thread *t);
int census_recheck_before_signal(const struct task_dir *td, census_thread *t,
                                 int signo, bool *blocked);
void census_read_wchan(const struct task_dir *td, census_thread *t);

/* census_still.c: the threads unchanged since the last census. */

bool census_describe_thread(const struct task_dir *td, census_thread *t,
                            bool details, bool renamed);
void census_keep_still(const census *c, unsigned long renames);
/* The renames of other threads so far (census_keep_still's `renames`), and
 * whether any came since the still threads were kept (*renamed). */
unsigned long census_still_renames(bool *renamed);
/* The tids of every thread of the last census, sorted (list_known);
 * *n 0: none kept. */
const pid_t *census_still_tids(size_t *n);
void census_still_after_fork(void);

/* census_blocked.c: a blocked thread's stack, read from outside. */

/* A blocked thread's place, from /proc/self/task/TID/syscall: "NR arg1 ..
 * arg6 SP PC" in a system call, "-1 SP PC" blocked outside one (a page
 * fault), "running" otherwise. */
#define CENSUS_SYSCALL_ARGS 6
struct census_syscall {
    char text[160];
    long nr;
    int nargs; /* of args: 6 in a call, 0 outside one */
    unsigned long long args[CENSUS_SYSCALL_ARGS];
    uintptr_t sp, pc;
};
int census_read_syscall(int fd, struct census_syscall *at);

int census_walk_blocked(const struct task_dir *td, census_thread *t);

/* census_locks.c: glibc's locks, seen from outside their waiters. */

enum census_lock_kind { LOCK_NONE, LOCK_MUTEX, LOCK_RWLOCK };
/* The kind of lock a thread's blocking call waits for, by the call and
 * its arguments: LOCK_NONE for anything else (a condition variable, a
 * timed wait, a process-shared lock, any other call). */
enum census_lock_kind census_lock_wait(const struct census_syscall *at);
/* The owner a lock of that kind records, read fault-proof around the
 * futex word a thread sleeps on expecting `val`; 0 when the words there
 * are not such a lock's, locked with an owner recorded.  `pid` is ours. */
pid_t census_lock_owner(pid_t pid, enum census_lock_kind kind,
                        uintptr_t word, unsigned val);
/* Whether one of the first frames of a walked stack is in glibc's
 * function for locks of that kind. */
bool census_waits_in_lock(const census_thread *t, enum census_lock_kind kind);

/* census_leak.c: the threads that cannot run again. */

void census_leak_after_fork(void);

/* census_maps.c: the unwinder's table, refreshed for the threads
 * signalled. */

void census_refresh_for(const census_thread *t, bool *refreshed);
void census_remember_mapped(const census *c);
void census_maps_after_fork(void);

/* census_signal.c: the round, its handler and its timers. */

int census_ensure_handler(int signo);
struct round *census_round_new(size_t n);
/* Gives the round its generation and its n threads, and publishes it to
 * the handlers. */
void census_round_publish(struct round *r, size_t n);
void census_look_again(struct round *r, census_thread *t, uint32_t i);
void census_signal_thread(census *c, struct round *r, uint32_t i, int signo,
                          unsigned *held, int64_t deadline);
/* Waits for the answers, then retires p->r: unpublished, its answers
 * copied into p->c, freed unless a handler is still inside it. */
void census_round_finish(struct pass *p, long timeout_ms);
void census_signal_after_fork(void);

/* census_tasks.c: the parked tasks. */

/* Adds the parked tasks to the census, in groups, and with `each` one by
 * one, each marked CENSUS_TASK_KEY=parked and CENSUS_WAIT_KEY=its
 * reason; the threads that run a task now are marked
 * CENSUS_TASK_KEY=running. */
int census_add_tasks(census *c, bool each);

#endif
