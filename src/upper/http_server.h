/*
 * http_server.h -- the HTTP server's internals, shared by its own files and
 * seen by no handler: libmicrohttpd's and GnuTLS's types live only here, so
 * that an endpoint (http.h) compiles without either.
 *
 * The server's files, one concern each:
 *   http.c           lifecycle: settings, start and stop, fork
 *   http_dispatch.c  a request from libmicrohttpd's first call to its
 *                    completion: the route table, refusals, what handlers
 *                    ask of a request, the drain at exit
 *   http_reply.c     the responses: the headers every one carries, Go's
 *                    error form, JSON; what replies hold until read
 *   http_window.c    the threads that run requests waiting out a window
 *   http_threads.c   the server's threads are cpprof's: label, CPU time
 *   http_watch.c     the descriptors the host cannot take, and the thread
 *                    that watches them and accepts connections
 *   http_conns.c     who holds the connections, and how they are let in
 *   http_access.c    who may ask: token, Host names, cross-site requests
 *   http_tls.c       HTTPS: certificate files, their renewal, client
 *                    certificates
 *   zerocode.c  zero-code mode's start from the environment
 *   http_forks.c     pre-fork workers: which forks are, what a woken one
 *                    starts, the index's list of them
 *   http_relay.c     a worker's requests, through its parent's address
 */
#ifndef CPPROF_HTTP_SERVER_H
#define CPPROF_HTTP_SERVER_H

#include "http.h"
#include "server_entry.h"

#include <gnutls/abstract.h>
#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

/* Where every endpoint lives. */
#define HTTP_PREFIX "/debug/pprof/"

/* TLS (http_tls.c): the PEM texts of the http_tls_* files, NULL when not
 * set (no cert: plain HTTP; no ca: no client certificate asked for). */
typedef struct {
    char *cert, *key, *ca;
} http_tls;

/* The running server's settings, fixed at start under the lifecycle's lock
 * (http.c) and read without it by the requests it serves. */
typedef struct {
    char *token;       /* every request must carry it ("" when none is
                          needed) */
    size_t max_body;
    bool on_loopback;  /* then only loopback Host names answered */
    int port;
    http_tls tls;      /* its PEM texts, kept for the server's life */
    bool relayed;      /* a worker's part: its connections come from its
                          parent, which authorized them (http_relay.c) */
} http_server;
extern http_server http_srv;

/* Set while the server stops (or is given up, or exit drains it): handlers
 * polling http_request_end() return. */
extern atomic_bool http_stopping;

/* The server's timeouts and ticks are in milliseconds of the monotonic
 * clock. */
static inline int64_t http_now_ms(void)
{
    return clock_mono_ns() / 1000000;
}

struct http_req {
    struct MHD_Connection *conn;
    unsigned method;      /* one enum http_method bit, 0 for any other */
    char *raw_query;      /* as sent, without '?' */
    const char *path;     /* after HTTP_PREFIX, set at dispatch */
    char *body;
    size_t body_len;
    bool body_too_big;
    bool responded;
    /* A request waiting out a window runs on a window thread while its
     * connection is suspended: its response is kept here until the
     * connection is resumed (only libmicrohttpd's thread may queue it). */
    const http_route *route;      /* set when handed to a window thread */
    struct MHD_Response *pending; /* the response it made, not yet queued */
    unsigned pending_status;
    int handler_rc;
    http_req *next_waiting;       /* in the window queue */
};

/* Dispatch (http_dispatch.c): libmicrohttpd's callbacks for a request
 * (MHD_OPTION_URI_LOG_CALLBACK, the access handler,
 * MHD_OPTION_UNESCAPE_CALLBACK, MHD_OPTION_NOTIFY_COMPLETED).
 * http_run_handler runs a route's handler on the calling thread, a 500
 * naming its error when it answered nothing.  http_drain_at_exit is the
 * atexit handler that lets open requests finish (see its comment). */
void *http_new_request(void *cls, const char *uri,
                       struct MHD_Connection *conn);
enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn,
                                const char *url, const char *method,
                                const char *version, const char *upload,
                                size_t *upload_len, void **con_cls);
size_t http_unescape(void *cls, struct MHD_Connection *conn, char *s);
void http_on_completed(void *cls, struct MHD_Connection *conn,
                       void **con_cls, enum MHD_RequestTerminationCode why);
int http_run_handler(http_req *r, const http_route *route);
void http_drain_at_exit(void);
void http_requests_forget_after_fork(void);

/* Responses (http_reply.c).  http_send queues `body` (copied) with `status`,
 * the headers every response has and the NULL-terminated name/value pairs
 * in `headers`; http_send_error sends Go's error form of an already
 * formatted message, with an Allow header when `allow` is not NULL.
 * http_queue_pending queues what a window thread made, once the connection
 * is resumed. */
int http_send(http_req *r, unsigned status, const char *const *headers,
              const void *body, size_t len);
int http_send_error(http_req *r, unsigned status, const char *allow,
                    const char *msg);
int http_queue_pending(http_req *r);

/* Windows (http_window.c): http_windows_start allows `max` windows at
 * once (0), http_windows_end ends the window threads once their requests
 * are done.  http_window_hand suspends the request's connection and gives
 * it to a window thread, made then if none is free, or answers 503 when
 * `max` are taken. */
int http_windows_start(int max);
void http_windows_end(void);
int http_window_hand(http_req *r, const http_route *route);
void http_windows_forget_after_fork(void);

/* The server's threads (http_threads.c).  http_label_thread gives the
 * calling server thread pprof_internal=http and counts it (once), where
 * its start did not; http_threads_open and http_threads_retire bracket a
 * server's life (its threads' CPU time is kept as they retire);
 * http_as_internal runs start(arg) so that the threads it creates are
 * cpprof's, not the program's, labelled and counted from their start. */
void http_label_thread(void);
void http_threads_open(void);
void http_threads_retire(void);
int http_as_internal(int (*start)(void *), void *arg);
void http_threads_forget_after_fork(void);

/* The descriptor watch (http_watch.c).  At start: fd_floor (util.h), the
 * number the server's descriptors should take at least; fd_move_high
 * moves one there; http_fds_hold_low holds every lower free number while
 * libmicrohttpd starts (one thread only) and http_fds_release lets them
 * go; http_fds_open lists the numbers open (-1 ends it, malloc'd);
 * http_watch_own records the listener, then http_watch_own_new what
 * libmicrohttpd opened since `before`.  http_watch_start starts the thread
 * that watches them and accepts on `listen_fd` for `daemon`;
 * http_watch_end ends it, forgets the descriptors, and says whether it had
 * given the server up (its threads then cannot be joined: the server is
 * left as it is). */
size_t http_fds_hold_low(int fd, int floor, int **held);
void http_fds_release(int *held, size_t n);
int *http_fds_open(void);
void http_watch_own(int fd);
void http_watch_own_new(const int *before);
int http_watch_start(struct MHD_Daemon *daemon, int listen_fd);
bool http_watch_end(void);
bool http_watch_leave(void);
bool http_watch_stopping(void);
bool http_watch_lost(void);
void http_watch_forget_after_fork(void);

/* The lifecycle's entry points (http_start, http_start_listening,
 * http_refused_setting) are in server_entry.h. */

/* Called by upper.c (through the upper object's table) when it loaded
 * the upper object without RTLD_DEEPBIND, with why; the index says it. */
void http_note_unisolated(const char *why);

/* Pre-fork servers (http_forks.c): http_forks_serving when a server
 * started on `addr` (under the lifecycle's lock, before any fork that
 * inherits it); http_forks_stopping when it stops, before its listener
 * closes; http_forks_after_fork in a child, after the server's own fork
 * handling, with whether the parent served. */
void http_forks_serving(const char *addr);
void http_forks_stopping(void);
void http_forks_after_fork(bool was_serving);

/* A worker's part (http.c): its server, on the control connection to its
 * parent `parent` (0, CPPROF_ERUNNING, a negative code); started by
 * http_forks.c when the worker is woken, stopped by the watch thread
 * (http_worker_retire, which returns false when a stop is under way and
 * will join it) once idle for http_worker_idle_ms or its parent let go. */
int http_start_worker(pid_t parent);
bool http_worker_retire(void);

/* The relay (http_relay.c): the serving process's listener for its
 * workers' control connections (0, or a negative code with why), closed
 * at stop and forgotten in a fork's child; a worker's connection to its
 * parent's (a descriptor or a negative code) and the next connection
 * handed over it (a descriptor, -EAGAIN, -EPIPE once the parent let go). */
int http_relay_listen(const char **why);
void http_relay_close(void);
void http_relay_forget_after_fork(void);
int http_relay_connect(pid_t parent);
int http_relay_receive(int ctl);

/* Connections (http_conns.c): accepted by the server itself, at the
 * descriptor limit without spinning, and each given http_header_timeout
 * seconds to be authorized, with room kept for clients that are.
 * http_conns_open before libmicrohttpd starts (-ENOMEM), http_conns_close
 * once it stopped; http_conns_notify from its connection notification;
 * http_conns_authorized once a request passed refuse_early;
 * http_conns_tick from the watch thread every tick; http_conns_accept
 * when the listener is readable and http_conns_room: 0, or the negative
 * errno of a failed accept, the connection left queued. */
enum { HTTP_CONNS_CLOSING_ROOM = 2 }; /* libmicrohttpd's limit: this times
                                        the setting (http_conns.c) */
int http_conns_open(unsigned max, unsigned header_seconds);
void http_conns_close(void);
void http_conns_forget_after_fork(void);
void http_conns_notify(struct MHD_Connection *conn,
                       enum MHD_ConnectionNotificationCode toe);
void http_conns_authorized(struct MHD_Connection *conn);
bool http_conns_room(void);
void http_conns_tick(void);
int http_conns_accept(struct MHD_Daemon *d, int listen_fd);
/* How long no connection has been open or handed over, in ms (0 while one
 * is). */
long long http_conns_idle_ms(void);

/* Access (http_access.c).  Whether the request carries the token (always
 * true when `token` is empty): "Authorization: Bearer TOKEN", or HTTP
 * Basic with the token as password. */
bool http_authorized(struct MHD_Connection *conn, const char *token);
/* Whether a server on loopback (`on_loopback`) answers the request's Host:
 * a loopback name or an http_allowed_hosts one, with `port` or none. */
bool http_host_allowed(struct MHD_Connection *conn, bool on_loopback,
                       int port);
/* Whether a browser says the request comes from another site
 * (Sec-Fetch-Site: cross-site, or an Origin http_host_allowed refuses). */
bool http_cross_site(struct MHD_Connection *conn, int port);

/* TLS (http_tls.c).  http_tls_load reads and checks the files;
 * CPPROF_ETLS (stderr names the file and the reason) or -ENOMEM when they
 * cannot be used. */
int http_tls_load(http_tls *t);
void http_tls_free(http_tls *t);
/* libmicrohttpd's connection notification (MHD_OPTION_NOTIFY_CONNECTION)
 * when a CA is set: a new connection's handshake fails without a client
 * certificate. */
void http_tls_require_client_cert(void *cls, struct MHD_Connection *conn,
                                  void **socket_context,
                                  enum MHD_ConnectionNotificationCode toe);
/* Whether the client showed a certificate the CA verifies. */
bool http_tls_client_verified(struct MHD_Connection *conn);
/* libmicrohttpd's certificate callback (MHD_OPTION_HTTPS_CERT_CALLBACK,
 * GnuTLS's gnutls_certificate_retrieve_function2): the pair to serve, the
 * files' renewal if they changed and it checks out. */
int http_tls_certificate(gnutls_session_t session,
                         const gnutls_datum_t *req_ca_dn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos,
                         int pk_algos_length, gnutls_pcert_st **chain,
                         unsigned *nchain, gnutls_privkey_t *key);

#endif
