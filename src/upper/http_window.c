/*
 * http_window.c -- the threads that run requests waiting out a window.
 *
 * A request that waits out a window (a CPU profile, any ?seconds=) would
 * hold its pool thread and every connection that thread serves, so its
 * connection is suspended and the handler runs on one of http_threads
 * window threads, which resume it when done; a window past those is a
 * 503 naming the setting.  Suspension rather than a larger pool: a pool
 * thread blocked for 30 s stalls the keep-alive connections it holds (a
 * Prometheus scrape among them), whatever the pool's size.
 *
 * A window thread is made when a window opens and finds none free, not
 * at start, and lives until the server stops: a server nobody asks for a
 * window has none.  Every thread a serving process has makes each of its
 * forks dearer (bench/fork): fork copies its stack's and its malloc
 * arena's mappings, the child writes the page of its descriptor (glibc's
 * reclaim of the stacks) and of its arena's lock, and the parent, now
 * threaded, copies the arena's page again with a TLB shootdown of every
 * CPU the process ran on.  Four idle window threads were 8 faults of the
 * child's 58 and 4 of the parent's 17, and 16 of its 163 mappings.
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include "config.h"
#include "http_server.h"
#include "interpose.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* Requests waiting out a window now, and how many may: one per window
 * thread.  The queue hands them to those threads. */
static atomic_int windows_open;
static int windows_max;
static pthread_t window_threads[CFG_HTTP_THREADS_MAX];
static int n_window_threads; /* under window_lock */
static pthread_mutex_t window_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t window_ready = PTHREAD_COND_INITIALIZER;
static http_req *window_queue; /* under window_lock */
static bool windows_closing;   /* under window_lock */

int http_windows_open(void)
{
    return atomic_load(&windows_open);
}

/* Takes one of the windows_max slots; false when all are taken. */
static bool open_window(void)
{
    int n = atomic_load(&windows_open);
    while (n < windows_max)
        if (atomic_compare_exchange_weak(&windows_open, &n, n + 1))
            return true;
    return false;
}

/* A window would hold a pool thread, and with it every connection that
 * thread serves, for its length: the connection is suspended instead and
 * the handler runs on a window thread, which resumes it when done. */
static void hand_to_window_thread(http_req *r, const http_route *route)
{
    r->route = route;
    MHD_suspend_connection(r->conn);
    pthread_mutex_lock(&window_lock);
    r->next_waiting = window_queue;
    window_queue = r;
    pthread_cond_signal(&window_ready);
    pthread_mutex_unlock(&window_lock);
}

static void *window_thread(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "cpprof-window");
    http_label_thread();
    pthread_mutex_lock(&window_lock);
    for (;;) {
        while (window_queue == NULL && !windows_closing)
            own_cond_wait(&window_ready, &window_lock);
        if (window_queue == NULL)
            break;
        http_req *r = window_queue;
        window_queue = r->next_waiting;
        pthread_mutex_unlock(&window_lock);
        r->handler_rc = http_run_handler(r, r->route);
        atomic_fetch_sub(&windows_open, 1);
        MHD_resume_connection(r->conn);
        pthread_mutex_lock(&window_lock);
    }
    pthread_mutex_unlock(&window_lock);
    return NULL;
}

static int create_window_thread(void *arg)
{
    (void)arg;
    return -pthread_create(&window_threads[n_window_threads], NULL,
                           window_thread, NULL);
}

/* Under window_lock, for a window just opened: one more thread when the
 * open windows, this one among them, outnumber the threads (each runs
 * one at a time and none ends before the server).  0, or why none could
 * be made. */
static int enough_window_threads(void)
{
    if (n_window_threads >= atomic_load(&windows_open))
        return 0;
    int rc = http_as_internal(create_window_thread, NULL);
    if (rc == 0)
        n_window_threads++;
    return rc;
}

/* Ends the window threads once their requests are done (a stopping
 * server makes every waiting handler return: http_request_end); no
 * window opens meanwhile. */
void http_windows_end(void)
{
    pthread_mutex_lock(&window_lock);
    windows_closing = true;
    pthread_cond_broadcast(&window_ready);
    int n = n_window_threads;
    pthread_mutex_unlock(&window_lock);
    for (int i = 0; i < n; i++)
        pthread_join(window_threads[i], NULL);
    pthread_mutex_lock(&window_lock);
    n_window_threads = 0;
    pthread_mutex_unlock(&window_lock);
}

int http_windows_start(int max)
{
    windows_max = max;
    pthread_mutex_lock(&window_lock);
    windows_closing = false;
    pthread_mutex_unlock(&window_lock);
    return 0;
}

int http_window_hand(http_req *r, const http_route *route)
{
    if (!open_window())
        return http_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "%d requests already wait out a profile "
                          "window, as many as the server has threads "
                          "for (setting http_threads=%d)",
                          windows_max, windows_max);
    pthread_mutex_lock(&window_lock);
    int rc = windows_closing ? -ESHUTDOWN : enough_window_threads();
    pthread_mutex_unlock(&window_lock);
    if (rc != 0) {
        atomic_fetch_sub(&windows_open, 1);
        return http_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "no thread to wait out the window on: %s",
                          strerror(-rc));
    }
    hand_to_window_thread(r, route);
    return 0;
}

/* In a forked child the window threads are gone; their lock and condition
 * variable are made anew (see http.c's http_forget_after_fork). */
void http_windows_forget_after_fork(void)
{
    n_window_threads = 0;
    window_queue = NULL;
    atomic_store(&windows_open, 0);
    window_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    window_ready = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
}
