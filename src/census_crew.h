/*
 * census_crew.h -- helper threads that share a large census's per-thread
 * reading with the thread taking it (census_crew.c).  Never called from a
 * signal handler.
 */
#ifndef CPPROF_CENSUS_CREW_H
#define CPPROF_CENSUS_CREW_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef void census_crew_fn(void *arg, size_t i, bool on_caller);

/* A run of items, each handed to fn once: on the calling thread
 * (on_caller true, except in census_crew_finish(run, false)) and, when
 * the run is large enough to repay waking them, on the crew's helpers,
 * started on first need (one fewer than the CPUs the process may run on,
 * at most three).  The caller serialises runs (the census lock): one at a
 * time.  Without helpers (one CPU, or none could be started) every item
 * is the caller's.  Items may be listed while the helpers take them:
 * census_crew_begin with the number expected, census_crew_offer as each
 * batch is listed, census_crew_close with the number in all; then
 * census_crew_finish takes the caller's share and waits for the
 * helpers. */
struct census_crew_run {
    census_crew_fn *fn;
    void *arg;
    atomic_size_t next;   /* the next item to claim */
    atomic_size_t listed; /* items below this may be taken */
    atomic_bool closed;   /* listed is final */
    bool shared;          /* the helpers were woken for it */
};

/* Starts a run whose items begin at `first`, about `expected` of them in
 * all (whether to wake the helpers). */
void census_crew_begin(struct census_crew_run *run, size_t first,
                       size_t expected, census_crew_fn *fn, void *arg);
/* Items below `listed` may be taken now. */
void census_crew_offer(struct census_crew_run *run, size_t listed);
/* No more items: `n` in all. */
void census_crew_close(struct census_crew_run *run, size_t n);
/* After close: takes the caller's share (on_caller as given) and returns
 * when every item has been handled. */
void census_crew_finish(struct census_crew_run *run, bool on_caller);

/* Items [first, n), all listed: begin, close, and finish on the caller. */
void census_crew_run(size_t first, size_t n, census_crew_fn *fn, void *arg);

/* Whether `tid` is one of the crew's helpers: a census reads them after
 * its run, once they are back asleep (while it runs they move). */
bool census_crew_is_helper(pid_t tid);

/* In a forked child (async-signal-safe): the parent's helpers are not
 * here.  Called with no run under way. */
void census_crew_after_fork(void);

/* The CPU time the crew's helpers have used, and how many there are. */
int64_t census_crew_cpu_ns(unsigned *helpers);

#endif
