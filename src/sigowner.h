/*
 * sigowner.h -- whose action a signal has: nobody's (SIG_DFL or SIG_IGN),
 * cpprof's own handler, or a handler of the program's.
 *
 * cpprof takes a signal only while nobody has it: a program's handler
 * means the program uses that signal, and cpprof declines what needs it
 * (naming the setting that picks another).  The sampler, the census and
 * the accounting ticks each ask this before installing their handler, and
 * the index asks it to say, before anyone tries, which profile would be
 * declined.  Header-only: one sigaction(2) query.
 */
#ifndef CPPROF_SIGOWNER_H
#define CPPROF_SIGOWNER_H

#include "cpprof.h"

#include <errno.h>
#include <signal.h>

typedef enum { OWNER_NOBODY, OWNER_CPPROF, OWNER_PROGRAM } sig_owner;

/* Whose action signo has now, cpprof's handler being `ours`; -errno when
 * sigaction cannot tell (an invalid signal). */
static inline int signal_owner(int signo,
                               void (*ours)(int, siginfo_t *, void *))
{
    struct sigaction cur;
    if (sigaction(signo, NULL, &cur) != 0)
        return -errno;
    if (cur.sa_flags & SA_SIGINFO)
        return cur.sa_sigaction == ours ? OWNER_CPPROF : OWNER_PROGRAM;
    return cur.sa_handler == SIG_DFL || cur.sa_handler == SIG_IGN
               ? OWNER_NOBODY
               : OWNER_PROGRAM;
}

/* Before installing `ours` on signo: 0 when nobody has it (install),
 * 1 when ours is there already, CPPROF_ESIGTAKEN when the program has a
 * handler of its own (decline), -errno. */
static inline int signal_claim_check(int signo,
                                     void (*ours)(int, siginfo_t *, void *))
{
    int owner = signal_owner(signo, ours);
    if (owner < 0)
        return owner;
    return owner == OWNER_CPPROF    ? 1
           : owner == OWNER_PROGRAM ? CPPROF_ESIGTAKEN
                                    : 0;
}

#endif
