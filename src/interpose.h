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

/* own_cond_wait: pthread_cond_wait for cpprof's own waits, glibc's
 * current version found with dlvsym on first use.  cpprof defines
 * pthread_cond_wait itself (the block profiler), unversioned; a call to
 * that name from cpprof's code that reaches glibc instead (cpprof
 * dlopened, not preloaded or linked: its definition is then outside the
 * global scope, searched first) binds to glibc's oldest version, a
 * compatibility wrapper that waits on a condition variable of its own, so
 * the pthread_cond_broadcast cpprof calls (bound to the current version)
 * never wakes it (a sanitizer's interceptor of it binds the same way).  By version,
 * the lookup finds the sanitizer's interceptor first when there is one,
 * else glibc's.  (A .symver reference does not survive the upper object's
 * version script.) */
#if defined(__x86_64__)
#define GLIBC_COND_VERSION "GLIBC_2.3.2"
#elif defined(__aarch64__)
#define GLIBC_COND_VERSION "GLIBC_2.17"
#else
#error "interpose.h: glibc's condition-variable version for this architecture"
#endif

#include <pthread.h>

static inline int own_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
#if defined(__SANITIZE_THREAD__)
    /* TSan must see the wait release the mutex, and its interceptor has
     * no version for dlvsym to find: it is the plain name. */
    return pthread_cond_wait(c, m);
#else
    typedef int cond_wait_fn(pthread_cond_t *, pthread_mutex_t *);
    static void *cache;
    cond_wait_fn *f = (cond_wait_fn *)__atomic_load_n(&cache, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (cond_wait_fn *)dlvsym(RTLD_DEFAULT, "pthread_cond_wait",
                                   GLIBC_COND_VERSION);
        if (!f)
            return pthread_cond_wait(c, m);
        __atomic_store_n(&cache, (void *)f, __ATOMIC_RELEASE);
    }
    return f(c, m);
#endif
}

/* glibc's own sigaction, under the alias it exports beside the name
 * siginterpose.c takes over: for cpprof's calls, which need none of the
 * interposer's work (they set actions for cpprof's signals) and some of
 * which run in a signal handler (crash.c), where the interposer's first
 * lookup would be dlsym. */
struct sigaction;
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

#endif
