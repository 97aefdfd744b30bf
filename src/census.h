/*
 * census.h -- the thread census (census.c): every thread of the process with
 * its stack, label set, name and scheduler state, the C analogue of Go's
 * goroutine profile.  http_goroutine.c renders it.  Never called from a
 * signal handler.
 */
#ifndef CPPROF_CENSUS_H
#define CPPROF_CENSUS_H

#include "cpprof.h"
#include "stacktab.h"
#include "thread.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Room for why a stack is missing: "signal not sent: " and the longest
 * strerror text, whole (a reason cut short names no cause). */
#define CENSUS_MISSING_MAX 96

/* The root frame of a thread whose stack is missing, followed by why. */
#define CENSUS_NO_STACK "cpprof.stackUnavailable"
/* Room for that frame: CENSUS_NO_STACK " (" missing ")". */
#define CENSUS_NO_STACK_FRAME_MAX \
    (sizeof CENSUS_NO_STACK + sizeof " ()" + CENSUS_MISSING_MAX)

typedef struct {
    pid_t tid;
    char name[16];         /* comm */
    char state;            /* the kernel's letter: R, S, D, T, t, Z, I... */
    char state_name[16];   /* its word: "running", "sleeping", ... */
    char wchan[64];        /* kernel wait channel, or "" when none/unknown */
    const cpprof_labelset *labels; /* holds a reference; NULL: no labels */
    uint64_t task; /* the task it runs (its id), read with its labels */
    /* "" when pcs hold the thread's stack; else why it is missing, e.g.
     * "signal blocked", "thread stopped", "no answer within 100 ms". */
    char missing[CENSUS_MISSING_MAX];
    unsigned depth, flags; /* flags: STACK_* of unwind.h */
    /* census.c's bookkeeping: the thread's CPU clock when its state was
     * read, and whether state, wait channel and stack were all read while
     * that clock stood still (then the next census may reuse them); its
     * start time (clock ticks after boot), which tells it from a later
     * thread with the same tid.  `blocked`: a running thread found
     * blocking the census signal, told from one still in the census's
     * handler by how long it runs so. */
    int64_t cpu_ns;
    bool still;
    struct blocked_run blocked;
    unsigned long long start_ticks;
    /* name, state and wchan were read (census_take; census_take_stacks
     * reads them only for a thread it signals, wchan never). */
    bool details;
    /* Where the stack was read: the system call (number) the thread was
     * blocked in when walked from outside, -1 blocked outside one (a page
     * fault); CENSUS_RAN when it walked its own stack (it was running);
     * CENSUS_UNREAD when there is no stack. */
    long syscall;
    /* Found running and signalled, it blocked before its signal came and
     * was walked from outside (up to the census's recheck interval
     * later): its stack and syscall are of that later moment. */
    bool walked_late;
    /* census_take_leaked found that it cannot run again. */
    bool leaked;
    uintptr_t pcs[STACK_MAX_FRAMES];
} census_thread;

#define CENSUS_RAN (-2L)
#define CENSUS_UNREAD (-3L)

/* The labels that tell tasks from threads in every form of the census,
 * for `go tool pprof -tags`, `-tagfocus pprof_task=parked`. */
#define CENSUS_TASK_KEY "pprof_task"
#define CENSUS_WAIT_KEY "pprof_wait"

/* The labels census_take_leaked gives the threads it finds: the deadlock
 * cycle a thread is in ("cycle 1"), or what it waits behind ("behind
 * cycle 1", "behind exited thread 4242"); the lock word it sleeps on
 * ("0x5581d2c0a040"), and that lock's owner (a tid). */
#define CENSUS_LEAK_KEY "pprof_leak"
#define CENSUS_LOCK_KEY "pprof_lock"
#define CENSUS_LOCK_OWNER_KEY "pprof_lock_owner"

/* Why a parked task has no stack (depth 0): it left with
 * CPPROF_TASK_NO_STACK, or its thread exited or ended it while in it. */
#define CENSUS_TASK_NO_STACK "left without its stack"

/* Parked tasks (task.h) with one stack, label set and reason.  The census
 * groups them as it reads them, so that a hundred thousand tasks parked
 * at a few places are a few groups to every form that shows stacks.  Two
 * groups may still end with the same stack and (marked) set, when their
 * reasons are equal strings at two addresses, or their own sets differed
 * only under the keys the marking sets: a reader that groups by stack and
 * set merges them. */
typedef struct {
    /* The tasks' set plus CENSUS_TASK_KEY=parked and
     * CENSUS_WAIT_KEY=reason (a thread running a task carries
     * CENSUS_TASK_KEY=running); holds a reference. */
    const cpprof_labelset *labels;
    const char *reason;    /* the program's string, by address */
    size_t count;          /* tasks, at least 1 */
    unsigned depth, flags; /* depth 0: CENSUS_TASK_NO_STACK */
    const uintptr_t *pcs;  /* the census's, shared by groups */
} census_parked;

/* One parked task: census_take lists each (Go's debug=2 dumps each). */
typedef struct {
    uint64_t number;   /* 1, 2, ... in order of creation */
    int64_t parked_ns; /* how long it has been parked */
    size_t group;      /* census.parked[group] */
    uint64_t creator;  /* its creator's tid, or task number (task.h) */
    uintptr_t created_at; /* the creating call's return address */
} census_task;

typedef struct {
    size_t n;
    census_thread *threads; /* sorted by tid */
    size_t n_parked;
    census_parked *parked; /* in the order of their first task's slot */
    size_t parked_tasks;   /* the groups' counts summed */
    size_t n_tasks;
    census_task *tasks;    /* census_take's: each, in slot order; else NULL */
    uintptr_t *parked_pcs; /* the groups' stacks */
} census;

/* Takes a census of every thread now in /proc/self/task and of every
 * parked task, waiting at most the "census_timeout_ms" setting for the
 * threads' stacks; a thread that exits meanwhile is left out, and so is a
 * task entered meanwhile (it shows as its thread).  One census runs at a
 * time; a second caller waits for the first.  Errors: CPPROF_ESIGTAKEN
 * (the "census_signal" has a handler that is not ours), -ENOMEM,
 * -errno. */
int census_take(census *out);

/* The same census without the name, state and wait channel of a thread
 * blocked in the kernel (name "", state 0), and with the parked tasks in
 * their groups only (tasks NULL): one /proc file per such thread instead
 * of three, and no record per task, for the forms that show stacks and
 * labels only (the goroutine profile's proto, debug=1 and delta, the
 * wall profile).  A thread stopped by a debugger is walked from outside
 * rather than given the reason "thread stopped", which takes its state.
 * Same errors. */
int census_take_stacks(census *out);

/* The threads now in /proc/self/task with their label sets only: no
 * name, state, wait channel or stack (each is missing ""), and nothing
 * read per thread but the registry, so no thread is signalled either; no
 * tasks.  What /debug/pprof/labels counts.  Errors: -ENOMEM, -errno. */
int census_take_labels(census *out);

/* The threads that cannot run again, as far as their locks prove it
 * (census_leak.c): each member of a cycle of threads blocked on a lock
 * the next one holds, and each thread blocked behind such a cycle or
 * behind a lock whose owner has exited, marked with CENSUS_LEAK_KEY,
 * CENSUS_LOCK_KEY and CENSUS_LOCK_OWNER_KEY and `leaked`.  `all`: the
 * whole census as census_take takes it, those threads marked among the
 * rest (Go's goroutineleak?debug=2 dumps every goroutine); else those
 * threads alone, with stacks and labels but no name, state or wait
 * channel, and no tasks.  Nothing is signalled for them: they are read
 * from outside.  Errors as census_take's. */
int census_take_leaked(census *out, bool all);

/* How many threads census_take_leaked would list (the index's count), or
 * -errno. */
long census_count_leaked(void);

/* Whether the program has a handler of its own on the census's signal
 * (setting census_signal), so that a census with stacks would be declined
 * (CPPROF_ESIGTAKEN): for the index. */
bool census_signal_is_programs(void);

/* Releases the label references and frees the threads and tasks. */
void census_release(census *c);

/* Whether the census's signal handlers time their walks (off at start):
 * on while a wall profile paces its censuses by their CPU. */
void census_time_handlers(bool on);

/* The CPU the census's signal handlers have spent walking the running
 * threads they interrupted, on those threads, while timed (each census's
 * own share: the difference across it). */
int64_t census_handlers_cpu_ns(void);

#endif
