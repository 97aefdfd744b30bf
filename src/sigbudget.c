/*
 * sigbudget.c -- how many more queued signals cpprof may take.
 *
 * The kernel counts queued signals per user (RLIMIT_SIGPENDING, `ulimit
 * -i`), and a POSIX timer holds its unit from timer_create to timer_delete
 * (measured on Linux 6.18: with `ulimit -i 100`, 50 timers leave room for
 * 50 sigqueue() calls, 100 for none).  /proc/self/status's SigQ line gives
 * "used/limit" for the process's user, so cpprof can stay under half of
 * what is free and leave the rest to the program, however many threads it
 * has.  Read on each use rather than tracked: other processes of the same
 * user draw on the same count; a batch of timers made in one pass reads it
 * once (sigbudget_take_viewed).
 */
#include "sigbudget.h"
#include "procfile.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>

static atomic_long held; /* cpprof's units now */

/* The user's queued-signal count and limit ("used/limit"), read on the
 * thread that starts a profile: through procfile_status_value's few lines
 * rather than the whole file (an 8 KiB buffer here overran a 16 KiB
 * thread's stack). */
static bool read_sigq(unsigned long long *used, unsigned long long *limit)
{
    char v[48], *end;
    if (procfile_status_value(AT_FDCWD, "/proc/self/status", "SigQ", v,
                              sizeof v) <= 0)
        return false;
    *used = strtoull(v, &end, 10);
    if (end == v || *end != '/')
        return false;
    const char *l = end + 1;
    *limit = strtoull(l, &end, 10);
    return end != l;
}

bool sigbudget_take_viewed(sigbudget_view *view)
{
    if (!view->read && !read_sigq(&view->used, &view->limit))
        return false;
    view->read = true;
    long mine = atomic_load(&held);
    if (view->used > view->limit)
        return false;
    unsigned long long free_without_us =
        view->limit - view->used + (unsigned long long)mine;
    if ((unsigned long long)mine + 1 > free_without_us / 2)
        return false;
    atomic_fetch_add(&held, 1);
    view->used++;
    return true;
}

bool sigbudget_take(void)
{
    sigbudget_view view = {0};
    return sigbudget_take_viewed(&view);
}

void sigbudget_give(void)
{
    atomic_fetch_sub(&held, 1);
}
