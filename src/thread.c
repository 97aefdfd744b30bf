/*
 * thread.c -- the thread registry and applying label sets to threads.
 *
 * Go attaches labels to a goroutine; cpprof attaches them to a thread.  Each
 * thread that uses the API has one registry entry, found through an
 * initial-exec TLS pointer (so the CPU sampler's signal handler can read it
 * without calling into the dynamic linker) and linked in a list under one
 * mutex for the census.  The entry's `labels` pointer is the thread's current
 * set and always holds a reference of its own; applying a set is an atomic
 * exchange plus a reference count update, with no allocation and no lock.
 *
 * cpprof_do() restores through a cleanup attribute: with -fexceptions, gcc
 * runs it while a C++ exception or pthread_cancel's forced unwind passes
 * through, which is the C form of Go's "Do restores on panic".  longjmp
 * runs no cleanup, so a longjmp out of the function cpprof_do runs leaves
 * the derived set applied (cpprof.h says how to restore it).
 *
 * cpprof_do is not async-signal-safe (it may intern a set under a mutex,
 * and a thread's first call allocates), but it must not hang the host when
 * a program calls it from a signal handler anyway: a handler that
 * interrupted this very thread inside the intern lock or its registration
 * gets -EDEADLK (thread-local flags, labels.c and `registering` here).
 */
#define _GNU_SOURCE
#include "thread.h"
#include "alloc.h"
#include "own.h"
#include "config.h"
#include "atfork.h"
#include "labelhooks.h"
#include "labels.h"
#include "util.h"
#include "warn.h"
#include "upper_calls.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

struct thread_entry {
    pid_t tid;
    char name[16];
    _Atomic(const cpprof_labelset *) labels;
    /* The task's id while it runs here (task.c), else 0.  It changes
     * with the labels, as one step under `seq` (odd while they change),
     * so that a reader never sees a task's labels without its task. */
    _Atomic uint64_t task;
    _Atomic unsigned seq;
    /* The innermost label scope begun here outside a task and not ended:
     * an address the stack pointer stays below while its block runs
     * (scope_mark), or 0. */
    _Atomic uintptr_t scope_mark;
    struct thread_entry *prev, *next;
};

static __thread struct thread_entry *self
    __attribute__((tls_model("initial-exec")));
/* Set while this thread registers itself (allocation and the registry
 * lock): a signal handler that interrupted that and calls cpprof_do gets
 * -EDEADLK instead of deadlocking. */
static __thread int registering __attribute__((tls_model("initial-exec")));

static struct thread_entry *registry_head ATFORK_HELD;
static size_t registry_len ATFORK_HELD; /* both written by a forked child */
static pthread_key_t exit_key;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void unlink_entry(struct thread_entry *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        registry_head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    registry_len--;
}

/* Mirrors the thread's current set where out-of-process profilers read it
 * (otel.c's hook) and in a trace being recorded (trace.c's), before the
 * replaced set's reference goes; while those are off, a predictable branch
 * each. */
static inline void publish(const struct thread_entry *e,
                           const cpprof_labelset *set)
{
    label_set_hook *hook = atomic_load_explicit(&label_hooks.set_current,
                                                memory_order_relaxed);
    if (__builtin_expect(hook != NULL, 0))
        hook(set);
    void (*traced)(enum label_trace_what, const cpprof_labelset *, uint64_t) =
        atomic_load_explicit(&label_hooks.traced, memory_order_relaxed);
    if (__builtin_expect(traced != NULL, 0))
        traced(LABEL_TRACE_SWITCH, set,
               atomic_load_explicit(&e->task, memory_order_relaxed));
}

/* Per-label-set accounting (labelhooks.h) charges the set a thread is
 * leaving, while the thread still holds it; while that is off, one
 * predictable branch. */
static inline void account(const cpprof_labelset *leaving)
{
    int mode = atomic_load_explicit(&accounting_on, memory_order_relaxed);
    if (__builtin_expect(mode, 0))
        acct_switch(leaving, mode);
}

/* pthread key destructor: the thread is exiting; drop its entry and the
 * reference its current set held. */
static void thread_exited(void *arg)
{
    struct thread_entry *e = arg;
    void (*ending)(void) = atomic_load(&label_hooks.thread_ending);
    if (ending)
        ending(); /* a task it runs leaves, its labels with it */
    label_set_hook *exiting = atomic_load(&label_hooks.thread_exiting);
    if (exiting)
        exiting(atomic_load(&e->labels));
    publish(e, NULL);
    void (*traced)(enum label_trace_what, const cpprof_labelset *, uint64_t) =
        atomic_load(&label_hooks.traced);
    if (traced)
        traced(LABEL_TRACE_EXIT, NULL, 0);
    labels_registry_lock();
    unlink_entry(e);
    labels_registry_unlock();
    self = NULL;
    labelset_drop(atomic_load(&e->labels));
    alloc_real_free(e);
}


/* In the child only the forking thread exists: forget the others. */
ATFORK_CHILD static void registry_atfork_child(void)
{
    /* The other threads' entries are dropped, not freed: after fork only
     * async-signal-safe calls are safe in the child, and an allocator
     * whose lock another thread held at fork (ASan's: the soak test hung
     * here) never gives it back.  A child that lives on keeps a few dead
     * entries. */
    if (registry_head != self) /* written only if it differs (atfork.h) */
        registry_head = self;
    if (registry_len != (self ? 1u : 0u))
        registry_len = self ? 1 : 0;
    if (self) {
        self->prev = self->next = NULL;
        self->tid = gettid();
    }
    labels_atfork_child();
}

static void registry_init(void)
{
    pthread_key_create(&exit_key, thread_exited);
    static const atfork_handlers on_fork = {
        labels_atfork_prepare, labels_atfork_parent, registry_atfork_child};
    atfork_add(ATFORK_REGISTRY, &on_fork);
}

/* Allocates the calling thread's entry and links it in.  The entry is
 * cpprof's memory, not the program's: untracked, out of its heap profile. */
static struct thread_entry *add_self(void)
{
    pthread_once(&init_once, registry_init);
    struct thread_entry *e = alloc_real_calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->tid = gettid();
    prctl(PR_GET_NAME, e->name);
    atomic_init(&e->labels, NULL);
    if (pthread_setspecific(exit_key, e) != 0) {
        alloc_real_free(e);
        return NULL;
    }
    labels_registry_lock();
    e->next = registry_head;
    if (registry_head)
        registry_head->prev = e;
    registry_head = e;
    registry_len++;
    labels_registry_unlock();
    self = e;
    return e;
}

/* The calling thread's new entry, or NULL (out of memory). */
static struct thread_entry *register_self(void)
{
    registering = 1;
    atomic_signal_fence(memory_order_seq_cst);
    struct thread_entry *e = add_self();
    atomic_signal_fence(memory_order_seq_cst);
    registering = 0;
    return e;
}

static inline struct thread_entry *self_entry(void)
{
    return __builtin_expect(self != NULL, 1) ? self : register_self();
}

/* Makes `set` current, passing the caller's reference to the thread, and
 * releases the reference of the set it replaces. */
static void install(struct thread_entry *e, const cpprof_labelset *set)
{
    account(atomic_load_explicit(&e->labels, memory_order_relaxed));
    const cpprof_labelset *old =
        atomic_exchange_explicit(&e->labels, set, memory_order_acq_rel);
    publish(e, set);
    labelset_drop(old);
}

/* ---- Scopes whose code moved on without ending them --------------------
 *
 * A scope is a block's: while the block runs, the thread's stack pointer
 * stays below it.  Found above it while the scope is still open on the
 * thread, the code that began it has left the thread's stack: a coroutine
 * suspended or a fiber switched while it held the scope, outside a task,
 * and until the scope ends (on another thread, or here much later) the
 * thread's other work carries its labels.  That is said when it is seen,
 * not at the scope's end, hours later for a long connection: by the CPU
 * sampler, which compares each sample's stack pointer (a profile being
 * taken), and by the thread's next scope or task switch. */

/* How far above the stack pointer a scope's struct may lie and be taken
 * for a local of the block that began it. */
#define SCOPE_ON_STACK_BYTES (64 * 1024)

/* The address the stack pointer stays below while the block that begins
 * `scope` runs: the struct itself when it is a local of that block (just
 * above `sp`, cpprof_scope_begin's frame), else (a struct in a coroutine's
 * frame, on the heap) `cfa`, the stack pointer of begin's caller. */
static uintptr_t scope_mark(const void *scope, uintptr_t sp, uintptr_t cfa)
{
    uintptr_t at = (uintptr_t)scope;
    return at > sp && at - sp < SCOPE_ON_STACK_BYTES ? at : cfa;
}

/* The first thread seen with an open scope its code has left, for the
 * warning (which a signal handler cannot write). */
static _Atomic pid_t scope_left_tid;

/* SIGNAL-SAFE: whether the stack pointer `sp` is above the block of e's
 * innermost open scope, on the same stack (within SCOPE_ON_STACK_BYTES: a
 * program's signal handler on its altstack is not the block's caller);
 * noted once per scope (its mark is cleared). */
static bool scope_left(struct thread_entry *e, uintptr_t sp)
{
    uintptr_t mark = atomic_load_explicit(&e->scope_mark, memory_order_relaxed);
    if (!mark || sp <= mark || sp - mark >= SCOPE_ON_STACK_BYTES ||
        !atomic_compare_exchange_strong(&e->scope_mark, &mark, 0))
        return false;
    pid_t none = 0;
    atomic_compare_exchange_strong(&scope_left_tid, &none, e->tid);
    return true;
}

void thread_say_scope_left(void)
{
    static atomic_bool said;
    pid_t tid = atomic_load_explicit(&scope_left_tid, memory_order_relaxed);
    if (!tid || atomic_exchange(&said, true))
        return;
    warn_stderr("cpprof: a label scope (cpprof_do, cpprof::scope) begun on "
                "thread %d outside a task is still open there, but the code "
                "that began it has moved on (a co_await, a fiber switch): "
                "until it ends, thread %d's other work carries its labels, "
                "and its end on another thread will not put them back; run "
                "that work as a task (docs/tasks.md)\n",
                (int)tid, (int)tid);
}

/* SIGNAL-SAFE */
void thread_check_scope(pid_t tid, uintptr_t sp)
{
    struct thread_entry *e = self;
    if (e && e->tid == tid)
        scope_left(e, sp);
}

/* The calling thread's check, from one of its own frames. */
static inline void check_scope_here(struct thread_entry *e)
{
    if (scope_left(e, (uintptr_t)__builtin_frame_address(0)))
        thread_say_scope_left();
}

/* Where begin's caller had its stack pointer (begin's canonical frame
 * address); gcc knows it, clang's frame pointer is 16 bytes below it. */
#if defined(__GNUC__) && !defined(__clang__)
#define CALLER_SP() ((uintptr_t)__builtin_dwarf_cfa())
#else
#define CALLER_SP() ((uintptr_t)__builtin_frame_address(0) + 2 * sizeof(void *))
#endif

pid_t thread_self_tid(void)
{
    struct thread_entry *e = self_entry();
    return e ? e->tid : 0;
}

const cpprof_labelset *thread_exchange_labels(const cpprof_labelset *set,
                                              uint64_t task)
{
    struct thread_entry *e = self;
    check_scope_here(e);
    const cpprof_labelset *old =
        atomic_load_explicit(&e->labels, memory_order_relaxed);
    account(old);
    unsigned seq = atomic_load_explicit(&e->seq, memory_order_relaxed);
    atomic_store_explicit(&e->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&e->task, task, memory_order_release);
    atomic_store_explicit(&e->labels, set, memory_order_release);
    atomic_store_explicit(&e->seq, seq + 2, memory_order_release);
    publish(e, set);
    return old;
}

/* SIGNAL-SAFE */
const cpprof_labelset *thread_current_labels(void)
{
    struct thread_entry *e = self;
    return e ? atomic_load_explicit(&e->labels, memory_order_relaxed) : NULL;
}

/* SIGNAL-SAFE: one compare more than thread_current_labels. */
const cpprof_labelset *thread_labels_if_tid(pid_t tid)
{
    struct thread_entry *e = self;
    return e && e->tid == tid
               ? atomic_load_explicit(&e->labels, memory_order_relaxed)
               : NULL;
}

cpprof_labelset *cpprof_thread_labels(void)
{
    return cpprof_labelset_ref(thread_current_labels());
}

int cpprof_set_thread_labels(const cpprof_labelset *set)
{
    struct thread_entry *e = self_entry();
    if (!e)
        return -ENOMEM;
    install(e, labelset_hold(set));
    return 0;
}

/* ---- Scopes: cpprof_do and cpprof_scope_begin/end ---------------------- */

/* What a scope must put back when it ends, however it ends: the layout of
 * the public cpprof_scope.  Where it began (thread entry and task) is
 * kept to tell a scope that ends in other work: its code was carried to
 * another thread (a coroutine resumed elsewhere, a fiber switch) with no
 * task to carry its labels along. */
struct scope {
    struct thread_entry *entry;
    const cpprof_labelset *previous; /* carries the thread's old reference */
    uint64_t task;
    uintptr_t mark;       /* scope_mark, or 0 for a scope begun in a task */
    uintptr_t outer_mark; /* the thread's scope_mark before this one */
    pid_t tid;
};
_Static_assert(sizeof(struct scope) <= sizeof(cpprof_scope),
               "cpprof_scope must hold struct scope");

int cpprof_scope_begin(cpprof_scope *scope, const cpprof_labelset *parent,
                       const cpprof_labelset *labels)
{
    if (!scope)
        return -EINVAL;
    if (registering)
        return -EDEADLK; /* from a handler that interrupted that */
    struct thread_entry *e = self_entry();
    if (!e)
        return -ENOMEM;
    const cpprof_labelset *previous = atomic_load(&e->labels);
    cpprof_labelset *derived;
    int rc = parent == CPPROF_BACKGROUND
                 ? (derived = labelset_hold(labels), 0)
                 : labelset_merge(&derived, parent ? parent : previous,
                                  labels);
    if (rc)
        return rc;
    /* The thread's reference to `previous` moves into the scope; the
     * thread takes merge's reference to `derived`. */
    account(previous);
    atomic_store_explicit(&e->labels, derived, memory_order_release);
    publish(e, derived);
    struct scope *s = (struct scope *)(void *)scope;
    uint64_t task = atomic_load_explicit(&e->task, memory_order_relaxed);
    *s = (struct scope){e, previous, task, 0, 0, e->tid};
    if (!task) { /* one begun in a task goes with the task */
        check_scope_here(e);
        s->mark = scope_mark(scope, (uintptr_t)__builtin_frame_address(0),
                             CALLER_SP());
        s->outer_mark = atomic_exchange_explicit(&e->scope_mark, s->mark,
                                                 memory_order_relaxed);
    }
    return 0;
}

/* Says once that a scope ended in other work than it began in. */
static void warn_scope_moved(const struct scope *s,
                             const struct thread_entry *now)
{
    static atomic_bool said;
    if (atomic_exchange(&said, true))
        return;
    warn_stderr("cpprof: a label scope (cpprof_do, cpprof::scope) begun on "
                "thread %d%s ended on thread %d%s: its code moved (a "
                "co_await, a fiber switch) with no task to carry its "
                "labels, so no thread's labels were changed at its end; "
                "run that work as a task (docs/tasks.md)\n",
                (int)s->tid, s->task ? " in a task" : "",
                now ? (int)now->tid : (int)gettid(),
                now && now->task ? " in a task" : "");
}

/* Puts back the previous set where the scope's labels are: on this
 * thread when the scope began on it, or in the task it began in (which
 * carried its labels here).  Elsewhere, the thread it began on may have
 * exited or gone on to other work, and this thread's labels are not the
 * scope's to change: nothing is, and the reference to `previous` goes. */
int cpprof_scope_end(cpprof_scope *scope)
{
    struct scope *s = (struct scope *)(void *)scope;
    if (!s || !s->entry)
        return -EINVAL; /* never begun, or ended already */
    struct thread_entry *began = s->entry, *now = self;
    s->entry = NULL; /* a second end finds nothing to put back */
    bool same_work = now && (s->task ? now->task == s->task
                                     : now == began && now->task == 0);
    if (same_work) {
        if (!s->task)
            atomic_store_explicit(&now->scope_mark, s->outer_mark,
                                  memory_order_relaxed);
        install(now, s->previous);
        return 0;
    }
    warn_scope_moved(s, now);
    labelset_drop(s->previous);
    return CPPROF_ESCOPEMOVED;
}

/* cpprof_do's cleanup (a forced unwind passes through it too); after the
 * explicit end, or a begin that failed, it finds nothing to end. */
static void do_end(cpprof_scope *scope) { cpprof_scope_end(scope); }

int cpprof_do(const cpprof_labelset *parent, const cpprof_labelset *labels,
              cpprof_do_fn fn, void *arg)
{
    if (!fn)
        return -EINVAL;
    cpprof_scope scope __attribute__((cleanup(do_end))) = {{0}};
    int rc = cpprof_scope_begin(&scope, parent, labels);
    if (rc)
        return rc;
    fn(arg, atomic_load_explicit(&self->labels, memory_order_relaxed));
    return cpprof_scope_end(&scope);
}

/* ---- Threads that inherit their creator's labels ----------------------- */

const char cpprof_background_parent[] = "CPPROF_BACKGROUND";

struct thread_start {
    void *(*start)(void *);
    void *arg;
    cpprof_labelset *labels; /* reference handed to the new thread */
    bool internal;           /* a thread cpprof creates for itself */
    void (*started)(void);   /* its role's first step, or NULL */
    atomic_uint labelled;    /* set once the new thread is labelled */
    atomic_int owners;       /* 2 while a creator awaits it too */
};

/* The role of the threads this thread creates inside cpprof's work. */
static __thread const struct own_role *creating_role;

const struct own_role *thread_own_role(const struct own_role *role)
{
    const struct own_role *previous = creating_role;
    creating_role = role;
    return previous;
}

/* pprof_internal=<role> with a reference of cpprof's, or NULL (out of
 * memory: the thread starts unlabelled and may label itself). */
static cpprof_labelset *internal_labels(const struct own_role *role)
{
    const char *kv[] = {PPROF_INTERNAL_KEY, role ? role->name : "cpprof"};
    cpprof_labelset *set;
    if (cpprof_labels(&set, 2, kv) != 0)
        return NULL;
    cpprof_labelset *held = labelset_hold(set);
    cpprof_labelset_release(set);
    return held;
}

/* From the allocator directly, untracked: cpprof's bookkeeping is not the
 * program's memory.  A thread created inside cpprof's own work is
 * cpprof's: it takes no labels from the program's thread that started
 * that work but its role's, built here so that it holds them before its
 * first instruction of its own (a census may look at it then), and all
 * it allocates is cpprof's. */
struct thread_start *thread_start_new(void *(*start)(void *), void *arg)
{
    struct thread_start *t = alloc_real_calloc(1, sizeof *t);
    bool internal = own_work;
    const struct own_role *role = internal ? creating_role : NULL;
    if (t)
        *t = (struct thread_start){
            start, arg,
            internal ? internal_labels(role)
                     : labelset_hold(thread_current_labels()),
            internal, role ? role->started : NULL, 0, 1};
    return t;
}

void thread_start_discard(struct thread_start *t)
{
    labelset_drop(t->labels);
    alloc_real_free(t);
}

/* The record goes with its last owner: the new thread, or a creator
 * that waited for it (and may have stopped waiting before it ran). */
static void release_start(struct thread_start *t)
{
    if (atomic_fetch_sub(&t->owners, 1) == 1)
        alloc_real_free(t);
}

void *thread_start_run(void *p)
{
    void (*started)(void) = atomic_load(&label_hooks.thread_started);
    if (started)
        started(); /* the sampler: its CPU timer now, while a profile runs */
    struct thread_start *t = p;
    void *(*start)(void *) = t->start;
    void *arg = t->arg;
    void (*role_started)(void) = t->started;
    if (t->internal)
        own_work_enter(); /* never left: the thread is cpprof's */
    void (*traced)(enum label_trace_what, const cpprof_labelset *, uint64_t) =
        atomic_load(&label_hooks.traced);
    if (traced)
        traced(LABEL_TRACE_START, t->labels, 0);
    if (t->labels) {
        struct thread_entry *e = self_entry();
        if (e)
            install(e, t->labels);
        else
            labelset_drop(t->labels);
    }
    if (role_started)
        role_started();
    atomic_store(&t->labelled, 1);
    futex_wake(&t->labelled, 1);
    release_start(t);
    return start(arg);
}

/* Blocks in the calling thread what thread.h says, keeping its mask. */
static void block_host_signals(sigset_t *old)
{
    static const int faults[] = {SIGSEGV, SIGBUS, SIGILL,
                                 SIGFPE,  SIGTRAP, SIGSYS};
    sigset_t block;
    sigfillset(&block);
    for (size_t i = 0; i < sizeof faults / sizeof *faults; i++)
        sigdelset(&block, faults[i]);
    sigdelset(&block, (int)cfg_int(CFG_CPU_SIGNAL));
    sigdelset(&block, (int)cfg_int(CFG_CENSUS_SIGNAL));
    sigdelset(&block, (int)cfg_int(CFG_ACCOUNTING_SIGNAL));
    pthread_sigmask(SIG_BLOCK, &block, old);
}

/* Makes *attr an ordinary (SCHED_OTHER) thread's when the calling thread
 * runs under a real-time policy (a new thread would inherit it); true
 * when it does not, or when that is done. */
static bool ordinary_if_realtime(pthread_attr_t *attr)
{
    int policy;
    struct sched_param param;
    if (pthread_getschedparam(pthread_self(), &policy, &param) != 0 ||
        (policy != SCHED_FIFO && policy != SCHED_RR))
        return true;
    param.sched_priority = 0;
    return pthread_attr_setinheritsched(attr, PTHREAD_EXPLICIT_SCHED) == 0 &&
           pthread_attr_setschedpolicy(attr, SCHED_OTHER) == 0 &&
           pthread_attr_setschedparam(attr, &param) == 0;
}

/* Attributes of a thread of cpprof's own (thread.h) in *attr; false when
 * they cannot be made. */
static bool own_attributes(pthread_attr_t *attr)
{
    if (pthread_attr_init(attr) != 0)
        return false;
    if (pthread_attr_setstacksize(attr, THREAD_OWN_STACK_BYTES) == 0 &&
        ordinary_if_realtime(attr))
        return true;
    pthread_attr_destroy(attr);
    return false;
}

const pthread_attr_t *thread_own_creation_begin(struct own_creation *c,
                                                const pthread_attr_t *attr,
                                                struct thread_start *t)
{
    block_host_signals(&c->creator_mask);
    c->has_own = !attr && own_attributes(&c->own);
    c->start = t;
    if (t)
        atomic_store(&t->owners, 2);
    return c->has_own ? &c->own : attr;
}

/* Bounds the wait for a new thread of cpprof's to take its labels: it
 * takes them first thing, but a loaded machine may not run it at once,
 * and a creator must never hang on it. */
#define OWN_LABELLED_WAIT_NS 1000000000LL

/* Until the new thread has labelled itself, at most the bound above. */
static void await_labelled(struct thread_start *t)
{
    int64_t deadline = clock_mono_ns() + OWN_LABELLED_WAIT_NS;
    for (int64_t now; !atomic_load(&t->labelled) &&
                      (now = clock_mono_ns()) < deadline;) {
        int64_t left = deadline - now;
        struct timespec wait = {left / 1000000000, left % 1000000000};
        futex_wait(&t->labelled, 0, &wait);
    }
}

void thread_own_creation_end(struct own_creation *c, bool created)
{
    if (created && c->start) {
        await_labelled(c->start);
        release_start(c->start);
    }
    if (c->has_own)
        pthread_attr_destroy(&c->own);
    pthread_sigmask(SIG_SETMASK, &c->creator_mask, NULL);
}

int thread_label_internal(const char *role)
{
    const char *kv[] = {PPROF_INTERNAL_KEY, role};
    cpprof_labelset *set;
    int rc = cpprof_labels(&set, 2, kv);
    if (rc != 0)
        return rc;
    rc = cpprof_set_thread_labels(set);
    cpprof_labelset_release(set);
    return rc;
}

int cpprof_thread_create(pthread_t *thread, const pthread_attr_t *attr,
                         void *(*start)(void *), void *arg)
{
    if (!thread || !start)
        return -EINVAL;
    struct thread_start *t = thread_start_new(start, arg);
    if (!t)
        return -ENOMEM;
    /* threadcreate.c's pthread_create sees thread_start_run and does not
     * wrap it again. */
    int rc = pthread_create(thread, attr, thread_start_run, t);
    if (rc) {
        thread_start_discard(t);
        return -rc;
    }
    return 0;
}

/* ---- Registry readers --------------------------------------------------- */

cpprof_labelset *registry_labels_of(pid_t tid)
{
    cpprof_labelset *set = NULL;
    labels_registry_lock();
    for (struct thread_entry *e = registry_head; e; e = e->next)
        if (e->tid == tid) {
            set = labelset_hold(atomic_load(&e->labels));
            break;
        }
    labels_registry_unlock();
    return set;
}

/* Entry e's labels and task as one step (the seqlock thread_exchange_labels
 * writes): the fields read with acquire, so that the second read of seq
 * cannot come before them.  Under the registry lock, which keeps the set
 * from being freed before the caller takes a reference. */
static const cpprof_labelset *labels_and_task(struct thread_entry *e,
                                              uint64_t *task)
{
    for (;;) {
        unsigned seq = atomic_load_explicit(&e->seq, memory_order_acquire);
        *task = atomic_load_explicit(&e->task, memory_order_acquire);
        const cpprof_labelset *labels =
            atomic_load_explicit(&e->labels, memory_order_acquire);
        if (!(seq & 1) &&
            atomic_load_explicit(&e->seq, memory_order_acquire) == seq)
            return labels;
        sched_yield(); /* its thread is between two stores */
    }
}

void registry_foreach(registry_visit_fn fn, void *arg)
{
    labels_registry_lock();
    for (struct thread_entry *e = registry_head; e; e = e->next) {
        uint64_t task;
        const cpprof_labelset *labels = labels_and_task(e, &task);
        fn(e->tid, e->name, labels, task, arg);
    }
    labels_registry_unlock();
}

size_t registry_count(void)
{
    labels_registry_lock();
    size_t n = registry_len;
    labels_registry_unlock();
    return n;
}

int64_t tid_cpu_ns(pid_t tid)
{
    struct timespec t;
    if (clock_gettime(thread_cpu_clock(tid), &t) != 0)
        return -1;
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void blocked_run_start(struct blocked_run *b, pid_t tid)
{
    if (!b->seen)
        *b = (struct blocked_run){.seen = true, .since = tid_cpu_ns(tid)};
}

bool blocked_run_held(struct blocked_run *b, pid_t tid, int64_t cpu_before,
                      int64_t run_ns)
{
    if (!b->seen) {
        blocked_run_start(b, tid);
        return false;
    }
    return cpu_before - b->since >= run_ns;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(thread_own_role);
