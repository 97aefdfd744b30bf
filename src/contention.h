/*
 * contention.h -- the block and mutex profilers (contention.c): pthread
 * mutexes, rwlocks and condition variables interposed, contended waits
 * timed and sampled as Go's SetBlockProfileRate and
 * SetMutexProfileFraction sample them.
 */
#ifndef CPPROF_CONTENTION_H
#define CPPROF_CONTENTION_H

#include "sampleset.h"

/* Values of block and mutex snapshots: the contention count in
 * thousandths (Go counts fractions of events when it scales short waits)
 * and the delay in nanoseconds, both already scaled as Go scales them. */
enum { CONT_COUNT_MILLI, CONT_DELAY_NS, CONT_NVALUES };

/* Cumulative since start: where threads waited (block) and the stacks of
 * the threads whose unlock ended contended waits, with those waits
 * (mutex). */
int block_snapshot(sampleset **out);
int mutex_snapshot(sampleset **out);

#endif
