/*
 * sampler.h -- the CPU sampler (sampler.c): per-thread CPU-time timers, the
 * profiling signal handler and the collector thread that aggregates its
 * samples.  cpu_profile.c turns what it collects into a profile.
 */
#ifndef CPPROF_SAMPLER_H
#define CPPROF_SAMPLER_H

#include "stacktab.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The sampling period in nanoseconds at `hz` samples per CPU-second; the
 * timers use exactly this interval, so it is also the profile's period. */
int64_t sampler_period_ns(long hz);

/* Starts sampling every thread of the process at `hz` (1..1000) with signal
 * `signo`.  One sampler at a time.  Errors: CPPROF_EBUSY, CPPROF_ESIGTAKEN
 * (signo has a handler that is not ours), CPPROF_ENOTIMER (timer_create
 * refused, e.g. by seccomp), -EINVAL, -errno. */
int sampler_start(long hz, int signo);

/* Whether a CPU profile is running (one atomic load): threadcreate.c
 * wraps new threads' functions meanwhile, so that they announce
 * themselves. */
bool sampler_running(void);

/* Called by a new thread first thing (thread_start_run): while a profile
 * runs, the collector learns its tid and gives it its timer at once,
 * instead of at its next listing of /proc/self/task.  No lock, no
 * allocation; a no-op when no profile runs. */
void sampler_thread_started(void);

/* SIGNAL-SAFE.  The program is setting signal `signo`'s action
 * (siginterpose.c): when it is the running profile's signal, the collector
 * is woken to check the handler now.  A no-op otherwise. */
void sampler_signal_claimed(int signo);

/* An object is about to be unloaded (dlinterpose.c, before the loader's
 * dlclose): when a sample met code without a table since the last
 * refresh, the unwinder's tables are refreshed (that code is listed, and
 * its mapping kept once gone), and the walks put off for it are done now,
 * while it is mapped, by the calling thread.  A no-op when no profile
 * runs; otherwise a refresh at most. */
void sampler_before_unload(void);

/* CPU time the collector threads of every profile so far have used,
 * including the running one's (the index page). */
int64_t sampler_collector_cpu_ns(void);

/* Fixes the number of buffer slots of later sessions (rounded up to a
 * power of two);
 * 0, the default, sizes the buffer for a quarter second of every CPU at
 * full rate.  Tests set a tiny buffer to see it overflow. */
void sampler_set_ring_slots(size_t slots);

/* Why a thread's CPU time went unsampled: it had the signal blocked; a
 * timer would have taken the program's share of RLIMIT_SIGPENDING
 * (sigbudget.h); the program installed its own handler for the signal
 * during the window; timer_create failed otherwise; the signal came while
 * the thread ran on a stack with too little left for the walk (a program's
 * handler on a small sigaltstack), and the handler refused to walk: its
 * CPU time is the refused samples' weight. */
typedef enum {
    SAMPLER_BLOCKED,
    SAMPLER_OVER_BUDGET,
    SAMPLER_SIGNAL_TAKEN,
    SAMPLER_REFUSED,
    SAMPLER_NO_STACK_ROOM,
    SAMPLER_NREASONS
} sampler_reason;

typedef struct {
    long threads;   /* distinct threads affected during the window */
    int64_t cpu_ns; /* their CPU time while unsampled (read every 100 ms:
                       a thread's last 100 ms before it exits are missed) */
} sampler_unsampled;

typedef struct {
    stacktab *samples; /* {samples, CPU nanoseconds} per (stack, set) */
    int64_t lost;      /* samples a full buffer dropped */
    sampler_unsampled unsampled[SAMPLER_NREASONS];
} sampler_result;

/* Stops sampling, restores the signal's previous disposition (unless the
 * program installed its own handler meanwhile) and hands back what was
 * collected; the caller frees out->samples.  Error: CPPROF_ENOTRUNNING. */
int sampler_stop(sampler_result *out);

/* Whether the program has a handler of its own on signo, so that a CPU
 * profile on it would be declined (CPPROF_ESIGTAKEN): for the index. */
bool sampler_signal_is_programs(int signo);

/* The pseudo-frame that names a reason in a profile, e.g.
 * "cpprof.unsampled.signalBlocked". */
const char *sampler_reason_frame(sampler_reason why);

/* Why, in words for the index page: "they block the profiling signal". */
const char *sampler_reason_text(sampler_reason why);

/* cpu_profile.c: what the last finished CPU profile could not sample, per
 * reason (all zero before the first), for the index page. */
void cpu_profile_last_unsampled(sampler_unsampled out[SAMPLER_NREASONS]);

/* Stops the running CPU profile (cpu_profile.c) and drops it unbuilt: for
 * a profile whose client went away, which symbolizing and encoding would
 * cost the host CPU for nobody.  0 or CPPROF_ENOTRUNNING. */
int cpu_profile_discard(void);

#endif
