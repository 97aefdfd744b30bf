/*
 * http_threads.c -- the server's threads are cpprof's.
 *
 * The pool's threads and the watch thread are the profiler's, not the
 * program's: they are created with the collectors' guard set, so
 * threadcreate does not count them (nor does heap.c sample what starting
 * them allocates), and they carry the label pprof_internal=http, so that
 * the census and CPU profiles name them and `-tagignore pprof_internal=http`
 * leaves them out.  Each takes the label as it starts, before any of
 * libmicrohttpd's code runs on it (thread.c's own_role), and is counted
 * there; the index page reports their CPU time.  Where the start could not
 * be wrapped (under TSan with the library after the runtime, or out of
 * memory) a thread takes both on its first request, or as its function
 * begins.
 */
#include "http_server.h"

#include <pthread.h>
#include <time.h>

#include "cpprof.h"
#include "own.h"
#include "thread.h"
#include "util.h"

#define INTERNAL_KEY PPROF_INTERNAL_KEY
#define INTERNAL_VALUE "http"

static cpprof_labelset *internal_set;
static pthread_once_t internal_once = PTHREAD_ONCE_INIT;

static void build_internal_labels(void)
{
    const char *kv[] = {INTERNAL_KEY, INTERNAL_VALUE};
    if (cpprof_labels(&internal_set, 2, kv) != 0)
        internal_set = NULL;
}

/* The set every server thread carries, built once and kept (NULL when it
 * could not be built: the threads then go unlabelled). */
static const cpprof_labelset *internal_labels(void)
{
    pthread_once(&internal_once, build_internal_labels);
    return internal_set;
}

/* The server threads that have run (for their CPU time), as many as
 * there are (the pool, as many window threads, the watch thread, the
 * forks' waiter: 130 at the largest http_threads, past a fixed 65 slots
 * the index undercounted the server's CPU), and the CPU time of those of
 * servers since stopped. */
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t *server_threads;
static size_t n_server_threads, cap_server_threads;
static bool threads_closed; /* the server is stopping: count no more */
static double retired_cpu_seconds;

static double thread_cpu_seconds(pthread_t t)
{
    clockid_t clock;
    struct timespec ts;
    if (pthread_getcpuclockid(t, &clock) != 0 ||
        clock_gettime(clock, &ts) != 0)
        return 0;
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static __thread bool counted; /* this thread is in server_threads */

/* Counts the calling server thread, once (out of memory, it is tried
 * again at the thread's next request). */
static void count_thread(void)
{
    if (counted)
        return;
    pthread_mutex_lock(&threads_lock);
    if (threads_closed) {
        counted = true;
    } else if (ARRAY_RESERVE(server_threads, n_server_threads,
                             cap_server_threads, 1) == 0) {
        server_threads[n_server_threads++] = pthread_self();
        counted = true;
    }
    pthread_mutex_unlock(&threads_lock);
}

/* The server's threads: labelled and counted from their start. */
static const struct own_role server_role = {INTERNAL_VALUE, count_thread};

/* Gives the calling server thread its label and counts it, once, when its
 * start did not. */
void http_label_thread(void)
{
    if (counted)
        return;
    cpprof_set_thread_labels(internal_labels());
    count_thread();
}

/* Called as the server stops, while its threads still run: their time so
 * far is kept, and they are forgotten before they end. */
void http_threads_retire(void)
{
    pthread_mutex_lock(&threads_lock);
    for (size_t i = 0; i < n_server_threads; i++)
        retired_cpu_seconds += thread_cpu_seconds(server_threads[i]);
    n_server_threads = 0;
    threads_closed = true;
    pthread_mutex_unlock(&threads_lock);
}

void http_threads_open(void)
{
    pthread_mutex_lock(&threads_lock);
    threads_closed = false;
    pthread_mutex_unlock(&threads_lock);
}

int http_own_cpu(double *seconds, size_t *threads)
{
    pthread_mutex_lock(&threads_lock);
    *seconds = retired_cpu_seconds;
    for (size_t i = 0; i < n_server_threads; i++)
        *seconds += thread_cpu_seconds(server_threads[i]);
    *threads = n_server_threads;
    pthread_mutex_unlock(&threads_lock);
    return 0;
}

/* Runs start(arg) with the collectors' guard set, so that threads it
 * creates are not counted as the program's, and with the server's role,
 * so that they are labelled and counted from their start; the caller's
 * guard and role are restored.  (The caller's labels stay: switching them
 * would move what the caller allocates meanwhile to another set's
 * accounting.) */
int http_as_internal(int (*start)(void *), void *arg)
{
    int busy = own_busy_exchange(1);
    const struct own_role *role = thread_own_role(&server_role);
    int rc = start(arg);
    thread_own_role(role);
    own_busy_exchange(busy);
    return rc;
}


/* In a forked child the server's threads are gone (http.c), and the lock
 * is made anew: a thread that stayed in the parent may have held it. */
void http_threads_forget_after_fork(void)
{
    n_server_threads = 0;
    threads_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
}
