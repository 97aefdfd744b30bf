/*
 * reuse_plugin.c -- the two plugins of test/dlclose_reuse.c, built from
 * this one source with PLUGIN=a and PLUGIN=b: the same code, size and
 * layout, so that the loader maps B where A was once A is unloaded; only
 * the functions' names differ (reuse_hot_a and reuse_hot_b, reuse_alloc_a
 * and reuse_alloc_b, reuse_spawn_a and reuse_spawn_b: one length).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define JOIN2(x, y) x##y
#define JOIN(x, y) JOIN2(x, y)
#define HOT JOIN(reuse_hot_, PLUGIN)
#define ALLOC JOIN(reuse_alloc_, PLUGIN)
#define SPAWN JOIN(reuse_spawn_, PLUGIN)

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

/* The plugin's allocations are made here. */
__attribute__((noipa)) void *ALLOC(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory"); /* not a tail call */
    return p;
}

/* The allocating entry point the test looks up with dlsym. */
__attribute__((noipa)) void *reuse_alloc(size_t n)
{
    void *p = ALLOC(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

static void *idle(void *arg)
{
    return arg;
}

/* The plugin's threads are created here; 0 or an errno. */
__attribute__((noipa)) int SPAWN(void)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, idle, NULL);
    return rc ? rc : pthread_join(t, NULL);
}

/* The thread-creating entry point the test looks up with dlsym. */
__attribute__((noipa)) int reuse_spawn(void)
{
    int rc = SPAWN();
    __asm__ volatile("" : : "r"(rc) : "memory");
    return rc;
}
