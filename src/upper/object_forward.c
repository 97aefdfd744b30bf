/*
 * object_forward.c -- in libcpprof-upper.so only: the allocator and the
 * functions libcpprof.so interposes, forwarded to the definitions the
 * program's own symbol lookup finds.
 *
 * upper.c loads this object with RTLD_DEEPBIND, so that it and the
 * libraries it brings (libmicrohttpd, GnuTLS and its own, jansson,
 * protobuf-c, zlib, libdw) look a name up in their own tree first: a
 * function the program exports under one of their names (PostgreSQL's
 * json_object, a -rdynamic program's crc32) no longer takes their calls.
 * Some names must still reach what the program chose for the whole
 * process: its allocator (a block those libraries allocate may be freed
 * by libcpprof.so, or the other way round) and cpprof's own interposers
 * (pthread_create marks the server's threads as cpprof's, the lock and
 * signal ones watch the waits and the profiling signal).  So this object
 * defines each of those names, first in its tree, as a call to the
 * definition in the program's scope: what the tree bound to before
 * RTLD_DEEPBIND, cpprof's interposers where the program loaded
 * libcpprof.so, the program's allocator (jemalloc, tcmalloc...) where it
 * comes first.  The names are libcpprof.map's besides the API, exported
 * by object.map (test/host_symbols.sh checks that the lists agree).
 *
 * Looked up by the constructor, after the libraries' own constructors,
 * which call malloc and find the table empty: the first such call looks
 * everything up (under the loader's lock, which dlopen holds).  Nothing
 * is looked up later, in a fork child or a signal handler.
 */
#define _GNU_SOURCE
#include "warn.h"

#include <dlfcn.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <stdlib.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* Each forwarded function but free (void): name, type, parameters,
 * arguments. */
#define FORWARDED(X)                                                       \
    X(malloc, void *, (size_t n), (n))                                     \
    X(calloc, void *, (size_t n, size_t size), (n, size))                  \
    X(realloc, void *, (void *p, size_t n), (p, n))                        \
    X(reallocarray, void *, (void *p, size_t n, size_t size), (p, n, size)) \
    X(posix_memalign, int, (void **out, size_t align, size_t n),           \
      (out, align, n))                                                     \
    X(aligned_alloc, void *, (size_t align, size_t n), (align, n))         \
    X(memalign, void *, (size_t align, size_t n), (align, n))              \
    X(valloc, void *, (size_t n), (n))                                     \
    X(pvalloc, void *, (size_t n), (n))                                    \
    X(malloc_usable_size, size_t, (void *p), (p))                          \
    X(pthread_mutex_lock, int, (pthread_mutex_t *m), (m))                  \
    X(pthread_mutex_unlock, int, (pthread_mutex_t *m), (m))                \
    X(pthread_rwlock_rdlock, int, (pthread_rwlock_t *l), (l))              \
    X(pthread_rwlock_wrlock, int, (pthread_rwlock_t *l), (l))              \
    X(pthread_cond_wait, int, (pthread_cond_t *c, pthread_mutex_t *m),     \
      (c, m))                                                              \
    X(pthread_cond_timedwait, int,                                         \
      (pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t),   \
      (c, m, t))                                                           \
    X(pthread_create, int,                                                 \
      (pthread_t *t, const pthread_attr_t *a, void *(*start)(void *),      \
       void *arg),                                                         \
      (t, a, start, arg))                                                  \
    X(pthread_getattr_np, int, (pthread_t t, pthread_attr_t *a), (t, a))   \
    X(pthread_setname_np, int, (pthread_t t, const char *name), (t, name)) \
    X(sigaction, int,                                                      \
      (int signo, const struct sigaction *act, struct sigaction *old),     \
      (signo, act, old))                                                   \
    X(signal, __sighandler_t, (int signo, __sighandler_t h), (signo, h))   \
    X(dlclose, int, (void *h), (h))                                        \
    X(execve, int,                                                         \
      (const char *path, char *const argv[], char *const envp[]),          \
      (path, argv, envp))                                                  \
    X(execv, int, (const char *path, char *const argv[]), (path, argv))    \
    X(execvp, int, (const char *file, char *const argv[]), (file, argv))   \
    X(execvpe, int,                                                        \
      (const char *file, char *const argv[], char *const envp[]),          \
      (file, argv, envp))                                                  \
    X(epoll_wait, int, (int fd, struct epoll_event *ev, int max, int ms),  \
      (fd, ev, max, ms))                                                   \
    X(epoll_pwait, int,                                                    \
      (int fd, struct epoll_event *ev, int max, int ms, const sigset_t *m), \
      (fd, ev, max, ms, m))                                                \
    X(poll, int, (struct pollfd *fds, nfds_t n, int ms), (fds, n, ms))     \
    X(ppoll, int,                                                          \
      (struct pollfd *fds, nfds_t n, const struct timespec *t,             \
       const sigset_t *m),                                                 \
      (fds, n, t, m))                                                      \
    X(select, int,                                                         \
      (int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *t),         \
      (n, r, w, x, t))                                                     \
    X(pselect, int,                                                        \
      (int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *t,   \
       const sigset_t *m),                                                 \
      (n, r, w, x, t, m))                                                  \
    X(sigsuspend, int, (const sigset_t *m), (m))                           \
    X(nanosleep, int, (const struct timespec *t, struct timespec *rem),    \
      (t, rem))                                                            \
    X(clock_nanosleep, int,                                                \
      (clockid_t c, int flags, const struct timespec *t,                   \
       struct timespec *rem),                                              \
      (c, flags, t, rem))                                                  \
    X(usleep, int, (useconds_t us), (us))                                  \
    X(sleep, unsigned, (unsigned s), (s))                                  \
    X(pause, int, (void), ())

#define AS_INDEX(name, ...) NEXT_##name,
enum { FORWARDED(AS_INDEX) NEXT_free, NEXT_COUNT };
#define AS_NAME(name, ...) #name,
static const char *const names[NEXT_COUNT] = {FORWARDED(AS_NAME) "free"};
static void *next[NEXT_COUNT];

/* The program's definition of `name`: the first in its global scope
 * (dlopen(NULL)'s handle; RTLD_DEFAULT would search this object's own
 * tree first and find the functions below), else the next in this
 * object's tree, the two parts of the lookup it had before. */
static void *program_definition(void *program, const char *name)
{
    void *f = program ? dlsym(program, name) : NULL;
    return f ? f : dlsym(RTLD_NEXT, name);
}

static void look_up_all(void)
{
    void *program = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    for (int i = 0; i < NEXT_COUNT; i++) {
        void *f = program_definition(program, names[i]);
        if (f == NULL) {
            /* The C library, in this object's tree, defines every one. */
            warn_stderr("cpprof: found no %s for libcpprof-upper.so's "
                        "libraries to call\n", names[i]);
            abort();
        }
        __atomic_store_n(&next[i], f, __ATOMIC_RELEASE);
    }
}

__attribute__((constructor)) static void look_up_at_load(void)
{
    look_up_all();
}

static void *next_of(int i)
{
    void *f = __atomic_load_n(&next[i], __ATOMIC_ACQUIRE);
    if (f == NULL) {
        look_up_all();
        f = next[i];
    }
    return f;
}

#define FORWARD(name, type, params, args)                                  \
    EXPORT type name params                                                \
    {                                                                      \
        return ((type(*) params)next_of(NEXT_##name)) args;                \
    }
FORWARDED(FORWARD)

EXPORT void free(void *p)
{
    ((void (*)(void *))next_of(NEXT_free))(p);
}
