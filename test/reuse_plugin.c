/*
 * reuse_plugin.c -- the two plugins of test/dlclose_reuse.c, built from
 * this one source with PLUGIN=a and PLUGIN=b: the same code, size and
 * layout, so that the loader maps B where A was once A is unloaded; only
 * the hot function's name differs (reuse_hot_a, reuse_hot_b, one length).
 */
#include <stdint.h>

#define JOIN2(x, y) x##y
#define JOIN(x, y) JOIN2(x, y)
#define HOT JOIN(reuse_hot_, PLUGIN)

/* The plugin's CPU time is spent here. */
__attribute__((noipa)) uint64_t HOT(uint64_t n)
{
    uint64_t h = 14695981039346656037u;
    for (uint64_t i = 0; i < n; i++)
        h = (h ^ i) * 1099511628211u;
    return h;
}

/* The entry point the test looks up with dlsym; "+ 1": not a tail call. */
__attribute__((noipa)) uint64_t reuse_entry(uint64_t n)
{
    return HOT(n) + 1;
}
