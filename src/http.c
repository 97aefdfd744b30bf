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
#include <limits.h>
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

#include "addr.h"
#include "config.h"
#include "cpprof.h"

#define HTTP_PREFIX "/debug/pprof/"

/* Every endpoint.  The descriptions are Go's (net/http/pprof's
 * profileDescriptions), with "threads" where Go says "goroutines". */
static const http_route routes[] = {
    {"", HTTP_GET, http_index, NULL, NULL},
    {"www/", HTTP_GET, http_www, NULL, NULL},
    {"labels", HTTP_GET, http_labels, NULL, NULL},
    {"accounting", HTTP_GET, http_accounting, NULL, NULL},
    {"metrics", HTTP_GET, http_metrics, NULL, NULL},
    {"profile", HTTP_GET, http_profile,
     "CPU profile. You can specify the duration in the seconds GET "
     "parameter. After you get the profile file, use the go tool pprof "
     "command to investigate the profile.", NULL},
    {"goroutine", HTTP_GET, http_goroutine,
     "Stack traces of all current threads. Use debug=2 as a query "
     "parameter to export in the same format as an unrecovered panic.",
     http_count_threads},
    {"heap", HTTP_GET, http_heap,
     "A sampling of memory allocations of live objects. You can specify "
     "the gc GET parameter to run GC before taking the heap sample.",
     http_count_heap},
    {"allocs", HTTP_GET, http_allocs,
     "A sampling of all past memory allocations", http_count_heap},
    {"block", HTTP_GET, http_block,
     "Stack traces that led to blocking on synchronization primitives",
     http_count_block},
    {"mutex", HTTP_GET, http_mutex,
     "Stack traces of holders of contended mutexes", http_count_mutex},
    {"threadcreate", HTTP_GET, http_threadcreate,
     "Stack traces that led to the creation of new OS threads",
     http_count_threadcreate},
    {"cmdline", HTTP_GET, http_cmdline,
     "The command line invocation of the current program", NULL},
    {"symbol", HTTP_GET | HTTP_POST, http_symbol,
     "Maps given program counters to function names. Counters can be "
     "specified in a GET raw query or POST body, multiple counters are "
     "separated by '+'.", NULL},
};

struct http_req {
    struct MHD_Connection *conn;
    unsigned method;      /* one enum http_method bit, 0 for any other */
    char *raw_query;      /* as sent, without '?' */
    const char *path;     /* after HTTP_PREFIX, set at dispatch */
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
/* Fixed for the server's life at start: the bearer token every request
 * must carry ("" when none is needed) and the body limit. */
static char *server_token;
static size_t server_max_body;

/* 127.0.0.0/8 or ::1: only this machine can connect. */
static bool is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(
            &((const struct sockaddr_in6 *)ss)->sin6_addr);
    return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) ==
           127;
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

int http_query_long(http_req *r, const char *name, long min, long max,
                    long *out)
{
    const char *s = http_query(r, name);
    long v = 0;
    if (s == NULL)
        return 1;
    if (*s == '\0')
        return -EINVAL;
    for (; *s; s++) {
        int digit = *s - '0';
        if (digit < 0 || digit > 9 || v > (LONG_MAX - digit) / 10)
            return -EINVAL;
        v = v * 10 + digit;
    }
    if (v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

const void *http_body(http_req *r, size_t *len)
{
    *len = r->body_len;
    return r->body;
}

const char *http_raw_query(http_req *r)
{
    return r->raw_query != NULL ? r->raw_query : "";
}

bool http_is_post(http_req *r)
{
    return r->method == HTTP_POST;
}

const char *http_path(http_req *r)
{
    return r->path;
}

const http_route *http_routes(size_t *n)
{
    *n = sizeof routes / sizeof routes[0];
    return routes;
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

/* The route serving `name`: an exact row, or a row "DIR/" for any name
 * under DIR/. */
static const http_route *find_route(const char *name)
{
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++) {
        const char *rn = routes[i].name;
        size_t len = strlen(rn);
        if (len > 0 && rn[len - 1] == '/' ? strncmp(rn, name, len) == 0
                                          : strcmp(rn, name) == 0)
            return &routes[i];
    }
    return NULL;
}

/* Compares without an early exit, so the time taken does not tell a client
 * how much of a guessed token was right. */
static bool same_secret(const char *given, const char *secret)
{
    size_t n = strlen(secret), given_len = strlen(given);
    unsigned char diff = given_len != n;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)secret[i] ^
                (unsigned char)(i < given_len ? given[i] : 0);
    return diff == 0;
}

/* Whether the request may be served: always when the server needs no
 * token, else only with "Authorization: Bearer <token>". */
static bool authorized(struct MHD_Connection *conn)
{
    if (server_token[0] == '\0')
        return true;
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_AUTHORIZATION);
    static const char scheme[] = "Bearer ";
    return auth != NULL && strncmp(auth, scheme, sizeof scheme - 1) == 0 &&
           same_secret(auth + sizeof scheme - 1, server_token);
}

/* The Content-Length the client announced, or 0. */
static unsigned long long announced_length(struct MHD_Connection *conn)
{
    const char *v = MHD_lookup_connection_value(
        conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return v != NULL ? strtoull(v, NULL, 10) : 0;
}

/* Answers a request that cannot be served, as soon as its headers are in,
 * before any body is read: 401 without the token, 413 for an announced
 * body over the limit.  Returns whether it answered. */
static bool refuse_early(http_req *r)
{
    if (!authorized(r->conn)) {
        const char *headers[] = {"Content-Type", "text/plain; charset=utf-8",
                                 "X-Go-Pprof", "1", "WWW-Authenticate",
                                 "Bearer", NULL};
        static const char msg[] = "Unauthorized\n";
        send_response(r, MHD_HTTP_UNAUTHORIZED, headers, msg, sizeof msg - 1);
        return true;
    }
    if (announced_length(r->conn) > server_max_body) {
        http_error(r, MHD_HTTP_CONTENT_TOO_LARGE,
                   "request body larger than %zu bytes", server_max_body);
        return true;
    }
    return false;
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
    if (strcmp(url, "/debug/pprof") == 0) {
        /* As Go's ServeMux: the directory without its slash redirects. */
        const char *headers[] = {"Location", HTTP_PREFIX, NULL};
        return send_response(r, MHD_HTTP_MOVED_PERMANENTLY, headers, "", 0);
    }
    /* Prometheus scrapes /metrics by convention: the "metrics" route. */
    if (strcmp(url, "/metrics") == 0)
        url = HTTP_PREFIX "metrics";
    if (strncmp(url, HTTP_PREFIX, strlen(HTTP_PREFIX)) != 0)
        return http_error(r, MHD_HTTP_NOT_FOUND, "404 page not found");
    r->path = url + strlen(HTTP_PREFIX);
    const http_route *route = find_route(r->path);
    if (route == NULL)
        return http_error(r, MHD_HTTP_NOT_FOUND, "Unknown profile");
    if (!(route->methods & r->method))
        return send_error(r, MHD_HTTP_METHOD_NOT_ALLOWED,
                          allowed_methods(route->methods),
                          "Method Not Allowed");
    if (r->body_too_big)
        return http_error(r, MHD_HTTP_CONTENT_TOO_LARGE,
                          "request body larger than %zu bytes",
                          server_max_body);
    int rc = route->handler(r);
    if (!r->responded)
        return http_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s",
                          cpprof_strerror(rc < 0 ? rc : -EIO));
    return rc;
}

/* Keeps up to server_max_body bytes of the body; past that, remembers only
 * that it was too big, so a huge upload costs no memory. */
static void take_body(http_req *r, const char *data, size_t len)
{
    if (r->body_too_big || r->body_len + len > server_max_body) {
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

    if (r == NULL)
        return MHD_NO; /* new_request() failed to allocate */
    if (r->conn == NULL) {
        r->conn = conn;
        r->method = method_bit(method);
        refuse_early(r);
        return MHD_YES;
    }
    if (r->responded) {
        *upload_len = 0; /* refused early: the body is dropped unread */
        return MHD_YES;
    }
    if (*upload_len > 0) {
        take_body(r, upload, *upload_len);
        *upload_len = 0;
        return MHD_YES;
    }
    return dispatch(r, url) == 0 ? MHD_YES : MHD_NO;
}

/* libmicrohttpd's first call for a request, with the URI exactly as sent:
 * the only place the raw query string can be had (later calls see it
 * decoded and split).  What it returns becomes the request's *con_cls. */
static void *new_request(void *cls, const char *uri,
                         struct MHD_Connection *conn)
{
    (void)cls, (void)conn;
    http_req *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    const char *q = strchr(uri, '?');
    r->raw_query = strdup(q != NULL ? q + 1 : "");
    if (r->raw_query == NULL) {
        free(r);
        return NULL;
    }
    return r;
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **con_cls, enum MHD_RequestTerminationCode why)
{
    http_req *r = *con_cls;
    (void)cls, (void)conn, (void)why;
    if (r != NULL) {
        free(r->raw_query);
        free(r->body);
        free(r);
        *con_cls = NULL;
    }
}

/* ---- Lifecycle -------------------------------------------------------------- */

/* The token a server on ss will require, in *token (malloc'd): the
 * "http_token" setting ("" for none).  Profiles and the command line can
 * hold secrets, so anything but loopback needs "http_allow_remote", and
 * then a token unless "http_require_token" is 0. */
static int choose_token(const struct sockaddr_storage *ss, char **token)
{
    const char *t = cfg_str(CFG_HTTP_TOKEN);
    if (!is_loopback(ss)) {
        if (!cfg_int(CFG_HTTP_ALLOW_REMOTE))
            return CPPROF_EREMOTE;
        if (t[0] == '\0' && cfg_int(CFG_HTTP_REQUIRE_TOKEN))
            return CPPROF_ENOTOKEN;
    }
    *token = strdup(t);
    return *token != NULL ? 0 : -ENOMEM;
}

/* libmicrohttpd's unescaping, except that %00 stays as it is: a decoded
 * NUL would end the path or value early, so that "heap%00" served heap
 * and "seconds=1%00" read as 1.  Kept encoded, such input is an unknown
 * profile or a bad value, answered as any other.  Returns the new length. */
static size_t unescape_keeping_nul(void *cls, struct MHD_Connection *conn,
                                   char *s)
{
    (void)cls, (void)conn;
    static const char hex[] = "0123456789abcdef";
    char *out = s;
    for (const char *in = s; *in; in++) {
        const char *hi, *lo;
        if (in[0] == '%' && in[1] && in[2] &&
            (hi = strchr(hex, in[1] | 0x20)) && (lo = strchr(hex, in[2] | 0x20)) &&
            (hi != hex || lo != hex)) {
            *out++ = (char)((hi - hex) << 4 | (lo - hex));
            in += 2;
        } else {
            *out++ = *in;
        }
    }
    *out = '\0';
    return (size_t)(out - s);
}

static int start_locked(const char *addr)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int rc = addr_parse(addr, &ss, &len);
    if (rc < 0)
        return rc;
    if ((rc = choose_token(&ss, &server_token)) < 0)
        return rc;
    int fd = listen_on(&ss, len);
    if (fd < 0) {
        free(server_token);
        return fd;
    }
    server_max_body = (size_t)cfg_int(CFG_HTTP_MAX_BODY);
    /* MHD_USE_POLL: libmicrohttpd's default, select(), drops every
     * connection whose fd is 1024 or more, and the host process may well
     * hold that many (test/http_badinput's 1,000 connections found it). */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
                     MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    /* The timeout counts idle time (a client trickling its request or not
     * reading the answer), never a handler's own wait for a profile. */
    server = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
        MHD_OPTION_URI_LOG_CALLBACK, new_request, NULL,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
        MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)cfg_int(CFG_HTTP_MAX_CONNECTIONS),
        MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg_int(CFG_HTTP_CONNECTION_TIMEOUT), MHD_OPTION_END);
    if (server == NULL) {
        close(fd);
        free(server_token);
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
        free(server_token);
        server_token = NULL;
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

/* Zero-code mode: `LD_PRELOAD=libcpprof.so CPPROF_HTTP=HOST:PORT program`
 * serves /debug/pprof/ from any dynamically linked program that never heard
 * of cpprof.  A constructor without a priority runs after every prioritised
 * one, so the settings (config_load) and the interposers are ready.  The
 * variable is removed first, while the process still has one thread, so
 * that programs it starts do not all fight for the same port. */
__attribute__((constructor)) static void http_serve_from_load(void)
{
    cfg_freeze(CFG_HTTP);
    const char *addr = cfg_str(CFG_HTTP);
    if (addr[0] == '\0')
        return;
    unsetenv("CPPROF_HTTP");
    int rc = cpprof_http_start(addr);
    if (rc < 0)
        fprintf(stderr, "cpprof: cannot serve CPPROF_HTTP=%s: %s\n", addr,
                cpprof_strerror(rc));
}
