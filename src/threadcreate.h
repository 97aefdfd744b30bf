/*
 * threadcreate.h -- the thread-creation profiler (threadcreate.c):
 * pthread_create interposed, the creating stack of every thread counted.
 */
#ifndef CPPROF_THREADCREATE_H
#define CPPROF_THREADCREATE_H

#include "sampleset.h"

/* One value per stack: threads created there since start. */
int threadcreate_snapshot(sampleset **out);

#endif
