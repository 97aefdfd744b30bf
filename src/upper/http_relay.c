/*
 * http_relay.c -- a pre-fork worker's requests, relayed through the
 * process that serves: /debug/pprof/pid/PID/... of the serving process is
 * /debug/pprof/... of its worker PID (http_forks.c).
 *
 * A worker listens nowhere, so that nothing takes a port nobody chose and
 * a worker nobody asks for costs nothing.  Each serving process listens
 * on one Unix socket in the abstract namespace, named after the family's
 * random secret (forkwake.c: so that another program cannot take the name
 * before it exists) and its pid; a worker woken for a request (forkwake.c)
 * connects there once its part runs and keeps that connection, its
 * control connection, until its part stops.  The parent checks the peer
 * (SO_PEERCRED: a worker of its own, of its user), and the worker checks
 * that the listener is its parent's.  For each relayed request the parent
 * makes a socket pair, hands one end to the worker over the control
 * connection (SCM_RIGHTS), where the worker's server takes it as an
 * accepted connection, and writes the request as HTTP/1.0 to the other:
 * the path under the prefix, the query, the body.  The parent has already
 * authorized the client (token, Host, TLS, cross-site); the worker's
 * server answers whatever comes over its control connection.  The answer
 * is read whole (within http_reply_kb) and sent as any reply, so that
 * gzip, the reply limit and the window's end apply as to the parent's
 * own.
 */
#define _GNU_SOURCE
#include "http_server.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "cpprof.h"
#include "forkwake.h"
#include "interpose.h"

enum {
    PEERS_MAX = 64,        /* workers with a control connection at once */
    WAKE_FIRST_MS = 250,   /* the wake again, for a worker between waits */
    WAKE_WAIT_MS = 5000,   /* how long a worker has to answer its wake */
    START_WAIT_MS = 30000, /* and to start its part once it took it */
    POLL_MS = 100,         /* how often a wait looks at its request's end */
    HEAD_MAX = 16 * 1024,  /* the answer's status line and headers */
};

static int listen_fd = -1;

/* The workers whose part runs, with their control connections. */
static struct peer {
    pid_t pid;
    int fd;
} peers[PEERS_MAX];
static int n_peers;
/* The parent's ends of the connections handed to workers, while their
 * requests run (a fork's child closes them). */
static struct fdnote handed;
static bool accepting; /* a request's thread accepts for all */
static pthread_mutex_t peers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t peers_changed = PTHREAD_COND_INITIALIZER;

static socklen_t name_of(pid_t pid, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1,
                     "cpprof-relay.%s.%d", forkwake_secret(), (int)pid);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

int http_relay_listen(const char **why)
{
    if (listen_fd >= 0)
        return 0;
    if (forkwake_secret()[0] == '\0') {
        *why = "the family has no secret to name the relay socket with";
        return -EIO;
    }
    struct sockaddr_un a;
    socklen_t len = name_of(getpid(), &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) < 0 ||
        listen(fd, PEERS_MAX) < 0) {
        int err = -errno;
        if (fd >= 0)
            close(fd);
        *why = "the workers' relay socket cannot be made";
        return err;
    }
    listen_fd = fd_move_high(fd, fd_floor());
    return 0;
}

int http_relay_fd(void) { return listen_fd; }

void http_relay_close(void)
{
    pthread_mutex_lock(&peers_lock);
    for (int i = 0; i < n_peers; i++)
        close(peers[i].fd);
    n_peers = 0;
    pthread_mutex_unlock(&peers_lock);
    if (listen_fd >= 0)
        close(listen_fd);
    listen_fd = -1;
}

/* In a fork's child: the listener and the control connections are the
 * parent's (close only: a fork handler). */
void http_relay_forget_after_fork(void)
{
    fdnote_close_after_fork(&handed);
    for (int i = 0; i < n_peers; i++)
        close(peers[i].fd);
    n_peers = 0;
    accepting = false;
    if (listen_fd >= 0)
        close(listen_fd);
    listen_fd = -1;
    peers_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    peers_changed = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
}

/* ---- The worker's side ------------------------------------------------ */

static bool peer_is(int fd, pid_t pid)
{
    struct ucred c;
    socklen_t len = sizeof c;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) == 0 &&
           c.pid == pid;
}

int http_relay_connect(pid_t parent)
{
    struct sockaddr_un a;
    socklen_t len = name_of(parent, &a);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&a, len) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    if (!peer_is(fd, parent)) {
        close(fd);
        return -EPERM;
    }
    return fd;
}

int http_relay_receive(int ctl)
{
    char byte;
    struct iovec iov = {&byte, 1};
    union {
        struct cmsghdr h;
        char room[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = u.room, .msg_controllen = sizeof u.room};
    ssize_t n = recvmsg(ctl, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n == 0)
        return -EPIPE;
    if (n < 0)
        return errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c == NULL || c->cmsg_type != SCM_RIGHTS ||
        c->cmsg_len != CMSG_LEN(sizeof(int)))
        return -EAGAIN;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

/* ---- The parent's side ------------------------------------------------ */

/* Under peers_lock. */
static int find_peer(pid_t pid)
{
    for (int i = 0; i < n_peers; i++)
        if (peers[i].pid == pid)
            return i;
    return -1;
}

static void drop_peer(int i)
{
    close(peers[i].fd);
    peers[i] = peers[--n_peers];
}

/* Whether a worker of this process is listed as pid (the table is the
 * family's). */
static bool is_my_worker(pid_t pid)
{
    forkwake_slot *t = forkwake_table();
    for (unsigned i = 0; t != NULL && i < FORKWAKE_SLOTS; i++)
        if (atomic_load(&t[i].pid) == pid)
            return t[i].parent == getpid();
    return false;
}

/* Accepts the control connections waiting, keeping those of this
 * process's workers.  Without peers_lock held; takes it to add. */
static void accept_peers(void)
{
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct ucred c;
        socklen_t len = sizeof c;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0 ||
            !is_my_worker(c.pid)) {
            close(fd);
            continue;
        }
        fd = fd_move_high(fd, fd_floor());
        pthread_mutex_lock(&peers_lock);
        int i = find_peer(c.pid);
        if (i >= 0)
            drop_peer(i);
        if (n_peers == PEERS_MAX)
            drop_peer(0); /* its worker stops its part, and comes again */
        peers[n_peers++] = (struct peer){c.pid, fd};
        pthread_mutex_unlock(&peers_lock);
    }
}

/* The control connection of worker pid, which is woken until it comes,
 * or a negative code: -ETIMEDOUT, -ECANCELED (the request ended), what
 * the wake met (-ENOENT: not a worker, or one that exec'd). */
static int await_worker(http_req *r, pid_t pid)
{
    int64_t start = http_now_ms(), next_wake = start, wake_gap = WAKE_FIRST_MS;
    for (;;) {
        pthread_mutex_lock(&peers_lock);
        int i = find_peer(pid);
        if (i >= 0) {
            struct pollfd p = {.fd = peers[i].fd, .events = POLLIN};
            /* Nothing comes from a worker: readable means it has gone. */
            if (poll(&p, 1, 0) == 0) {
                int fd = peers[i].fd;
                pthread_mutex_unlock(&peers_lock);
                return fd;
            }
            drop_peer(i);
        }
        pthread_mutex_unlock(&peers_lock);
        int64_t now = http_now_ms();
        if (now - start > WAKE_WAIT_MS &&
            (now - start > START_WAIT_MS ||
             forkwake_state_of(pid) != FORKWAKE_STARTING))
            return -ETIMEDOUT;
        if (http_request_end(r) != HTTP_GOING_ON)
            return -ECANCELED;
        /* Again now and then: a wake that came just before the worker
         * entered its wait did not interrupt it.  Each wake may cut short
         * a wait cpprof does not watch, so ever less often. */
        if (now >= next_wake) {
            int rc = forkwake_send(pid);
            if (rc < 0)
                return rc;
            next_wake = now + wake_gap;
            wake_gap *= 2;
        }
        pthread_mutex_lock(&peers_lock);
        bool accept_here = !accepting;
        accepting = true;
        if (!accept_here) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += POLL_MS * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&peers_changed, &peers_lock, &until);
            pthread_mutex_unlock(&peers_lock);
            continue;
        }
        pthread_mutex_unlock(&peers_lock);
        struct pollfd p = {.fd = listen_fd, .events = POLLIN};
        if (poll(&p, 1, POLL_MS) == 1)
            accept_peers();
        pthread_mutex_lock(&peers_lock);
        accepting = false;
        pthread_cond_broadcast(&peers_changed);
        pthread_mutex_unlock(&peers_lock);
    }
}

/* Hands the worker on ctl a new connection; the parent's end, or -errno. */
static int hand_connection(int ctl)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    char byte = 'c';
    struct iovec iov = {&byte, 1};
    union {
        struct cmsghdr h;
        char room[CMSG_SPACE(sizeof(int))];
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = u.room, .msg_controllen = sizeof u.room};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &sv[1], sizeof(int));
    ssize_t n = sendmsg(ctl, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    int err = errno;
    close(sv[1]);
    if (n != 1) {
        close(sv[0]);
        return n < 0 ? -err : -EIO;
    }
    fdnote_add(&handed, sv[0]);
    return sv[0];
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -errno;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the request as the worker is to see it: `rest` under its own
 * prefix, the query as sent, the body. */
static int send_request(int fd, http_req *r, const char *rest)
{
    size_t body_len;
    const char *body = http_body(r, &body_len);
    const char *q = http_raw_query(r);
    char *head;
    int n = asprintf(&head,
                     "%s " HTTP_PREFIX "%s%s%s HTTP/1.0\r\n"
                     "Host: localhost\r\nContent-Length: %zu\r\n\r\n",
                     http_is_post(r) ? "POST" : "GET", rest, q[0] ? "?" : "",
                     q, body != NULL ? body_len : 0);
    if (n < 0)
        return -ENOMEM;
    int rc = write_all(fd, head, (size_t)n);
    free(head);
    if (rc == 0 && body != NULL && body_len > 0)
        rc = write_all(fd, body, body_len);
    return rc;
}

/* Reads the whole answer into *out (malloc'd, *len bytes), as long as
 * the request goes on: 0, -ECANCELED, -EFBIG past the reply limit. */
static int read_answer(int fd, http_req *r, char **out, size_t *len)
{
    size_t cap = 64 * 1024, n = 0,
           limit = (size_t)cfg_int(CFG_HTTP_REPLY_KB) * 1024 + HEAD_MAX;
    char *buf = malloc(cap);
    if (buf == NULL)
        return -ENOMEM;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, POLL_MS);
        if (ready == 0) {
            if (http_request_end(r) != HTTP_GOING_ON) {
                free(buf);
                return -ECANCELED;
            }
            continue;
        }
        if (n == cap) {
            char *more = cap * 2 <= limit ? realloc(buf, cap * 2) : NULL;
            if (more == NULL) {
                free(buf);
                return cap * 2 > limit ? -EFBIG : -ENOMEM;
            }
            buf = more;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* The headers of the worker's answer that the parent's reply carries:
 * not those every reply of the parent's gets, nor the connection's. */
static bool passed_on(const char *name, size_t len)
{
    static const char *const own[] = {
        "Connection", "Content-Length", "Transfer-Encoding",
        "Content-Encoding", "Date", "Vary", "X-Content-Type-Options",
        "X-Frame-Options", "Content-Security-Policy", "Keep-Alive"};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++)
        if (strlen(own[i]) == len && strncasecmp(own[i], name, len) == 0)
            return false;
    return true;
}

enum { HEADERS_MAX = 16 };

/* Sends the worker's answer (status line, headers, body in buf) as this
 * request's reply.  buf is written into (the header lines cut). */
static int reply_answer(http_req *r, pid_t pid, char *buf, size_t len)
{
    char *end = memmem(buf, len, "\r\n\r\n", 4);
    unsigned status;
    if (end == NULL || sscanf(buf, "HTTP/1.%*c %u", &status) != 1)
        return http_error(r, MHD_HTTP_BAD_GATEWAY,
                          "worker %d answered no HTTP response", (int)pid);
    *end = '\0';
    const char *headers[2 * HEADERS_MAX + 1];
    int h = 0;
    for (char *line = strstr(buf, "\r\n"); line != NULL && h < 2 * HEADERS_MAX;) {
        line += 2;
        char *next = strstr(line, "\r\n");
        if (next != NULL)
            *next = '\0';
        char *colon = strchr(line, ':');
        if (colon != NULL && passed_on(line, (size_t)(colon - line))) {
            *colon = '\0';
            headers[h++] = line;
            headers[h++] = colon + 1 + strspn(colon + 1, " \t");
        }
        line = next;
    }
    headers[h] = NULL;
    char *body = end + 4;
    return http_send(r, status, headers, body, len - (size_t)(body - buf));
}

/* /debug/pprof/pid/PID/REST: REST of worker PID. */
int http_relay(http_req *r)
{
    const char *path = http_path(r) + strlen("pid/");
    char *after;
    long pid = strtol(path, &after, 10);
    if (path[0] < '1' || path[0] > '9' || pid > 0x7fffffff ||
        (*after != '/' && *after != '\0'))
        return http_error(r, MHD_HTTP_NOT_FOUND,
                          "%s: not a worker's path (pid/PID/...)",
                          http_path(r));
    if (*after == '\0') {
        /* As the index itself: its links are relative to the slash. */
        char location[64];
        snprintf(location, sizeof location, HTTP_PREFIX "pid/%ld/", pid);
        const char *headers[] = {"Location", location, NULL};
        return http_send(r, MHD_HTTP_MOVED_PERMANENTLY, headers, "", 0);
    }
    if (listen_fd < 0 || !is_my_worker((pid_t)pid))
        return http_error(r, MHD_HTTP_NOT_FOUND,
                          "pid %ld is not a worker of this process (pid %d): "
                          "the index lists them", pid, (int)getpid());
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; attempt++) {
        int ctl = await_worker(r, (pid_t)pid);
        if (ctl == -ENOENT)
            return http_error(r, MHD_HTTP_NOT_FOUND,
                              "pid %ld is no longer a worker of this process",
                              pid);
        if (ctl == -ETIMEDOUT && forkwake_state_of((pid_t)pid) ==
                                     FORKWAKE_STARTING)
            return http_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                              "worker %ld took its wake but did not start "
                              "its part within %d ms (a machine this loaded "
                              "may need longer): ask again",
                              pid, START_WAIT_MS);
        if (ctl == -ETIMEDOUT)
            return http_error(
                r, MHD_HTTP_SERVICE_UNAVAILABLE,
                "worker %ld did not answer its wake within %d ms: it is in "
                "none of the waits where cpprof starts a worker's part "
                "(epoll_wait, poll, select, sigsuspend...), or it blocks "
                "the worker signal (worker_signal)",
                pid, WAKE_WAIT_MS);
        if (ctl < 0)
            return ctl;
        fd = hand_connection(ctl);
        if (fd < 0) { /* its part stopped meanwhile: wake it again */
            pthread_mutex_lock(&peers_lock);
            int i = find_peer((pid_t)pid);
            if (i >= 0 && peers[i].fd == ctl)
                drop_peer(i);
            pthread_mutex_unlock(&peers_lock);
        }
    }
    if (fd < 0)
        return http_error(r, MHD_HTTP_BAD_GATEWAY,
                          "worker %ld could not be handed the request: %s",
                          pid, cpprof_strerror(fd));
    char *answer = NULL;
    size_t len = 0;
    int rc = send_request(fd, r, after + 1);
    if (rc == 0)
        rc = read_answer(fd, r, &answer, &len);
    fdnote_remove(&handed, fd);
    close(fd);
    if (rc == -ECANCELED)
        return http_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "the request ended before worker %ld answered",
                          pid);
    if (rc == -EFBIG)
        return http_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                          "worker %ld's answer is larger than http_reply_kb "
                          "(%ld KiB)", pid, cfg_int(CFG_HTTP_REPLY_KB));
    if (rc < 0)
        return http_error(r, MHD_HTTP_BAD_GATEWAY,
                          "worker %ld: %s", pid, cpprof_strerror(rc));
    rc = reply_answer(r, (pid_t)pid, answer, len);
    free(answer);
    return rc;
}
