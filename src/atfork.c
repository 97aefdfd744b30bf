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
 * (server_lock before the CPU profile's window_mu, which comes before
 * sampler_mu; census_mu before the registry; the intern lock before the
 * registry lock), and pthread_atfork runs the prepare handlers of separate
 * registrations in reverse order, which would invert it.  The child
 * handlers make only async-signal-safe calls (no allocator: its locks may
 * be held by a thread that is gone), so what a child drops is left
 * allocated.  Registered by the first use of any of these modules
 * (atfork_ensure), not by a constructor: a program linking the modules
 * statically would leave out an object nothing refers to.
 */
#include "atfork.h"
#include "accounting.h"
#include "census.h"
#include "http.h"
#include "sampler.h"
#include "thread.h"

#include <pthread.h>

static void prepare(void)
{
    http_atfork_prepare();
    cpu_profile_atfork_prepare();
    sampler_atfork_prepare();
    census_atfork_prepare();
    registry_atfork_prepare();
    accounting_atfork_prepare();
}

static void parent(void)
{
    accounting_atfork_parent();
    registry_atfork_parent();
    census_atfork_parent();
    sampler_atfork_parent();
    cpu_profile_atfork_parent();
    http_atfork_parent();
}

static void child(void)
{
    accounting_atfork_child();
    registry_atfork_child();
    census_atfork_child();
    sampler_atfork_child();
    cpu_profile_atfork_child();
    http_forget_after_fork();
}

static void atfork_register(void)
{
    pthread_atfork(prepare, parent, child);
}

void atfork_ensure(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, atfork_register);
}
