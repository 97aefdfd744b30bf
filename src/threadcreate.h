/*
 * threadcreate.h -- the thread-creation profiler (threadcreate.c):
 * pthread_create interposed, the creating stack of every thread counted.
 */
#ifndef CPPROF_THREADCREATE_H
#define CPPROF_THREADCREATE_H

#include "sampleset.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* One value per stack: threads created there since start. */
int threadcreate_snapshot(sampleset **out);

/* Who created thread `tid` (Go's "created by"): the creating thread's tid
 * and the return address of its pthread_create call.  False when that is
 * not known: a thread created before cpprof was loaded or other than
 * through pthread_create, one asked about before its pthread_create call
 * returned, or one whose record a thread created THREADCREATE_CREATORS
 * tids later took.  SIGNAL-SAFE (the crash report
 * names its thread's creator). */
bool threadcreate_creator(pid_t tid, pid_t *creator, uintptr_t *pc);

#endif
