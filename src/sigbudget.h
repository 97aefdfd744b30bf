/*
 * sigbudget.h -- how many more queued signals cpprof may take (sigbudget.c).
 *
 * Every POSIX timer holds one unit of the user's RLIMIT_SIGPENDING for its
 * whole life, and every rt_tgsigqueueinfo one while it is pending, so a
 * profiler that gives each of 1,000 threads a timer can leave the program's
 * own sigqueue() failing with EAGAIN.  cpprof keeps its use under half of
 * what is free: the sampler's and the accounting's timers and the census's
 * signals ask here first.
 */
#ifndef CPPROF_SIGBUDGET_H
#define CPPROF_SIGBUDGET_H

#include <stdbool.h>

/* Takes one unit for a timer or a signal about to be queued, if cpprof's
 * units would stay within half of what the user's RLIMIT_SIGPENDING
 * leaves free without them (/proc/self/status's SigQ).  False when they
 * would not, or SigQ cannot be read. */
bool sigbudget_take(void);

/* SigQ as one read found it, for a batch: the sampler gives 1,000 threads
 * their timers in one pass, and a read of /proc/self/status per timer was
 * half of that pass's CPU.  Zeroed before the batch; the first take reads
 * it, later ones count their own units into it. */
typedef struct {
    bool read;
    unsigned long long used, limit;
} sigbudget_view;

/* sigbudget_take, decided from *view (read by its first take) rather than
 * from a read of its own.  Units given back meanwhile are not seen: the
 * batch only errs on the side of taking fewer. */
bool sigbudget_take_viewed(sigbudget_view *view);

/* Gives back a unit once its timer is deleted or its signal delivered (or
 * abandoned). */
void sigbudget_give(void);

#endif
