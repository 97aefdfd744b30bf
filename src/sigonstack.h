/*
 * sigonstack.h -- cpprof's timer signals never nest on a program's
 * alternate signal stack (sigonstack.c says why and how): the program's
 * SA_ONSTACK handlers block them.
 */
#ifndef CPPROF_SIGONSTACK_H
#define CPPROF_SIGONSTACK_H

#include <signal.h>

typedef int sigonstack_next_fn(int, const struct sigaction *,
                               struct sigaction *);

/* Before cpprof sends signo for the first time (its handler about to be
 * installed): signo joins the signals every SA_ONSTACK action blocks (the
 * settings' signals at load are there already), and the actions already
 * in place are given them, once. */
void sigonstack_claim(int signo);

/* The interposed sigaction's work: `next` (the definition it would have
 * reached) installs act with cpprof's signals added to its mask when it
 * is an SA_ONSTACK handler, and *old comes back without what cpprof
 * added, as the program set it. */
int sigonstack_sigaction(sigonstack_next_fn *next, int signo,
                         const struct sigaction *act, struct sigaction *old);

/* The interposed signal()'s: the action signo had is replaced by one
 * cpprof adds nothing to (signal() never sets SA_ONSTACK); `install`
 * does the call, under the same guard as sigonstack_sigaction. */
__sighandler_t sigonstack_signal(__sighandler_t (*install)(int,
                                                           __sighandler_t),
                                 int signo, __sighandler_t handler);

#endif
