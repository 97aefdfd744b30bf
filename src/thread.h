/*
 * thread.h -- the thread registry and label application (thread.c).
 *
 * Every thread that touches the label API gets one entry: its tid, its name
 * and an atomic pointer to its current label set.  The CPU sampler's signal
 * handler reads the pointer of the thread it interrupted; the census reads
 * any thread's pointer under the registry lock (see labels.h for why that
 * is safe).  Entries leave the registry when their thread exits.
 */
#ifndef CPPROF_THREAD_H
#define CPPROF_THREAD_H

#include "cpprof.h"
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* SIGNAL-SAFE: the calling thread's current set, without a reference (the
 * thread holds one while the set is current).  NULL when it has none. */
const cpprof_labelset *thread_current_labels(void);

/* SIGNAL-SAFE: the same, for the calling thread known to be `tid` (the
 * CPU sampler's timer says whose it is; the crash handler asks gettid):
 * NULL too when the registry entry its TLS leads to is another thread's.
 * A thread made with raw clone(2) without CLONE_SETTLS shares its
 * creator's TLS, and must not carry the creator's labels. */
const cpprof_labelset *thread_labels_if_tid(pid_t tid);

/* The calling thread's tid, from its registry entry, which this makes
 * on the thread's first use of the label API (allocating it); 0 when
 * that fails (out of memory). */
pid_t thread_self_tid(void);

/* Makes `set` the calling thread's current set, the caller's reference to
 * it going to the thread, and returns the set it replaces with the
 * thread's reference, now the caller's: a task's labels moving onto the
 * thread that runs it and back (task.c), `task` the id of the task the
 * thread runs from now (0: none), which tells a label scope that ends
 * in the work it began in.  Accounting and the OpenTelemetry context see
 * the switch as any other.  No allocation, lock or system call; the
 * thread must be registered (thread_self_tid). */
const cpprof_labelset *thread_exchange_labels(const cpprof_labelset *set,
                                              uint64_t task);

/* SIGNAL-SAFE: the CPU sampler's look at the calling thread, known to be
 * `tid`, interrupted with its stack pointer at `sp`: whether it left the
 * block of a label scope it still holds (thread.c, "Scopes whose code
 * moved on"), noted for thread_say_scope_left. */
void thread_check_scope(pid_t tid, uintptr_t sp);

/* Says on stderr, once, which thread was first seen holding a label scope
 * whose code moved on (not from a signal handler). */
void thread_say_scope_left(void);

/* The current set of thread `tid`, with a reference of cpprof's own
 * (labelset_drop), or NULL when the thread
 * has none or never used the API.  Takes the registry lock. */
cpprof_labelset *registry_labels_of(pid_t tid);

/* Calls fn for every registered thread, under the registry lock: fn must not
 * call back into the registry.  `labels` carries no reference of its own;
 * `task` is the id of the task the thread runs (0: none), read with the
 * labels in one step: a thread with a task's labels has its task. */
typedef void (*registry_visit_fn)(pid_t tid, const char *name,
                                  const cpprof_labelset *labels,
                                  uint64_t task, void *arg);
void registry_foreach(registry_visit_fn fn, void *arg);

/* Number of registered threads. */
size_t registry_count(void);

/* A new thread's start: the creator's current labels (a reference) with
 * the thread's function.  thread_start_run() is the function to give
 * pthread_create, with the record as its argument: it applies the labels
 * and calls start(arg).  A record pthread_create did not take is
 * discarded.  NULL from thread_start_new: out of memory. */
struct thread_start;
struct thread_start *thread_start_new(void *(*start)(void *), void *arg);
void *thread_start_run(void *start);
void thread_start_discard(struct thread_start *t);

/* The label key that names a thread as the profiler's own, with its role
 * as the value (pprof_internal=http, =sampler): `-tagignore` on it leaves
 * cpprof's threads out of a profile. */
#define PPROF_INTERNAL_KEY "pprof_internal"

/* What a thread cpprof creates is for: it carries pprof_internal=`name`
 * from its start, before its function runs (libmicrohttpd's pool threads
 * included, which run none of cpprof's code until a request comes), and
 * calls `started` (when not NULL) first thing, there, before its creator
 * goes on (thread_own_creation_end). */
struct own_role {
    const char *name;
    void (*started)(void);
};

/* Gives the threads the calling thread creates from now, inside cpprof's
 * work, `role` (NULL: pprof_internal=cpprof, until they name themselves
 * with thread_label_internal); returns the role it replaces, to restore. */
const struct own_role *thread_own_role(const struct own_role *role);

/* Labels the calling thread pprof_internal=`role` for life.  0 or a
 * negative error (out of memory: the thread stays unlabelled). */
int thread_label_internal(const char *role);

/* What a thread of cpprof's own must not take from the program or the
 * program's thread that creates it (threadcreate.c brackets the real
 * pthread_create with these two when the creator is inside cpprof's
 * work; every thread cpprof starts, libmicrohttpd's included, is made
 * so):
 *   - the program's default stack size (pthread_setattr_default_np,
 *     `ulimit -s`), which may be far smaller than cpprof's work needs
 *     (128 KiB: the symbolizer's 64 KiB buffers on such a stack jumped
 *     its guard page into another thread's stack) or larger
 *     than it needs: the thread gets THREAD_OWN_STACK_BYTES, when the
 *     creator passes no attributes of its own (below);
 *   - the signal mask: the creator blocks, for the length of the call,
 *     every signal but cpprof's own (the CPU sampler's, the census's and
 *     the accounting tick's, as set now) and the faults a thread raises
 *     on itself (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS), so the
 *     thread starts with them blocked and a signal sent to the process
 *     (kill, ^C, SIGCHLD) goes to a thread of the program, as without
 *     cpprof.  Otherwise a program that blocks SIGTERM everywhere and
 *     takes it with sigwait() is killed by it once cpprof's threads
 *     exist.  A signal setting changed later leaves the threads made
 *     before with that signal blocked: the sampler counts them as
 *     unsampled, the census as threads that block its signal;
 *   - a real-time scheduling policy (SCHED_FIFO, SCHED_RR), which a new
 *     thread inherits: cpprof's work (a census, symbolizing a profile)
 *     would run ahead of every ordinary thread of the program and take
 *     CPUs from its real-time ones.  The thread is created as an
 *     ordinary SCHED_OTHER thread instead, when the creator passes no
 *     attributes of its own (neither cpprof nor libmicrohttpd does;
 *     ThreadSanitizer's interceptor does, so under TSan the policy and the
 *     program's default stack size are inherited).
 * thread_own_creation_begin returns the attributes to create with.  With
 * the new thread's start record `t` (its start wrapped by
 * thread_start_run), thread_own_creation_end of a creation that succeeded
 * waits (a bounded while) until the thread carries its pprof_internal
 * label, so that nothing after the creation, a census first of all, can
 * find it unlabelled. */
struct own_creation {
    sigset_t creator_mask;
    pthread_attr_t own;
    bool has_own;
    struct thread_start *start; /* the new thread's, to wait for, or NULL */
};

/* The stack of each of cpprof's threads: its deepest work (libdw and
 * zlib under the symbolizer, GnuTLS's handshake, under ASan's larger
 * frames) with room to spare; cpprof's own frames stay under 16 KiB
 * (-Wstack-usage, Makefile.am).  Only the pages touched cost memory. */
#define THREAD_OWN_STACK_BYTES (1024 * 1024)
const pthread_attr_t *thread_own_creation_begin(struct own_creation *c,
                                                const pthread_attr_t *attr,
                                                struct thread_start *t);
void thread_own_creation_end(struct own_creation *c, bool created);

/* Linux names the CPU-time clock of thread `tid` of this process
 * (include/linux/posix-timers.h: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)).
 * It advances while the thread runs, and only then. */
static inline clockid_t thread_cpu_clock(pid_t tid)
{
    return (clockid_t)((~(unsigned)tid << 3) | 6);
}

/* Thread `tid`'s CPU time in nanoseconds, or -1 once it has exited. */
int64_t tid_cpu_ns(pid_t tid);

/* Whether a running thread keeps a signal blocked, as its status file
 * (SigBlk) and its CPU clock tell the sampler and the census.  A read
 * finds a thread holding a signal for a moment too: inside a handler,
 * where the kernel holds it for microseconds of CPU (but for as long as a
 * loaded machine leaves the thread preempted there), or in glibc's thread
 * start.  So it keeps the signal blocked only once it has run `run_ns` of
 * CPU between two reads that both found it so: its clock taken after the
 * first (blocked_run_start) against its clock taken before the later one
 * (blocked_run_held).  A clock taken after the later read counted what
 * the thread ran after it too: a census preempted there gave up on a
 * thread that had left the handler and gone on to a 16 MB getrandom
 * (test/census_syscall, ASan, loaded: 1 census of 40).  Zeroed: no read
 * has found the signal blocked. */
struct blocked_run {
    bool seen;
    int64_t since; /* the thread's CPU clock the run counts from */
};

/* A read just found the signal blocked: the run counts from now, unless
 * an earlier read found it so. */
void blocked_run_start(struct blocked_run *b, pid_t tid);

/* A read found the signal blocked again; cpu_before: the thread's clock
 * taken before that read.  At the first such read, starts the run and
 * returns false. */
bool blocked_run_held(struct blocked_run *b, pid_t tid, int64_t cpu_before,
                      int64_t run_ns);

#endif
