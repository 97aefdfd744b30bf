/*
 * own.h -- which work on this thread is cpprof's own (own.c).
 *
 * Everything above the core asks this: the interposers (heap.c,
 * contention.c, threadcreate.c) pass straight through while cpprof code is
 * already on the thread's stack, and what cpprof's own work (symbolizing,
 * building a profile, serving HTTP, its threads) allocates, waits for or
 * creates is kept out of the program's profiles.  It lives in the core so
 * that the symbolizer, the builder and the server use it without reaching
 * into the collectors.
 */
#ifndef CPPROF_OWN_H
#define CPPROF_OWN_H

/* Non-zero while this thread runs cpprof code that an interposed function
 * may re-enter (a collector's own malloc, a lock taken by
 * pthread_getattr_np, fork's handlers): the interposer sees it and passes
 * straight through, and so does an application signal handler that
 * interrupts such code.  Every collector lock is held only with it set, so
 * a thread can never wait for a collector lock it already holds. */
extern __thread int own_busy __attribute__((tls_model("initial-exec")));
/* Sets this thread's own_busy to busy and returns what it was: for the
 * upper layers, which in libcpprof-upper.so reach the lower layers only
 * through functions (upper.h). */
int own_busy_exchange(int busy);

/* Depth of cpprof's own work on this thread (symbolizing, building a
 * profile, serving HTTP), from own_work_enter to _leave (they nest): what
 * it allocates is cpprof's, kept out of the heap and allocs profiles and
 * counted apart (heap_internal_stats).  A thread created inside such work
 * is cpprof's own and inside it for life (thread.c). */
extern __thread int own_work __attribute__((tls_model("initial-exec")));
void own_work_enter(void);
void own_work_leave(void);

#endif
