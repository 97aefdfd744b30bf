/*
 * http.c -- the embedded HTTP server's lifecycle: its settings, start and
 * stop, and fork.
 *
 * libmicrohttpd serves on a fixed pool of http_threads threads (poll), so
 * that a request creates no thread; the watch thread accepts connections
 * and hands them to it (http_watch.c, http_conns.c); requests that wait
 * out a window run on window threads (http_window.c).  All these threads
 * are cpprof's: not counted by threadcreate, labelled
 * pprof_internal=http (http_threads.c).  http_server.h lists the server's
 * files; handlers see only http.h.
 *
 * We bind the listening socket ourselves rather than let libmicrohttpd do it,
 * so that a failure comes back as a real errno (-EADDRINUSE, -EACCES) and a
 * test binding port 0 can learn the port it got (http_port()).
 */
#include "http_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "atfork.h"
#include "config.h"
#include "cpprof.h"
#include "forkwake.h"
#include "heap.h"
#include "own.h"
#include "procfile.h"

/* server_lock serialises start and stop (held for the whole of a stop, so
 * a start waits until the old server is gone).  http_stopping is read
 * without it by handlers polling http_request_end(). */
static pthread_mutex_t server_lock = PTHREAD_MUTEX_INITIALIZER;
static struct MHD_Daemon *server;
http_server http_srv;
atomic_bool http_stopping;
static int listen_fd = -1; /* accepted on by the watch thread */

/* The port a listening socket is bound to. */
static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -errno;
    if (ss.ss_family == AF_UNIX) /* a worker's control connection */
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* The token a server on ss will require, in *token (malloc'd): the
 * "http_token" setting ("" for none).  Profiles and the command line can
 * hold secrets, so anything but loopback needs "http_allow_remote", and
 * then a token unless "http_require_token" is 0. */
static int choose_token(const struct sockaddr_storage *ss, char **token)
{
    int rc = cfg_server_address_allowed(ss);
    if (rc < 0)
        return rc;
    *token = strdup(cfg_str(CFG_HTTP_TOKEN));
    return *token != NULL ? 0 : -ENOMEM;
}

/* The first server setting whose value was refused, or -1 (config.c). */
int http_refused_setting(void)
{
    return cfg_server_refused();
}

static const char *unisolated;

void http_note_unisolated(const char *why) { unisolated = why; }

const char *http_libraries_unisolated(void) { return unisolated; }

/* libmicrohttpd's connection notification. */
static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    if (http_srv.tls.ca != NULL)
        http_tls_require_client_cert(cls, conn, socket_context, toe);
    http_conns_notify(conn, toe);
}

/* libmicrohttpd for the connections the watch thread accepts, or NULL: a
 * fixed pool of `threads` threads, so that a request creates no thread,
 * each polling its own connections with poll() (no limit on descriptor
 * numbers, unlike select).  Not epoll: libmicrohttpd 0.9.75 (Debian 12) watches epoll
 * edge-triggered and misses events.  About once in a hundred runs of
 * 1,000 connections opened at once it never read one's request, which sat
 * in the socket for the 20 s test/http_badinput waited; and it left 58 of
 * 300 clients that half-closed a partial request connected until the
 * idle timeout.  poll asks again on every turn: all 1,000 in each of 297
 * runs, and no half-closed client left waiting.  A
 * request waiting out a window holds its thread (and the connections that
 * thread polls) for the window: one thread is kept for the others
 * (http_window.c).  libmicrohttpd divides its connection limit among the
 * threads, and each must be able to take every connection: when a
 * connection handed to it (MHD_add_connection) finds its share full,
 * 0.9.75 leaves a lock held (daemon.c, new_connection_process_), and the
 * thread and MHD_stop_daemon wait for ever.  So http_conns.c keeps the
 * limit (http_max_connections live, as many again being closed) and
 * libmicrohttpd's is more than that for each thread.  Its threads get
 * cpprof's own stack size (THREAD_OWN_STACK_BYTES) and policy from
 * threadcreate.c, as every thread cpprof starts does, because it passes no
 * attributes: MHD_OPTION_THREAD_STACK_SIZE would make it pass its own,
 * which keep a real-time creator's policy (thread.h). */
static struct MHD_Daemon *start_daemon(int family, unsigned threads)
{
    unsigned max_conns = (unsigned)cfg_int(CFG_HTTP_MAX_CONNECTIONS);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET |
                     MHD_USE_ITC |
                     (http_srv.tls.cert != NULL ? MHD_USE_TLS : 0) |
                     (family == AF_INET6 ? MHD_USE_IPv6 : 0);
    /* HTTPS when a certificate is set; the CA, when set, makes
     * libmicrohttpd ask clients for theirs, on_connection makes the
     * handshake fail without one, and refuse_early checks it. */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_CERT_CALLBACK, (intptr_t)http_tls_certificate,
         (void *)http_tls_certificate},
        {MHD_OPTION_HTTPS_MEM_TRUST, 0, http_srv.tls.ca},
        {MHD_OPTION_END, 0, NULL},
    };
    if (http_srv.tls.cert == NULL)
        tls[0].option = MHD_OPTION_END;
    else if (http_srv.tls.ca == NULL)
        tls[1].option = MHD_OPTION_END;
    /* The timeout counts idle time (a client trickling its request or not
     * reading the answer), never a handler's own wait for a profile.  No
     * listening socket: the watch thread accepts (http_conns.c). */
    return MHD_start_daemon(
        flags, 0, NULL, NULL, http_on_request, NULL,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, http_new_request, NULL,
        MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, http_on_completed, NULL,
        MHD_OPTION_CONNECTION_LIMIT,
        (max_conns * HTTP_CONNS_CLOSING_ROOM + 1) * threads,
        MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg_int(CFG_HTTP_CONNECTION_TIMEOUT), MHD_OPTION_END);
}

struct daemon_start {
    int family;
    unsigned threads;
    struct MHD_Daemon *daemon;
};

static int run_start_daemon(void *arg)
{
    struct daemon_start *ds = arg;
    ds->daemon = start_daemon(ds->family, ds->threads);
    return ds->daemon != NULL ? 0 : -EIO;
}

static void close_listener(void)
{
    close(listen_fd);
    listen_fd = -1;
}

/* Starts the server on its listening socket fd, its descriptors high
 * (libmicrohttpd's too when `one_thread`: the process has no other thread
 * that could need a low number meanwhile) and watched. */
static int start_on(int fd, int family, bool one_thread)
{
    int floor = fd_floor(), *held = NULL;
    http_threads_open();
    fd = fd_move_high(fd, floor);
    http_srv.port = bound_port(fd); /* before any request checks its Host */
    int *before = http_fds_open();
    size_t nheld = one_thread ? http_fds_hold_low(fd, floor, &held) : 0;
    unsigned threads = (unsigned)cfg_int(CFG_HTTP_THREADS),
             max_conns = (unsigned)cfg_int(CFG_HTTP_MAX_CONNECTIONS);
    if (threads > max_conns)
        threads = max_conns > 1 ? max_conns : 2;
    struct daemon_start ds = {family, threads, NULL};
    int rc = http_conns_open(max_conns,
                             (unsigned)cfg_int(CFG_HTTP_HEADER_TIMEOUT));
    if (before != NULL && rc == 0)
        http_as_internal(run_start_daemon, &ds);
    server = ds.daemon;
    http_fds_release(held, nheld);
    if (server != NULL) {
        http_watch_own(fd);
        http_watch_own_new(before);
    }
    free(before);
    if (server == NULL) {
        http_conns_close();
        close(fd);
        return rc < 0 ? rc : -EIO;
    }
    listen_fd = fd;
    rc = http_windows_start((int)cfg_int(CFG_HTTP_THREADS));
    if (rc == 0)
        rc = http_watch_start(server, listen_fd);
    if (rc < 0) {
        http_windows_end();
        http_watch_end();
        MHD_stop_daemon(server);
        http_conns_close();
        close_listener();
        server = NULL;
        return rc;
    }
    return 0;
}

/* Starts the server on addr, on the listener `given` when it is one
 * (zero-code mode's, bound at load: zerolisten.c), which it then
 * owns. */
static int start_locked(const char *addr, bool one_thread, int given)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int rc = http_refused_setting() >= 0 ? CPPROF_EREFUSED
                                         : addr_parse(addr, &ss, &len);
    if (rc == 0)
        rc = choose_token(&ss, &http_srv.token);
    if (rc < 0) {
        if (given >= 0)
            close(given);
        return rc;
    }
    http_srv.on_loopback = addr_is_loopback(&ss);
    if ((rc = http_tls_load(&http_srv.tls)) < 0) {
        free(http_srv.token);
        if (given >= 0)
            close(given);
        return rc;
    }
    int fd = given >= 0 ? given : addr_listen(&ss, len);
    http_srv.max_body = (size_t)cfg_int(CFG_HTTP_MAX_BODY);
    /* Before the server's threads exist: they read what this writes. */
    if (fd >= 0)
        http_forks_serving(addr);
    rc = fd < 0 ? fd : start_on(fd, ss.ss_family, one_thread);
    if (rc < 0) {
        free(http_srv.token);
        http_tls_free(&http_srv.tls);
        return rc;
    }
    static bool drain_registered; /* under server_lock */
    if (!drain_registered)
        drain_registered = atexit(http_drain_at_exit) == 0;
    return 0;
}

/* fork(): the child must not inherit a server_lock held by a thread that
 * stays in the parent, nor the listening socket: while the child holds it
 * the parent cannot listen on its port again. */
static void http_atfork_prepare(void) { pthread_mutex_lock(&server_lock); }
static void http_atfork_parent(void) { pthread_mutex_unlock(&server_lock); }

/* In the child the server's threads (pool, windows, watch) are gone; its
 * daemon is dropped, not stopped (only async-signal-safe calls after
 * fork), with its listening socket closed, so the child can start a server
 * of its own.  The locks those threads may have held at the fork, and the
 * condition variables they were waiting on, are made anew by assignment:
 * no thread of the child holds or waits on them, but glibc's condition
 * variable still counts the parent's waiters, so that destroying it would
 * wait for them for ever, and a signal could go to a waiter that is not
 * there. */
static void http_forget_after_fork(void)
{
    bool was_serving = server != NULL;
    if (was_serving) {
        if (!http_watch_lost()) /* else the number may be the host's */
            close_listener();
        server = NULL;
        http_srv.port = 0;
        http_srv.token = NULL;
        http_srv.tls = (http_tls){NULL, NULL, NULL};
    }
    http_watch_forget_after_fork();
    http_windows_forget_after_fork();
    http_threads_forget_after_fork();
    http_requests_forget_after_fork();
    http_conns_forget_after_fork();
    http_relay_forget_after_fork();
    http_srv.relayed = false;
    pthread_mutex_unlock(&server_lock);
    http_forks_after_fork(was_serving);
}

/* A process that could not serve at load, or a fork of one that serves,
 * samples its allocations from now on (heap.h). */
static int start_with(const char *addr, bool one_thread, int given)
{
    int rc;
    heap_track_from_now();
    if (addr == NULL)
        addr = cfg_str(CFG_HTTP_ADDR);
    static const atfork_handlers on_fork = {
        http_atfork_prepare, http_atfork_parent, http_forget_after_fork};
    atfork_add(ATFORK_HTTP, &on_fork);
    pthread_mutex_lock(&server_lock);
    /* libmicrohttpd's threads, created now, are cpprof's own for life:
     * what they allocate is not the program's (own.h). */
    own_work_enter();
    if (server != NULL) {
        rc = CPPROF_ERUNNING;
        if (given >= 0)
            close(given);
    } else {
        rc = start_locked(addr, one_thread, given);
    }
    own_work_leave();
    pthread_mutex_unlock(&server_lock);
    return rc;
}

int http_start(const char *addr, bool one_thread)
{
    return start_with(addr, one_thread, -1);
}

int http_start_listening(const char *addr, int fd)
{
    return start_with(addr, false, fd);
}

int cpprof_http_start(const char *addr)
{
    return http_start(addr, false);
}

/* Stops the running server, under server_lock.  `from_watch`: called by
 * the watch thread itself (a worker's part retiring), which is not joined
 * but left to end. */
static void stop_locked(bool from_watch)
{
    http_forks_stopping(); /* the workers' relay closed first */
    /* Handlers waiting out a profile see the server stopping and
     * return, so joining the connection threads takes no longer than
     * one poll interval. */
    atomic_store(&http_stopping, true);
    http_threads_retire();
    http_windows_end();
    bool given_up = from_watch ? http_watch_leave() : http_watch_end();
    if (!given_up) {
        MHD_stop_daemon(server);
        http_conns_close();
        close_listener();
    }
    listen_fd = -1; /* given up: its number may be the program's now */
    atomic_store(&http_stopping, false);
    server = NULL;
    http_srv.port = 0;
    http_srv.relayed = false;
    free(http_srv.token);
    http_srv.token = NULL;
    if (given_up) /* its threads may still point at the texts */
        http_srv.tls = (http_tls){NULL, NULL, NULL};
    http_tls_free(&http_srv.tls);
}

int cpprof_http_stop(void)
{
    int rc = 0;
    pthread_mutex_lock(&server_lock);
    if (server == NULL) {
        rc = CPPROF_ENOTRUNNING;
    } else {
        bool worker = http_srv.relayed;
        stop_locked(false);
        if (worker) {
            forkwake_mark_serving(false);
            forkwake_rearm();
        }
    }
    pthread_mutex_unlock(&server_lock);
    return rc;
}

/* A worker's part (http_forks.c): the server without a listener, on the
 * control connection to its parent, which hands it the connections of the
 * requests it relays.  Those the parent authorized: no token, no Host
 * check, plain HTTP.  Its own forks' relay listener too, so that a
 * worker's workers are reached through it (nginx's master, forked by the
 * process started, forks the workers). */
static int start_worker_locked(pid_t parent)
{
    if (http_refused_setting() >= 0)
        return CPPROF_EREFUSED;
    int ctl = http_relay_connect(parent);
    if (ctl < 0)
        return ctl;
    http_srv.token = strdup("");
    if (http_srv.token == NULL) {
        close(ctl);
        return -ENOMEM;
    }
    http_srv.on_loopback = false;
    http_srv.tls = (http_tls){NULL, NULL, NULL};
    http_srv.max_body = (size_t)cfg_int(CFG_HTTP_MAX_BODY);
    http_srv.relayed = true;
    heap_track_from_now(); /* a worker's allocations, from its start */
    const char *why;
    http_relay_listen(&why); /* without it, its own forks are unreached */
    /* Where the program's thread that starts it is the only one, no other
     * can need a low descriptor meanwhile: libmicrohttpd's go high. */
    char threads[16];
    bool alone = procfile_status_value(AT_FDCWD, "/proc/self/status",
                                       "Threads", threads,
                                       sizeof threads) > 0 &&
                 strcmp(threads, "1") == 0;
    int rc = start_on(ctl, AF_UNIX, alone);
    if (rc < 0) {
        http_relay_close();
        http_srv.relayed = false;
        free(http_srv.token);
        http_srv.token = NULL;
        return rc;
    }
    forkwake_disarm(false);
    forkwake_mark_serving(true);
    return 0;
}

int http_start_worker(pid_t parent)
{
    static const atfork_handlers on_fork = {
        http_atfork_prepare, http_atfork_parent, http_forget_after_fork};
    atfork_add(ATFORK_HTTP, &on_fork);
    pthread_mutex_lock(&server_lock);
    own_work_enter();
    int rc = server != NULL ? CPPROF_ERUNNING : start_worker_locked(parent);
    own_work_leave();
    pthread_mutex_unlock(&server_lock);
    return rc;
}

bool http_worker_retire(void)
{
    /* A cpprof_http_stop under way holds the lock and joins this thread:
     * it does the stop. */
    while (pthread_mutex_trylock(&server_lock) != 0) {
        if (http_watch_stopping())
            return false;
        struct timespec t = {0, 1000000};
        nanosleep(&t, NULL);
    }
    own_work_enter();
    if (server != NULL && http_srv.relayed) {
        stop_locked(true);
        forkwake_mark_serving(false);
        forkwake_rearm();
    }
    own_work_leave();
    pthread_mutex_unlock(&server_lock);
    return true;
}

int http_port(void)
{
    pthread_mutex_lock(&server_lock);
    int port = server != NULL ? http_srv.port : CPPROF_ENOTRUNNING;
    pthread_mutex_unlock(&server_lock);
    return port;
}
