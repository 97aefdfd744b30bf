/*
 * chains_control.c -- the control workload of test/chains.c: a chain built
 * with frame pointers in every function, its leaf included, which even
 * today's frame-pointer walker gets whole.  test/chains.sh judges it as it
 * judges the others, so a harness that could not see a complete chain
 * (labels, names, the pattern) fails there, not only where the walker is
 * wrong.
 */
#include <stdint.h>

uint64_t control_1(void);

/* The hot loop.  gcc sets up no frame for a leaf that needs no stack,
 * whatever the flags; the volatile local gives it one. */
__attribute__((noipa)) static uint64_t control_3(uint64_t n)
{
    volatile uint64_t h = n;
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ (h >> 31) ^ i) * 0x9e3779b97f4a7c15u;
    return h;
}

/* "+ 1" after each call: a tail call would take its frame off the stack. */
__attribute__((noipa)) static uint64_t control_2(uint64_t n)
{
    return control_3(n) + 1;
}

__attribute__((noipa)) uint64_t control_1(void)
{
    return control_2(4000000) + 1;
}
