/*
 * dlinterpose.c -- dlclose() interposed, so that the unwinder's tables
 * stop listing an unloaded object before the program can load another one
 * at its address.
 *
 * Between refreshes (the sampler's collector looks at the loader's counts
 * every 100 ms) the walker's table still lists a dlclosed object's
 * mapping.  A plugin dlopened at the same address meanwhile would be
 * walked with the old object's rows, and its samples would carry the
 * generation of the mappings in which that address was the old object's
 * (unwind.h, "Generations"): the builder would then name them after the
 * old object.  Refreshing right after the loader's dlclose returns closes
 * that window: from then on the address is in no table, so a sample that
 * meets the new object is put off until its table is built
 * (sampler_ring.c, "Code with no table yet") and carries the new
 * generation.  Left open: another thread's dlopen that takes the address
 * between the loader's unmapping and this refresh, and runs code there
 * (its constructors) before the refresh ends: a sample there is named
 * after the old object.
 *
 * Before the loader's dlclose, when a CPU sample met code without a table
 * since the last refresh, the tables are brought up to date (that code is
 * listed, so that its mapping is kept once gone), and the CPU sampler's
 * walks put off for it are done now by this thread
 * (sampler_before_unload): after the unload they could not be, the code
 * being gone.
 *
 * Defined here and exported (src/libcpprof.map) as siginterpose.c does
 * for sigaction: whether the library is linked or preloaded, the
 * program's call comes here first, then goes to the next definition
 * (glibc's, or a sanitizer's interceptor).  All this only while gone
 * mappings are kept (unwind_keeping_gone): a CPU profile runs or is being
 * built (a generation is pinned), or the allocation, contention or
 * thread-creation profiler has kept a stack (their stacks live as long as
 * the process; with the heap profile on by default, that is most
 * processes once one allocation was sampled); otherwise a dlclose costs
 * three atomic loads more.  A refresh costs a read of
 * /proc/self/maps (about 0.5 ms in a process linked with libcpprof's
 * dependencies), and only when the loader's counts moved: after, when the
 * loader really unmapped something (a dlclose of an object still in use
 * does not).
 */
#define _GNU_SOURCE
#include "own.h"
#include "interpose.h"
#include "sampler.h"
#include "unwind.h"

#define EXPORT __attribute__((visibility("default")))

typedef int dlclose_fn(void *);
static void *next_dlclose;

/* Looked up by the constructor; a call before it (another library's
 * constructor) looks up itself. */
__attribute__((constructor)) static void find_next_dlclose(void)
{
    interpose_next(&next_dlclose, "dlclose");
}

EXPORT int dlclose(void *handle)
{
    dlclose_fn *next = (dlclose_fn *)interpose_next(&next_dlclose, "dlclose");
    if (!next)
        return -1; /* no loader to forward to: nothing was unloaded */
    own_work_enter(); /* the tables' memory is cpprof's */
    sampler_before_unload();
    own_work_leave();
    int rc = next(handle);
    if (unwind_keeping_gone()) {
        own_work_enter();
        unwind_refresh_if_loaded();
        own_work_leave();
    }
    return rc;
}
