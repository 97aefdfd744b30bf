/*
 * http.c -- the embedded HTTP server: lifecycle, routing, Go's response form.
 *
 * libmicrohttpd runs one thread per connection, so a handler may block for
 * the length of a CPU profile without holding up any other endpoint.  This
 * file owns everything the handlers share: the route table (one row per
 * /debug/pprof/ endpoint, with the methods it accepts), the headers every
 * response carries (X-Content-Type-Options: nosniff), and Go's error form
 * (text/plain, X-Go-Pprof: 1, message plus newline) that `go tool pprof`
 * shows to its user.  Handlers live in files of their own (http_profile.c,
 * ...) and see only http.h.
 *
 * We bind the listening socket ourselves rather than let libmicrohttpd do it,
 * so that a failure comes back as a real errno (-EADDRINUSE, -EACCES) and a
 * test binding port 0 can learn the port it got (http_port()).
 */
#define _GNU_SOURCE /* POLLRDHUP, vasprintf */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "cpprof.h"

#define HTTP_PREFIX "/debug/pprof/"
/* Largest request body kept (symbol lookups are the only bodies); a larger
 * one is answered 413 without being stored. */
#define HTTP_MAX_BODY (64 * 1024)

enum http_method { HTTP_GET = 1, HTTP_POST = 2 };

struct http_route {
    const char *name;     /* the path after /debug/pprof/ */
    unsigned methods;     /* enum http_method bits it accepts */
    http_handler handler;
};

static const struct http_route routes[] = {
    {"profile", HTTP_GET, http_profile},
    {"goroutine", HTTP_GET, http_goroutine},
    {"heap", HTTP_GET, http_heap},
    {"allocs", HTTP_GET, http_allocs},
    {"block", HTTP_GET, http_block},
    {"mutex", HTTP_GET, http_mutex},
    {"threadcreate", HTTP_GET, http_threadcreate},
};

struct http_req {
    struct MHD_Connection *conn;
    unsigned method;      /* one enum http_method bit, 0 for any other */
    char *body;
    size_t body_len;
    bool body_too_big;
    bool responded;
};

/* server_lock serialises start and stop (held for the whole of a stop, so
 * a start waits until the old server is gone).  server_stopping is read
 * without it by handlers polling http_client_gone(). */
static pthread_mutex_t server_lock = PTHREAD_MUTEX_INITIALIZER;
static struct MHD_Daemon *server;
static int server_port;
static atomic_bool server_stopping;

/* ---- Address parsing --------------------------------------------------- */

/* Parses a decimal port, 0..65535, digits only. */
static int parse_port(const char *s, in_port_t *port)
{
    unsigned long v = 0;
    if (*s == '\0' || strlen(s) > 5)
        return -EINVAL;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        v = v * 10 + (unsigned long)(*s - '0');
    }
    if (v > 65535)
        return -EINVAL;
    *port = htons((in_port_t)v);
    return 0;
}

/* Parses "A.B.C.D:PORT" or "[IPV6]:PORT" (numeric hosts only: a name would
 * need a resolver and could silently bind somewhere unexpected). */
static int parse_addr(const char *addr, struct sockaddr_storage *ss,
                      socklen_t *len)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon = strrchr(addr, ':');
    size_t host_len;

    if (colon == NULL || colon == addr)
        return -EINVAL;
    host_len = (size_t)(colon - addr);
    if (host_len >= sizeof host)
        return -EINVAL;
    memcpy(host, addr, host_len);
    host[host_len] = '\0';
    memset(ss, 0, sizeof *ss);

    if (host[0] == '[') {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        if (host_len < 3 || host[host_len - 1] != ']')
            return -EINVAL;
        host[host_len - 1] = '\0';
        if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
            return -EINVAL;
        in6->sin6_family = AF_INET6;
        *len = sizeof *in6;
        return parse_port(colon + 1, &in6->sin6_port);
    }
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
        return -EINVAL;
    in4->sin_family = AF_INET;
    *len = sizeof *in4;
    return parse_port(colon + 1, &in4->sin_port);
}

/* A listening socket on ss, or a negative errno. */
static int listen_on(const struct sockaddr_storage *ss, socklen_t len)
{
    int one = 1;
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (ss->ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) ||
        bind(fd, (const struct sockaddr *)ss, len) < 0 ||
        listen(fd, SOMAXCONN) < 0) {
        int err = -errno;
        close(fd);
        return err;
    }
    return fd;
}

/* The port a listening socket is bound to. */
static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
        return -errno;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* ---- Responses ------------------------------------------------------------ */

/* Queues `body` (copied) with the headers every response has, plus the
 * NULL-terminated name/value pairs in `headers`. */
static int send_response(http_req *r, unsigned status,
                         const char *const *headers, const void *body,
                         size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        len, (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ok;

    if (resp == NULL)
        return -ENOMEM;
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    for (; headers[0] != NULL; headers += 2)
        MHD_add_response_header(resp, headers[0], headers[1]);
    ok = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    r->responded = true;
    return ok == MHD_YES ? 0 : -EIO;
}

int http_reply(http_req *r, const char *content_type, const char *attachment,
               const void *body, size_t len)
{
    char disposition[256];
    const char *headers[] = {"Content-Type", content_type,
                             "Content-Disposition", disposition, NULL};
    if (attachment == NULL)
        headers[2] = NULL;
    else if (snprintf(disposition, sizeof disposition,
                      "attachment; filename=\"%s\"", attachment) >=
             (int)sizeof disposition)
        return -EINVAL;
    return send_response(r, MHD_HTTP_OK, headers, body, len);
}

/* Go's error form for an already formatted message; `allow` (may be NULL)
 * is the Allow header a 405 carries. */
static int send_error(http_req *r, unsigned status, const char *allow,
                      const char *msg)
{
    size_t len = strlen(msg);
    char *body = malloc(len + 1);
    const char *headers[] = {"Content-Type", "text/plain; charset=utf-8",
                             "X-Go-Pprof", "1", "Allow", allow, NULL};
    if (body == NULL)
        return -ENOMEM;
    memcpy(body, msg, len);
    body[len] = '\n';
    if (allow == NULL)
        headers[4] = NULL;
    int rc = send_response(r, status, headers, body, len + 1);
    free(body);
    return rc;
}

int http_error(http_req *r, int status, const char *fmt, ...)
{
    char *msg;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -ENOMEM;
    int rc = send_error(r, (unsigned)status, NULL, msg);
    free(msg);
    return rc;
}

/* ---- What handlers ask of a request --------------------------------------- */

const char *http_query(http_req *r, const char *name)
{
    const char *value = NULL;
    size_t value_len;
    /* "?seconds" without '=' is present with no value: report it as "", so
     * that a handler treats it as the empty value it is, not as absent. */
    if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, name,
                                      strlen(name), &value,
                                      &value_len) != MHD_YES)
        return NULL;
    return value != NULL ? value : "";
}

const void *http_body(http_req *r, size_t *len)
{
    *len = r->body_len;
    return r->body;
}

bool http_client_gone(http_req *r)
{
    if (atomic_load(&server_stopping))
        return true;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(
        r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info == NULL)
        return true;
    struct pollfd pfd = {.fd = info->connect_fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pfd, 1, 0) <= 0)
        return false;
    if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
        return true;
    /* Readable but not hung up: either a pipelined request (still there)
     * or an EOF that POLLRDHUP missed; a peek tells them apart. */
    char c;
    ssize_t n = recv(info->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                      errno != EINTR);
}

/* ---- Dispatch --------------------------------------------------------------- */

static unsigned method_bit(const char *method)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0)
        return HTTP_GET;
    if (strcmp(method, MHD_HTTP_METHOD_POST) == 0)
        return HTTP_POST;
    return 0;
}

static const struct http_route *find_route(const char *name)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (strcmp(routes[i].name, name) == 0)
            return &routes[i];
    return NULL;
}

/* The Allow header's value for a route's method bits. */
static const char *allowed_methods(unsigned methods)
{
    switch (methods) {
    case HTTP_GET: return "GET";
    case HTTP_POST: return "POST";
    default: return "GET, POST";
    }
}

/* Routes a complete request (body received) to its handler. */
static int dispatch(http_req *r, const char *url)
{
    if (strncmp(url, HTTP_PREFIX, strlen(HTTP_PREFIX)) != 0)
        return http_error(r, MHD_HTTP_NOT_FOUND, "404 page not found");
    const struct http_route *route = find_route(url + strlen(HTTP_PREFIX));
    if (route == NULL)
        return http_error(r, MHD_HTTP_NOT_FOUND, "Unknown profile");
    if (!(route->methods & r->method))
        return send_error(r, MHD_HTTP_METHOD_NOT_ALLOWED,
                          allowed_methods(route->methods),
                          "Method Not Allowed");
    if (r->body_too_big)
        return http_error(r, MHD_HTTP_CONTENT_TOO_LARGE,
                          "request body larger than %d bytes", HTTP_MAX_BODY);
    int rc = route->handler(r);
    if (!r->responded)
        return http_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s",
                          cpprof_strerror(rc < 0 ? rc : -EIO));
    return rc;
}

/* Keeps up to HTTP_MAX_BODY bytes of the body; past that, remembers only
 * that it was too big, so a huge upload costs no memory. */
static void take_body(http_req *r, const char *data, size_t len)
{
    if (r->body_too_big || r->body_len + len > HTTP_MAX_BODY) {
        r->body_too_big = true;
        return;
    }
    char *grown = realloc(r->body, r->body_len + len + 1);
    if (grown == NULL) {
        r->body_too_big = true;
        return;
    }
    memcpy(grown + r->body_len, data, len);
    r->body = grown;
    r->body_len += len;
    r->body[r->body_len] = '\0';
}

/* libmicrohttpd calls this once when the headers are in, once per chunk of
 * body, and once more with no data: the request is dispatched on that last
 * call, so GET and POST take the same path. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_len, void **con_cls)
{
    http_req *r = *con_cls;
    (void)cls, (void)version;

    if (r == NULL) {
        r = calloc(1, sizeof *r);
        if (r == NULL)
            return MHD_NO;
        r->conn = conn;
        r->method = method_bit(method);
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_len > 0) {
        take_body(r, upload, *upload_len);
        *upload_len = 0;
        return MHD_YES;
    }
    return dispatch(r, url) == 0 ? MHD_YES : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **con_cls, enum MHD_RequestTerminationCode why)
{
    http_req *r = *con_cls;
    (void)cls, (void)conn, (void)why;
    if (r != NULL) {
        free(r->body);
        free(r);
        *con_cls = NULL;
    }
}

/* ---- Lifecycle -------------------------------------------------------------- */

static int start_locked(const char *addr)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int rc = parse_addr(addr, &ss, &len);
    if (rc < 0)
        return rc;
    int fd = listen_on(&ss, len);
    if (fd < 0)
        return fd;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_INTERNAL_POLLING_THREAD |
                     (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    server = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
                              MHD_OPTION_LISTEN_SOCKET, fd,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                              MHD_OPTION_END);
    if (server == NULL) {
        close(fd);
        return -EIO;
    }
    server_port = bound_port(fd);
    return 0;
}

int cpprof_http_start(const char *addr)
{
    int rc;
    if (addr == NULL)
        addr = cfg_str(CFG_HTTP_ADDR);
    pthread_mutex_lock(&server_lock);
    rc = server != NULL ? CPPROF_ERUNNING : start_locked(addr);
    pthread_mutex_unlock(&server_lock);
    return rc;
}

int cpprof_http_stop(void)
{
    int rc = 0;
    pthread_mutex_lock(&server_lock);
    if (server == NULL) {
        rc = CPPROF_ENOTRUNNING;
    } else {
        /* Handlers waiting out a profile see their client "gone" and
         * return, so joining the connection threads takes no longer than
         * one poll interval. */
        atomic_store(&server_stopping, true);
        MHD_stop_daemon(server);
        atomic_store(&server_stopping, false);
        server = NULL;
        server_port = 0;
    }
    pthread_mutex_unlock(&server_lock);
    return rc;
}

int http_port(void)
{
    pthread_mutex_lock(&server_lock);
    int port = server != NULL ? server_port : CPPROF_ENOTRUNNING;
    pthread_mutex_unlock(&server_lock);
    return port;
}
