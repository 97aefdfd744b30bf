/*
 * loader.h -- the dynamic loader's counts of objects loaded and unloaded,
 * and whether the program links cpprof (loader.c).
 *
 * The unwinder and the symbolizer each keep a view of the process's
 * executable mappings, and re-reading /proc/self/maps to see whether it
 * changed costs a file read and a parse.  The loader also tells whether
 * the program linked cpprof or was given it (the allocation profiler's
 * start, heap.c).  The loader counts every object
 * it adds and removes (dl_iterate_phdr's dlpi_adds and dlpi_subs): equal
 * counts mean no dlopen or dlclose happened in between.  Never from a
 * signal handler (dl_iterate_phdr takes the loader's lock).
 */
#ifndef CPPROF_LOADER_H
#define CPPROF_LOADER_H

#include <stdbool.h>

typedef struct {
    unsigned long long adds, subs;
} loader_counts;

/* The counts now; {0, 0} where the C library does not keep them. */
loader_counts loader_counts_now(void);

/* Whether the program asked for cpprof: cpprof is part of its executable
 * (a static link), or an object loaded with it names libcpprof.so in its
 * DT_NEEDED.  False when cpprof came in only by LD_PRELOAD or
 * /etc/ld.so.preload (zero-code mode).  From a constructor: every object
 * loaded with the program is mapped by then, none dlopened yet. */
bool loader_program_needs_cpprof(void);

static inline bool loader_counts_equal(loader_counts a, loader_counts b)
{
    return a.adds == b.adds && a.subs == b.subs;
}

#endif
