/*
 * unwind_frames.h -- bench/unwind's frameless call chains (unwind_frames.c).
 */
#ifndef CPPROF_BENCH_UNWIND_FRAMES_H
#define CPPROF_BENCH_UNWIND_FRAMES_H

/* Calls leaf(arg) at the bottom of `depth` nested frames of code without
 * frame pointers; returns its result plus depth - 1. */
int bench_chain(int depth, int (*leaf)(void *), void *arg);

#endif
