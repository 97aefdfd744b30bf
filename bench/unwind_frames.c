/*
 * unwind_frames.c -- call chains of a chosen depth through code built
 * without frame pointers (this file is compiled with -fomit-frame-pointer,
 * Makefile.am), for bench/unwind: only CFI can walk them.
 */
#include "unwind_frames.h"

/* Each level keeps its frame: the call is not a tail call (the addition
 * after it) and not inlined. */
__attribute__((noinline)) int bench_chain(int depth, int (*leaf)(void *),
                                          void *arg)
{
    if (depth <= 1)
        return leaf(arg);
    int r = bench_chain(depth - 1, leaf, arg);
    __asm__ volatile("" : "+r"(r));
    return r + 1;
}
