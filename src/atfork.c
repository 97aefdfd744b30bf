/*
 * atfork.c -- fork() without exec: the child starts with a clean, usable
 * profiler.
 *
 * After fork only the forking thread exists in the child.  Every lock
 * another thread held at that moment would stay held forever, the CPU
 * sampler's timers and collector thread stayed in the parent, and the
 * HTTP server's listening socket would keep the parent from listening on
 * its port again.  So each module's lock is held across fork (prepare),
 * released in the parent, and in the child released after the module has
 * dropped what only the parent has.
 *
 * One pthread_atfork registration for all of them, because the order
 * matters: prepare takes the locks in the order the code nests them
 * (atfork.h's levels), and pthread_atfork runs the prepare handlers of
 * separate registrations in reverse order of registration, that is in the
 * order the constructors happened to run: heap.c's lock came before the
 * unwinder's writer mutex, which the sampler's collector holds while it
 * allocates, and fork deadlocked with it.  The handlers run as
 * cpprof's own work (own.h): the collectors' locks are taken with
 * own_busy set, as everywhere else, and cpprof's waits for its own
 * locks are not the program's contention.  One fork's handlers at a time
 * (fork_mu), so that `prepared` and the saved guard are that fork's.  Modules
 * add their handlers on first use rather than this file calling them, so
 * that a program linking some modules statically does not drag in the
 * others (the HTTP server and its libraries with them).  A fork that races
 * with a module's first use runs the child and parent handlers of exactly
 * the modules whose prepare it ran.
 */
#include "atfork.h"
#include "own.h"
#include "upper_calls.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

static _Atomic(const atfork_handlers *) table[ATFORK_LEVELS];
static pthread_mutex_t fork_mu ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;
/* Under fork_mu, and written only when they change (atfork.h): the same
 * at nearly every fork. */
static const atfork_handlers *prepared[ATFORK_LEVELS] ATFORK_HELD;
/* The forking thread's own_busy and own_work, which finish restores. */
static int busy_before ATFORK_HELD, work_before ATFORK_HELD;
bool atfork_locks_wiped ATFORK_HELD;

/* The page src/atfork.ld gives the ATFORK_LOCK section in libcpprof.so,
 * or NULL in a link without the script (the tests', a static one). */
extern char cpprof_fork_locks_page[] __attribute__((weak,
                                                    visibility("hidden")));

static void set_if_changed(int *at, int value)
{
    if (*at != value)
        *at = value;
}

static void prepare(void)
{
    int work = own_work;
    own_work_enter();
    pthread_mutex_lock(&fork_mu);
    set_if_changed(&work_before, work);
    set_if_changed(&busy_before, own_busy);
    own_busy = 1;
    for (int i = 0; i < ATFORK_LEVELS; i++) {
        const atfork_handlers *h = atomic_load(&table[i]);
        if (prepared[i] != h)
            prepared[i] = h;
        if (h)
            h->prepare();
    }
}

/* After the parent's or the child's handlers: the forking thread holds
 * fork_mu in both.  own_work is restored rather than left through
 * own_work_leave, whose code would be one more page for the child. */
ATFORK_CHILD static void finish(bool in_child)
{
    int work = work_before;
    own_busy = busy_before;
    if (in_child)
        atfork_mutex_release(&fork_mu);
    else
        pthread_mutex_unlock(&fork_mu);
    own_work = work;
}

static void parent(void)
{
    for (int i = ATFORK_LEVELS - 1; i >= 0; i--)
        if (prepared[i])
            prepared[i]->parent();
    finish(false);
}

/* Nonzero in the parent once the locks' page is to be wiped: a child that
 * still reads it nonzero has its page as it was (an emulator's madvise
 * may answer 0 and do nothing: qemu-user 7.2's does), so it releases its
 * locks itself.  The read costs the child a fault, but no copy. */
static int wipe_canary ATFORK_LOCK;

ATFORK_CHILD static void child(void)
{
    if (atfork_locks_wiped && wipe_canary != 0)
        atfork_locks_wiped = false;
    for (int i = ATFORK_LEVELS - 1; i >= 0; i--)
        if (prepared[i])
            prepared[i]->child();
    finish(true);
}

/* The ATFORK_LOCK page, if the link set it apart (a whole page of its
 * own, anonymous: the script puts it past the file's data), zeroed in
 * every child.  Not under ThreadSanitizer, whose record of each mutex
 * would not be wiped with it. */
static void wipe_locks_in_children(void)
{
#ifndef __SANITIZE_THREAD__
    if (cpprof_fork_locks_page && sysconf(_SC_PAGESIZE) == 4096 &&
        madvise(cpprof_fork_locks_page, 4096, MADV_WIPEONFORK) == 0) {
        wipe_canary = 1;
        atfork_locks_wiped = true;
    }
#endif
}

static void register_once(void)
{
    wipe_locks_in_children();
    pthread_atfork(prepare, parent, child);
}

void atfork_add(enum atfork_level level, const atfork_handlers *h)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_once);
    atomic_store(&table[level], h);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(atfork_add);
