/*
 * atfork.h -- fork() without exec leaves the child a clean profiler
 * (atfork.c): one pthread_atfork registration runs every module's fork
 * handlers in the order the modules' locks nest.
 */
#ifndef CPPROF_ATFORK_H
#define CPPROF_ATFORK_H

/* The modules with fork handlers, in the order their locks nest: a lock
 * of an earlier level may be held while one of a later level is taken,
 * never the other way round. */
enum atfork_level {
    ATFORK_HTTP,        /* http.c: server_lock */
    ATFORK_CPU_PROFILE, /* cpu_profile.c: the window lock */
    ATFORK_SAMPLER,     /* sampler.c: sampler_mu */
    ATFORK_CENSUS,      /* census.c: census_mu */
    ATFORK_REGISTRY,    /* thread.c: the intern lock, then the registry */
    ATFORK_ACCOUNTING,  /* accounting.c: the tick table */
    ATFORK_LEVELS
};

/* A module's handlers: prepare takes its lock; parent releases it; child
 * drops what stayed in the parent and releases it, making only
 * async-signal-safe calls. */
typedef struct {
    void (*prepare)(void);
    void (*parent)(void);
    void (*child)(void);
} atfork_handlers;

/* Registers `h` (static storage) for `level`, and the one pthread_atfork
 * registration on first use.  A module calls it before it first takes its
 * lock; calling it again is harmless. */
void atfork_add(enum atfork_level level, const atfork_handlers *h);

#endif
