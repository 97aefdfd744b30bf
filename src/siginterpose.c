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
 * (accounting_yield_signal), then glibc's function does the work.  Only a
 * call that sets an action is looked at; cpprof's own installs of its own
 * handlers pass straight through.  Calls that bypass the symbol (a raw
 * rt_sigaction system call, sigset(), sysv_signal()) are not seen: the CPU
 * sampler therefore also checks its signal at every collector tick.
 *
 * Both are async-signal-safe as before as long as the signal is not
 * cpprof's; for the tick signal, the first call takes a mutex.
 */
#define _GNU_SOURCE
#include "accounting.h"

#include <signal.h>

#define EXPORT __attribute__((visibility("default")))

/* glibc's own, which the sanitizers' runtimes intercept under these
 * names (as heap.c passes malloc to them): going around them would let a
 * program's handler replace theirs. */
#ifdef CPPROF_SANITIZER_INTERCEPTS
#define __sigaction __interceptor_sigaction
#define bsd_signal __interceptor_signal
#endif
extern int __sigaction(int, const struct sigaction *, struct sigaction *);
extern __sighandler_t bsd_signal(int, __sighandler_t);

EXPORT int sigaction(int signo, const struct sigaction *act,
                     struct sigaction *old)
{
    if (act)
        accounting_yield_signal(signo);
    return __sigaction(signo, act, old);
}

EXPORT __sighandler_t signal(int signo, __sighandler_t handler)
{
    accounting_yield_signal(signo);
    return bsd_signal(signo, handler);
}
