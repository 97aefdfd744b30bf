/*
 * http_conns.c -- who holds the HTTP server's connections, and how they are
 * let in.  The server accepts connections itself (the watch thread calls
 * http_conns_accept) and hands each to libmicrohttpd, rather than let
 * libmicrohttpd poll the listening socket, because of two hostile clients:
 *   - At the descriptor limit accept() fails with EMFILE while the client
 *     stays queued, so the listener stays readable: libmicrohttpd 0.9.75
 *     "tries busy waiting" when it has no connection yet (daemon.c,
 *     MHD_accept_connection), and each pool thread spun on poll + accept,
 *     taking both CPUs from the program.  Here a failed accept leaves the
 *     listener unpolled until the watch thread's next tick, and stderr
 *     says so once (http_watch.c, accept_or_back_off).
 *   - Slowloris: clients that send a request line and then a header byte
 *     now and then are never idle for http_connection_timeout and never
 *     complete a request, so they are never refused either; enough of them
 *     held every connection, and a client with the token got no answer.
 *     Here a connection that has not been authorized (its request's
 *     headers in and past refuse_early's checks) http_header_timeout
 *     seconds after it started is shut, and at most the pool less a
 *     reserve (an eighth) may wait to be authorized at once: one more
 *     shuts the one that has waited longest (once it had a second), so a
 *     client with the token always finds room, and is answered as soon as
 *     its headers are in.  (A flood of new connections, rather than slow
 *     ones, can still keep the pool full: it needs no slowness to.)
 * A connection is shut with shutdown(2) on its socket: libmicrohttpd's
 * thread then reads the end of it and closes it as it would any client
 * that left.  Its room is given to the next client at once, not once
 * libmicrohttpd has closed it, so libmicrohttpd's own limit is
 * HTTP_CONNS_CLOSING_ROOM times the setting: connections being closed
 * have room of their own.  (libmicrohttpd 0.9.75 must never reach its own
 * limit: see start_daemon in http.c.)  The socket is still open then,
 * because libmicrohttpd tells us a connection closed
 * (MHD_CONNECTION_NOTIFY_CLOSED) before it closes the socket, and forgets
 * it here under the same lock.
 */
#define _GNU_SOURCE
#include "http_server.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* An accepted connection given to libmicrohttpd that has not started
 * within this long never will (it refused it: out of memory, its own
 * per-thread limit), and no longer keeps room.  A connection younger than
 * EVICT_GRACE_MS is never shut to make room: a burst of ordinary clients
 * must not push out those whose requests are in but not yet read. */
enum { PENDING_FORGET_MS = 1000, EVICT_GRACE_MS = 1000 };

struct slot {
    struct MHD_Connection *conn; /* NULL: free */
    int fd;
    long long started_ms;
    bool authorized;
    bool shut; /* shutdown(2) called: closing */
};

static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots; /* under conns_lock, as everything below */
static unsigned n_slots;   /* HTTP_CONNS_CLOSING_ROOM times the limit */
static unsigned max_live;  /* the server's connection limit */
static unsigned n_open;    /* started, not yet closed */
static unsigned n_live;    /* of those, not shut */
static unsigned n_waiting; /* open, not authorized, not shut */
static unsigned waiting_max;
static unsigned pending;   /* handed to libmicrohttpd, not yet started */
static long long last_added_ms;
static long long last_closed_ms;
/* Accepted and handed to libmicrohttpd, not yet started (a fork's child
 * closes them as it does the started ones). */
static struct fdnote handed;
static long long header_ms;

int http_conns_open(unsigned max, unsigned header_seconds)
{
    struct slot *s = calloc(max * HTTP_CONNS_CLOSING_ROOM, sizeof *s);
    if (s == NULL)
        return -ENOMEM;
    unsigned reserve = (max + 7) / 8;
    pthread_mutex_lock(&conns_lock);
    free(slots); /* a table kept by a fork's child, or a given-up server */
    slots = s;
    n_slots = max * HTTP_CONNS_CLOSING_ROOM;
    max_live = max;
    n_open = n_live = n_waiting = pending = 0;
    last_added_ms = last_closed_ms = http_now_ms();
    waiting_max = max > reserve ? max - reserve : 1;
    header_ms = header_seconds * 1000LL;
    pthread_mutex_unlock(&conns_lock);
    return 0;
}

void http_conns_close(void)
{
    pthread_mutex_lock(&conns_lock);
    free(slots);
    slots = NULL;
    n_slots = 0;
    pthread_mutex_unlock(&conns_lock);
}

/* The child of a fork: the connections stayed with the parent.  Only
 * async-signal-safe work here; the table is freed by the next open. */
void http_conns_forget_after_fork(void)
{
    /* The clients' sockets stay with the parent's server: a worker that
     * kept one would hold that client's connection for its whole life. */
    for (unsigned i = 0; i < n_slots; i++)
        if (slots[i].conn != NULL)
            close(slots[i].fd);
    fdnote_close_after_fork(&handed);
    conns_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    n_slots = 0;
}

/* Shuts s's connection; libmicrohttpd closes it (see the file's comment).
 * Under conns_lock. */
static void shut(struct slot *s)
{
    shutdown(s->fd, SHUT_RDWR);
    s->shut = true;
    n_live--;
    n_waiting--;
}

/* Under conns_lock: the unauthorized connection that has waited longest,
 * if it has waited EVICT_GRACE_MS. */
static struct slot *longest_waiting(long long now)
{
    struct slot *oldest = NULL;
    for (unsigned i = 0; i < n_slots; i++) {
        struct slot *s = &slots[i];
        if (s->conn != NULL && !s->authorized && !s->shut &&
            (oldest == NULL || s->started_ms < oldest->started_ms))
            oldest = s;
    }
    return oldest != NULL && now - oldest->started_ms >= EVICT_GRACE_MS
               ? oldest
               : NULL;
}

/* Under conns_lock: keeps the unauthorized connections within
 * waiting_max, the longest waiting shut first, the reserve for the rest. */
static void make_room(long long now)
{
    for (struct slot *old; n_waiting > waiting_max &&
                           (old = longest_waiting(now)) != NULL;)
        shut(old);
}

static struct slot *slot_of(struct MHD_Connection *conn)
{
    for (unsigned i = 0; i < n_slots; i++)
        if (slots[i].conn == conn)
            return &slots[i];
    return NULL;
}

static void started(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct slot *s = slot_of(NULL);
    if (pending > 0)
        pending--;
    if (info == NULL)
        return;
    fdnote_remove(&handed, info->connect_fd);
    if (s == NULL) { /* more than the limit: cannot happen, but never track
                        what cannot be shut */
        shutdown(info->connect_fd, SHUT_RDWR);
        return;
    }
    long long now = http_now_ms();
    *s = (struct slot){conn, info->connect_fd, now, false, false};
    n_open++;
    n_live++;
    n_waiting++;
    make_room(now);
}

static void closed(struct MHD_Connection *conn)
{
    struct slot *s = slot_of(conn);
    if (s == NULL)
        return;
    if (!s->shut) {
        n_live--;
        n_waiting -= !s->authorized;
    }
    s->conn = NULL;
    n_open--;
    last_closed_ms = http_now_ms();
}

void http_conns_notify(struct MHD_Connection *conn,
                       enum MHD_ConnectionNotificationCode toe)
{
    pthread_mutex_lock(&conns_lock);
    if (slots != NULL) {
        if (toe == MHD_CONNECTION_NOTIFY_STARTED)
            started(conn);
        else if (toe == MHD_CONNECTION_NOTIFY_CLOSED)
            closed(conn);
    }
    pthread_mutex_unlock(&conns_lock);
}

void http_conns_authorized(struct MHD_Connection *conn)
{
    pthread_mutex_lock(&conns_lock);
    struct slot *s = slots != NULL ? slot_of(conn) : NULL;
    if (s != NULL && !s->authorized) {
        if (!s->shut)
            n_waiting--;
        s->authorized = true;
    }
    pthread_mutex_unlock(&conns_lock);
}

bool http_conns_room(void)
{
    pthread_mutex_lock(&conns_lock);
    bool room = n_live + pending < max_live && n_open + pending < n_slots;
    pthread_mutex_unlock(&conns_lock);
    return room;
}

void http_conns_tick(void)
{
    long long now = http_now_ms();
    pthread_mutex_lock(&conns_lock);
    for (unsigned i = 0; i < n_slots; i++) {
        struct slot *s = &slots[i];
        if (s->conn != NULL && !s->authorized && !s->shut &&
            now - s->started_ms >= header_ms)
            shut(s);
    }
    make_room(now);
    if (pending > 0 && now - last_added_ms >= PENDING_FORGET_MS)
        pending = 0;
    pthread_mutex_unlock(&conns_lock);
}

long long http_conns_idle_ms(void)
{
    pthread_mutex_lock(&conns_lock);
    long long since = last_added_ms > last_closed_ms ? last_added_ms
                                                     : last_closed_ms;
    long long idle = n_open + pending > 0 ? 0 : http_now_ms() - since;
    pthread_mutex_unlock(&conns_lock);
    return idle;
}

/* The next connection: accepted on the listener, or, for a worker's part,
 * handed over its control connection (http_relay.c: -EPIPE once the
 * parent closed that). */
static int next_connection(int listen_fd, struct sockaddr_storage *ss,
                           socklen_t *len)
{
    if (http_srv.relayed) {
        int fd = http_relay_receive(listen_fd);
        memset(ss, 0, sizeof *ss);
        ss->ss_family = AF_UNIX;
        *len = sizeof(struct sockaddr_un);
        return fd;
    }
    int fd = accept4(listen_fd, (struct sockaddr *)ss, len,
                     SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ||
                       errno == ECONNABORTED || errno == EINTR
                   ? -EAGAIN
                   : -errno;
    return fd;
}

int http_conns_accept(struct MHD_Daemon *d, int listen_fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int fd = next_connection(listen_fd, &ss, &len);
    if (fd < 0)
        return fd == -EAGAIN ? 0 : fd;
    pthread_mutex_lock(&conns_lock);
    pending++;
    last_added_ms = http_now_ms();
    pthread_mutex_unlock(&conns_lock);
    fdnote_add(&handed, fd);
    if (MHD_add_connection(d, fd, (struct sockaddr *)&ss, len) != MHD_YES) {
        fdnote_remove(&handed, fd);
        pthread_mutex_lock(&conns_lock); /* it closed fd */
        if (pending > 0)
            pending--;
        pthread_mutex_unlock(&conns_lock);
    }
    return 0;
}
