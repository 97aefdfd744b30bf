/*
 * own.c -- the per-thread marks of cpprof's own work (own.h).  Two
 * initial-exec TLS counters: reading them from an interposed malloc or a
 * signal handler is one load, and never calls into the dynamic linker.
 */
#include "own.h"
#include "upper_calls.h"

__thread int own_busy __attribute__((tls_model("initial-exec")));
__thread int own_work __attribute__((tls_model("initial-exec")));

void own_work_enter(void)
{
    own_work++;
}

void own_work_leave(void)
{
    own_work--;
}

int own_busy_exchange(int busy)
{
    int was = own_busy;
    own_busy = busy;
    return was;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(own_busy_exchange);
UPPER_CALLS(own_work_enter);
UPPER_CALLS(own_work_leave);
