/*
 * chains_plugin.c -- workload (e) of test/chains.c: a plugin that the
 * program dlopens, calls and dlcloses in a loop while it is profiled, so
 * that samples land in code whose mapping comes and goes under the
 * sampler.  Built without frame pointers, like test/chains.c; the three
 * functions are the plugin's part of the known chain
 * (... chain_e1 -> plugin_e1 -> plugin_e2 -> plugin_e3).
 */
#include <stdint.h>

/* The hot loop, a frameless leaf: the plugin's CPU time is spent here. */
__attribute__((noipa)) static uint64_t plugin_e3(uint64_t n)
{
    uint64_t h = 14695981039346656037u;
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ i) * 1099511628211u;
    return h;
}

/* "+ 1" after each call: a tail call would take its frame off the stack. */
__attribute__((noipa)) static uint64_t plugin_e2(uint64_t n)
{
    return plugin_e3(n) + 1;
}

/* The entry point test/chains.c looks up with dlsym. */
__attribute__((noipa)) uint64_t plugin_e1(uint64_t n)
{
    return plugin_e2(n) + 1;
}
