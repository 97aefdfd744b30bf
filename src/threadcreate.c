/*
 * threadcreate.c -- the thread-creation profiler behind
 * /debug/pprof/threadcreate, and label inheritance.
 *
 * pthread_create is defined here and exported, so it interposes on glibc's
 * whether the library is linked or preloaded; glibc's is found with
 * dlsym(RTLD_NEXT) on first use.  Every successful creation counts one at
 * the creating stack, cumulatively, as Go's threadcreate profile counts
 * the creation of OS threads.  cpprof_thread_create() creates its thread
 * through this function, so it is counted once, at its caller's stack
 * (with cpprof_thread_create's frame on top).
 *
 * A thread created by a thread that holds labels starts with them, as a
 * goroutine starts with its creator's (setting inherit_labels): the
 * thread's function is wrapped in thread.c's thread_start_run, which
 * applies them first.  A thread created inside cpprof's own work
 * (own_work: the HTTP server's, the CPU sampler's collector) is
 * wrapped too, to be cpprof's for life and carry pprof_internal=<role>
 * from its start (the creation returns once it does), and is not
 * counted: threadcreate shows the program's threads.  It is created with
 * every signal blocked but cpprof's own and faults, so that a signal sent
 * to the process reaches the program's threads only, and as an ordinary
 * thread when its creator runs under a real-time policy (thread.h).
 * While a CPU profile runs every new thread is wrapped, so that it
 * announces itself to the sampler (sampler_thread_started) and is sampled
 * from its start.  Any other creator without labels creates its thread
 * unwrapped, at no cost.
 *
 * Every creation also records who made the thread, for the "created by"
 * line of its goroutine dump and crash report: the new thread's tid
 * (which clone wrote into its descriptor before pthread_create returned,
 * read back through pthread_getcpuclockid, whose clock id is the tid
 * encoded), the creator's tid and the return address of the call.  A
 * table of THREADCREATE_CREATORS records indexed by the tid's low bits,
 * each published by its tid last, so that a reader (a signal handler
 * among them) never takes one record's fields for another's.
 */
#define _GNU_SOURCE
#include "threadcreate.h"
#include "atfork.h"
#include "collect.h"
#include "own.h"
#include "config.h"
#include "interpose.h"
#include "sampler.h"
#include "thread.h"
#include "trace.h"
#include "stacktab.h"
#include "upper_calls.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *,
                         void *(*)(void *), void *);
static create_fn glibc_create;
static atomic_flag table_lock ATFORK_LOCK = ATOMIC_FLAG_INIT;
static stacktab *created; /* values: {threads}; under table_lock */

/* Who created which thread (threadcreate_creator): record tid % N. */
#define THREADCREATE_CREATORS 4096
struct creator {
    atomic_int tid; /* the created thread's; 0 while written */
    atomic_int creator;
    _Atomic uintptr_t pc;
};
static struct creator creators[THREADCREATE_CREATORS];

/* The tid of a thread just created, or 0 once it has exited: Linux's
 * per-thread CPU clock id is ~tid << 3 | 6 (CPUCLOCK_PERTHREAD, SCHED;
 * thread.h's thread_cpu_clock is its inverse). */
static pid_t created_tid(pthread_t thread)
{
    clockid_t clock;
    if (pthread_getcpuclockid(thread, &clock) != 0)
        return 0;
    return (pid_t)~((long)clock >> 3);
}

static void record_creator(pthread_t thread, uintptr_t pc)
{
    pid_t tid = created_tid(thread);
    if (tid <= 0)
        return;
    struct creator *c = &creators[(unsigned)tid % THREADCREATE_CREATORS];
    atomic_store_explicit(&c->tid, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&c->creator, gettid(), memory_order_relaxed);
    atomic_store_explicit(&c->pc, pc, memory_order_relaxed);
    atomic_store_explicit(&c->tid, tid, memory_order_release);
}

/* SIGNAL-SAFE: loads only. */
bool threadcreate_creator(pid_t tid, pid_t *creator, uintptr_t *pc)
{
    if (tid <= 0)
        return false;
    struct creator *c = &creators[(unsigned)tid % THREADCREATE_CREATORS];
    if (atomic_load_explicit(&c->tid, memory_order_acquire) != tid)
        return false;
    *creator = atomic_load_explicit(&c->creator, memory_order_relaxed);
    *pc = atomic_load_explicit(&c->pc, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&c->tid, memory_order_relaxed) == tid;
}

static __attribute__((noinline)) void record_creation(void)
{
    uintptr_t pcs[STACK_MAX_FRAMES];
    unsigned flags;
    uint64_t gen;
    int64_t one = 1;
    own_busy = 1;
    /* Drops this function and pthread_create: the leaf is its caller. */
    size_t depth = collect_stack(2, pcs, STACK_MAX_FRAMES, &flags, &gen);
    collect_spin_lock(&table_lock);
    if (!created)
        created = stacktab_new(1);
    if (created)
        stacktab_add(created, pcs, depth, flags, gen, NULL, &one);
    collect_spin_unlock(&table_lock);
    own_busy = 0;
}

/* Whether a new thread's function may be wrapped.  Under TSan the wrapper
 * (instrumented code) must run inside the runtime's own thread start: true
 * when the next pthread_create is the runtime's interceptor (cpprof linked
 * into the executable), false when it is glibc's (libcpprof.so after the
 * runtime, whose interceptor called here with its trampoline as `start`):
 * then new threads neither inherit labels nor announce themselves, and
 * the sampler's slow thread scan still finds them. */
static bool may_wrap(create_fn real)
{
#ifdef __SANITIZE_THREAD__
    static int verdict; /* 0: unknown, 1: may, -1: may not */
    if (!verdict) {
        Dl_info info;
        verdict = dladdr((void *)real, &info) && info.dli_fname &&
                          strstr(info.dli_fname, "libc.so")
                      ? -1
                      : 1;
    }
    return verdict > 0;
#else
    (void)real;
    return true;
#endif
}

EXPORT int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                          void *(*start)(void *), void *arg)
{
    create_fn real = (create_fn)interpose_next((void **)&glibc_create,
                                               "pthread_create");
    if (!real)
        return EAGAIN;
    struct thread_start *inherit = NULL;
    if (start != thread_start_run && may_wrap(real) &&
        (own_work || sampler_running() || trace_recording() ||
         (thread_current_labels() && cfg_int(CFG_INHERIT_LABELS)))) {
        if (!(inherit = thread_start_new(start, arg)))
            return EAGAIN;
        start = thread_start_run;
        arg = inherit;
    }
    /* cpprof's own thread starts without the program's signals and
     * real-time policy (thread.h). */
    struct own_creation own;
    bool is_own = own_work;
    if (is_own)
        attr = thread_own_creation_begin(&own, attr, inherit);
    int rc = real(thread, attr, start, arg);
    if (is_own)
        thread_own_creation_end(&own, rc == 0);
    if (rc != 0 && inherit)
        thread_start_discard(inherit);
    if (rc == 0)
        record_creator(*thread, (uintptr_t)__builtin_return_address(0));
    if (rc == 0 && !own_busy && !own_work)
        record_creation();
    return rc;
}

int threadcreate_snapshot(sampleset **out)
{
    return sampleset_copy_locked(&created, 1, &table_lock, out);
}

static void atfork_prepare(void)
{
    collect_spin_lock(&table_lock);
}

static void atfork_parent(void) { collect_spin_unlock(&table_lock); }
ATFORK_CHILD static void atfork_child(void)
{
    atfork_spin_release(&table_lock);
}

__attribute__((constructor)) static void threadcreate_init(void)
{
    static const atfork_handlers on_fork = {atfork_prepare, atfork_parent,
                                            atfork_child};
    atfork_add(ATFORK_THREADCREATE, &on_fork);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(threadcreate_creator);
UPPER_CALLS(threadcreate_snapshot);
