/*
 * collect.h -- what the event collectors share (collect.c): the allocation
 * profiler (heap.c), the contention profiler (contention.c) and the
 * thread-creation profiler (threadcreate.c) all run inside functions the
 * application calls (malloc, pthread_mutex_lock, pthread_create), so they
 * need the same two things (with own.h's recursion guard): a stack
 * walk that starts from an ordinary call rather than a signal context, and
 * cheap per-thread randomness for sampling.
 */
#ifndef CPPROF_COLLECT_H
#define CPPROF_COLLECT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Walks the calling thread's stack (unwind.h: CFI, frame pointers where
 * there is none) and stores return
 * addresses, leaf first, dropping the first `skip` (skip 0: pcs[0] is the
 * return address into collect_stack's caller; each further skip drops one
 * more caller), at most `max` in all; *flags gets STACK_TRUNCATED when the walk was cut.
 * A caller that keeps the stack for the process's life passes `gen`,
 * which gets the generation to keep it under (unwind_from), and from then
 * on the mappings that go away are kept for such stacks
 * (unwind_keep_gone_for_stacks); NULL for a stack used once.
 * The thread's stack bounds are learnt once (pthread_getattr_np) so that
 * the walk reads its own stack directly and nothing else without a
 * fault-proof read.  Call with own_busy set. */
size_t collect_stack(unsigned skip, uintptr_t *pcs, size_t max,
                     unsigned *flags, uint64_t *gen);

/* Takes cpprof's interposers out of a stack another thread's walk took
 * (the CPU sampler's, leaf first, depth frames): each run of frames in
 * libcpprof's code whose outermost frame is an interposer (an exported
 * function that a later library also defines) goes, so that the
 * program's frame calls the libc function it called directly; other runs
 * stay (a public cpprof_* function, which shows as Go's pprof.Do does,
 * and cpprof's own threads, labelled pprof_internal);
 * a run at the leaf (the signal landed in the interposer itself) becomes
 * that function's entry in the library the interposer forwards to.
 * Returns the new depth.  Nothing is taken when cpprof is linked into the
 * program itself (its code and the program's are one object).  Not
 * signal-safe: dladdr and dlsym, from a collector thread. */
size_t collect_drop_wrappers(uintptr_t *pcs, size_t depth);

/* Placed after a call that must not become a tail call: the walk's frame
 * counts assume every interposer keeps its frame while it calls on. */
#define COLLECT_NO_TAIL_CALL() __asm__ volatile("")

/* The collectors' locks: spinlocks that yield, taken only with
 * own_busy set (so never by a thread that already holds one through a
 * re-entered interposer) and held for a few table operations. */
void collect_spin_lock(atomic_flag *lock);
void collect_spin_unlock(atomic_flag *lock);

/* A uniform 64-bit random number from a per-thread xorshift generator. */
uint64_t collect_rand(void);

#endif
