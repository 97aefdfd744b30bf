/*
 * unwind.h -- the CPU sampler's signal-safe stack walker (unwind.c).
 *
 * The walker follows frame pointers and reads memory only inside regions a
 * table built from /proc/self/maps says are mapped; the table is rebuilt by
 * the sampler's collector thread and the census, never by a signal handler,
 * and kept for the life of the process (it is a few kilobytes), so that no
 * user of the walker can free it under another.  unwind.c's header comment
 * says why this design and what it costs.
 */
#ifndef CPPROF_UNWIND_H
#define CPPROF_UNWIND_H

#include <stddef.h>
#include <stdint.h>

/* Re-reads /proc/self/maps and publishes the new region table to the
 * walker.  Callers (the sampler's collector, the thread census) take
 * turns on a lock; never from a signal handler.  Returns 0 or a negative
 * errno. */
int unwind_refresh_maps(void);

/* SIGNAL-SAFE.  Walks the stack of the thread interrupted with `ucontext`
 * (the handler's third argument): pcs[0] is the interrupted PC, then return
 * addresses, at most `max` in all.  Sets *flags to STACK_* (stacktab.h) and
 * returns the depth, at least 1. */
size_t unwind_context(const void *ucontext, uintptr_t *pcs, size_t max,
                      unsigned *flags);

#endif
