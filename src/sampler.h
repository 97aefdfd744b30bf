/*
 * sampler.h -- the CPU sampler (sampler.c): per-thread CPU-time timers, the
 * profiling signal handler and the collector thread that aggregates its
 * samples.  cpu_profile.c turns what it collects into a profile.
 */
#ifndef CPPROF_SAMPLER_H
#define CPPROF_SAMPLER_H

#include "stacktab.h"
#include <stddef.h>
#include <stdint.h>

/* The sampling period in nanoseconds at `hz` samples per CPU-second; the
 * timers use exactly this interval, so it is also the profile's period. */
int64_t sampler_period_ns(long hz);

/* Starts sampling every thread of the process at `hz` (1..1000) with signal
 * `signo`.  One sampler at a time.  Errors: CPPROF_EBUSY, CPPROF_ESIGTAKEN
 * (signo has a handler that is not ours), -EINVAL, -errno. */
int sampler_start(long hz, int signo);

/* Fixes the number of buffer slots of later sessions (rounded up to a
 * power of two);
 * 0, the default, sizes the buffer for a quarter second of every CPU at
 * full rate.  Tests set a tiny buffer to see it overflow. */
void sampler_set_ring_slots(size_t slots);

/* Stops sampling, restores the signal's previous disposition and hands back
 * the samples aggregated by (stack, label set), each entry with the values
 * {samples, CPU nanoseconds}, and in *lost the number of samples a full
 * buffer dropped.  Error: CPPROF_ENOTRUNNING. */
int sampler_stop(stacktab **samples, int64_t *lost);

#endif
