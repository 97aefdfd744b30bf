/*
 * wall.h -- the wall-clock profile (wall.c): every thread of the program,
 * on or off CPU, sampled by censuses at a fixed rate over a window, each
 * sample with the thread's labels and its state.  http_wall.c serves it.
 * Never called from a signal handler.
 */
#ifndef CPPROF_WALL_H
#define CPPROF_WALL_H

#include "cpprof.h"
#include "stacktab.h"

#include <stdint.h>

/* The label that carries a sample's state: "running", the system call a
 * thread was blocked in ("nanosleep", "futex", ...), "blocked" (outside a
 * call), a parked task's reason, or "unknown" (no stack). */
#define WALL_STATE_KEY "pprof_state"

typedef struct wall_profile wall_profile;

/* A sample whose stack is missing: the census's reason, as the goroutine
 * profile shows it. */
typedef struct {
    char reason[96];
    const cpprof_labelset *labels; /* holds a reference */
    int64_t values[2];
} wall_missing;

/* What the window cost and achieved, for the profile to state. */
typedef struct {
    int64_t start_ns, duration_ns; /* CLOCK_REALTIME start, length */
    int64_t ticks;
    int64_t cpu_ns;          /* the censuses' CPU, helpers included */
    long hz;                 /* the setting */
    double achieved_hz;      /* ticks per second of window */
    int slowed;              /* ticks spaced out past 1/hz for the budget */
    int64_t late;            /* ticks begun over half an interval late */
} wall_stats;

/* Starts the one wall profile: -EBUSY when one runs already. */
int wall_start(wall_profile **out);

/* Takes censuses every 1/wall_hz (spaced out so that they cost at most
 * wall_cpu_percent of one CPU) for `seconds`; every 100 ms it asks
 * `going_on(arg)`, and a nonzero answer ends the window early and is
 * returned.  0 at the end of the window; -errno when a census fails. */
int wall_run(wall_profile *w, long seconds, int (*going_on)(void *arg),
             void *arg);

/* The samples so far: values samples/count and wall/nanoseconds. */
const stacktab *wall_samples(const wall_profile *w);
const wall_missing *wall_missing_samples(const wall_profile *w, size_t *n);
void wall_get_stats(const wall_profile *w, wall_stats *out);

/* Ends the profile and frees it; the next may start. */
void wall_end(wall_profile *w);

#endif
