/*
 * siginterpose.c -- sigaction() and signal() interposed, so that cpprof
 * lets go of a signal before the program's own action for it is in place.
 *
 * cpprof's timers send their signals until they are deleted, and a signal
 * sent to a program's handler that does not expect it can crash it (the
 * accounting tick reached a SIGRTMIN+6 handler that read si_value as a
 * pointer).  Checking the disposition now and then leaves a window; the
 * only moment without one is the program's own call.  So these two are
 * defined here and exported (src/libcpprof.map), as heap.c does for
 * malloc: whether the library is linked or preloaded, the program's call
 * comes here first; cpprof deletes what would signal there
 * (accounting_yield_signal), then the next definition does the work.  Only a
 * call that sets an action is looked at; cpprof's own installs of its own
 * handlers pass straight through.  The CPU sampler's timers belong to its
 * collector thread, so the call only wakes it (sampler_signal_claimed),
 * which sees the program's handler and deletes them within a wake-up
 * rather than at its next tick.  Calls that bypass the symbol (a raw
 * rt_sigaction system call, sigset(), sysv_signal()) are not seen: the CPU
 * sampler therefore also checks its signal at every collector tick.
 * The call itself goes through sigonstack.c, which adds cpprof's signals
 * to the mask of an SA_ONSTACK handler (they must not nest on the
 * program's altstack) and takes them out of the action returned.
 *
 * Both are async-signal-safe as before as long as the signal is not
 * cpprof's; for the tick signal, the first call takes a mutex.
 */
#define _GNU_SOURCE
#include "accounting.h"
#include "forkwake.h"
#include "interpose.h"
#include "sampler.h"
#include "sigonstack.h"

#include <errno.h>
#include <signal.h>

#define EXPORT __attribute__((visibility("default")))

/* The definitions these calls would have reached without cpprof: the next
 * ones in lookup order.  That is glibc's, or a sanitizer runtime's
 * interceptor when cpprof is linked into the executable (which comes
 * before the runtime), and glibc's when libcpprof.so comes after the
 * runtime, whose interceptor then calls here as its "real" function:
 * naming either one outright would loop in one of the two layouts (it
 * did: every test linked with libcpprof.so under ASan spun in sigaction).
 * Looked up by the constructor, before the program can be in a handler
 * (where dlsym is not safe to call); a call before that (another
 * library's constructor) looks up itself. */
/* Not under TSan, whose runtime calls sigaction while it starts, before
 * instrumented code may run (as collect.c leaves pthread_getattr_np to
 * it): there the program's action simply replaces cpprof's. */
#ifndef __SANITIZE_THREAD__
typedef sigonstack_next_fn sigaction_fn;
typedef __sighandler_t signal_fn(int, __sighandler_t);
static void *next_sigaction, *next_signal;

__attribute__((constructor)) static void find_next_definitions(void)
{
    interpose_next(&next_sigaction, "sigaction");
    interpose_next(&next_signal, "signal");
}

EXPORT int sigaction(int signo, const struct sigaction *act,
                     struct sigaction *old)
{
    if (act) {
        accounting_yield_signal(signo);
        sampler_signal_claimed(signo);
        forkwake_signal_claimed(signo, (act->sa_flags & SA_SIGINFO)
                                           ? (void *)act->sa_sigaction
                                           : (void *)act->sa_handler);
    }
    sigaction_fn *next =
        (sigaction_fn *)interpose_next(&next_sigaction, "sigaction");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    return sigonstack_sigaction(next, signo, act, old);
}

EXPORT __sighandler_t signal(int signo, __sighandler_t handler)
{
    accounting_yield_signal(signo);
    sampler_signal_claimed(signo);
    forkwake_signal_claimed(signo, (void *)handler);
    signal_fn *next = (signal_fn *)interpose_next(&next_signal, "signal");
    if (!next) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    return sigonstack_signal(next, signo, handler);
}
#endif
