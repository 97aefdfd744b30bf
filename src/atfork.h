/*
 * atfork.h -- fork() without exec leaves the child a clean profiler
 * (atfork.c): one pthread_atfork registration for every module's locks.
 */
#ifndef CPPROF_ATFORK_H
#define CPPROF_ATFORK_H

/* Registers the fork handlers, once; every module with a lock or a thread
 * that must not cross fork calls it before first taking them. */
void atfork_ensure(void);

#endif
