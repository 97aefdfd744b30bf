/*
 * census_maps.c -- the unwinder's table of mappings, refreshed before the
 * census signals a thread whose stack block it may not have, and no more
 * often.  Apart from census.c because what it keeps, the threads the last
 * refresh saw, outlives one census.
 */
#define _GNU_SOURCE
#include "census_int.h"
#include "atfork.h"
#include "unwind.h"
#include "util.h"

#include <stdlib.h>

/* A signalled thread's handler reads its stack directly only inside the
 * stack block the unwinder's table gives it (unwind_walk.c, "Reads that cannot
 * fault"), so a thread is signalled only after a refresh that saw its
 * block.  Reading /proc/self/maps for that was a third of a census of the
 * demo, and a census meets the same running threads each time: the
 * threads listed before the census's last refresh (tid and start time, so
 * that a reused tid is not taken for one of them) are kept, and a census
 * refreshes only before signalling another thread, or when that refresh
 * is TABLE_MAX_AGE_NS old.  A census that signals nobody has tables built
 * for objects the loader added (unwind_refresh_if_loaded), all a walk from
 * outside needs. */
#define TABLE_MAX_AGE_NS 10000000000LL

struct known_thread {
    pid_t tid;
    unsigned long long start_ticks;
};

/* Under census_mu. */
static struct {
    struct known_thread *v; /* sorted by tid */
    size_t n;
    int64_t refreshed_ns; /* the last census refresh, 0: none yet */
} mapped;

/* Whether the table has t's stack block: t was listed before the last
 * census refresh. */
static bool table_knows(const census_thread *t)
{
    if (mapped.n == 0 ||
        clock_mono_ns() - mapped.refreshed_ns > TABLE_MAX_AGE_NS)
        return false;
    const struct known_thread *k =
        bsearch(&t->tid, mapped.v, mapped.n, sizeof *mapped.v, census_by_tid);
    return k && k->start_ticks == t->start_ticks;
}

/* Refreshes the table before t is signalled, unless it knows t's block or
 * this census refreshed it already (*refreshed). */
void census_refresh_for(const census_thread *t, bool *refreshed)
{
    if (*refreshed || table_knows(t))
        return;
    unwind_refresh_maps();
    mapped.refreshed_ns = clock_mono_ns();
    *refreshed = true;
}

/* After a census that refreshed: every thread it listed was listed before
 * that refresh (c is sorted by tid).  Out of memory, none is kept. */
void census_remember_mapped(const census *c)
{
    free(mapped.v);
    mapped.n = 0;
    mapped.v = malloc((c->n ? c->n : 1) * sizeof *mapped.v);
    if (!mapped.v)
        return;
    for (size_t i = 0; i < c->n; i++)
        if (c->threads[i].start_ticks) /* else unknown: not read */
            mapped.v[mapped.n++] = (struct known_thread){
                c->threads[i].tid, c->threads[i].start_ticks};
}

/* The child's threads are not the parent's. */
ATFORK_CHILD void census_maps_after_fork(void)
{
    mapped.n = 0;
}
