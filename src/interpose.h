/* interpose.h -- the next definition of a function cpprof interposes.
 *
 * cpprof wraps a few libc functions (pthread_create, pthread_setname_np,
 * pthread_getattr_np, the contention waits) by defining them itself and
 * calling the definition that comes next in lookup order, found with
 * dlsym(RTLD_NEXT) on first use.  The lookup may race with another thread's
 * first call: both find the same pointer, so the cache needs only an
 * atomic store, not a lock.  A lookup that finds nothing is not cached and
 * returns NULL; the caller answers as that function would when it cannot
 * work (ENOSYS, EAGAIN).  dlsym may allocate: a caller whose allocation
 * path is interposed too marks itself busy around the call.  sigaction
 * and signal, which a program may call from a signal handler, where dlsym
 * is not safe, are also looked up from a constructor, so that such a call
 * finds the cache filled; so are the exec functions, which a program calls
 * in a fork child, where dlsym must not run either, and dlclose.
 */
#ifndef CPPROF_INTERPOSE_H
#define CPPROF_INTERPOSE_H

#include <dlfcn.h>

static inline void *interpose_next(void **cache, const char *name)
{
    void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        if (f)
            __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* glibc's own sigaction, under the alias it exports beside the name
 * siginterpose.c takes over: for cpprof's calls, which need none of the
 * interposer's work (they set actions for cpprof's signals) and some of
 * which run in a signal handler (crash.c), where the interposer's first
 * lookup would be dlsym. */
struct sigaction;
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

#endif
