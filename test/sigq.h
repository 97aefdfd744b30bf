/*
 * sigq.h -- for tests that set a low RLIMIT_SIGPENDING: the queued-signal
 * count of the process's user, and a count of its own.
 *
 * The kernel counts queued signals (and POSIX timers) per user, and every
 * other process of the same user (other test suites running at the same
 * time) draws on the same count, which would make a tight limit flaky.  In
 * a user namespace of its own the process is counted on its own at that
 * level, against its own RLIMIT_SIGPENDING, and /proc/self/status's SigQ
 * shows that count.
 */
#ifndef CPPROF_TEST_SIGQ_H
#define CPPROF_TEST_SIGQ_H

#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>

/* The queued-signal count now (SigQ "used/limit"). */
static inline unsigned long sigq_used(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long used = 0, limit;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "SigQ: %lu/%lu", &used, &limit) == 2)
            break;
    if (f)
        fclose(f);
    return used;
}

/* Moves the (still single-threaded) process into a user namespace of its
 * own, so that other processes' signals do not count against its limit;
 * where that is not allowed, the shared count is used, and says so. */
static inline void sigq_count_apart(void)
{
    if (unshare(CLONE_NEWUSER) != 0)
        perror("unshare(CLONE_NEWUSER): the queued-signal count is shared "
               "with this user's other processes");
}

#endif
