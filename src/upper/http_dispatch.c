/*
 * http_dispatch.c -- a request, from libmicrohttpd's first call to its
 * completion: the route table (one row per /debug/pprof/ endpoint, with
 * the methods it accepts), the refusals made before any body is read
 * (client certificate, Host, token, body size), what handlers ask of a
 * request, and the routing of a complete request to its handler, on the
 * pool thread or, when it waits out a window, on a window thread
 * (http_window.c).  Handlers live in files of their own (http_profile.c,
 * ...) and see only http.h.
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include "http_server.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "cpprof.h"
#include "util.h"


/* Every endpoint.  The descriptions are Go's (net/http/pprof's
 * profileDescriptions), with "threads" where Go says "goroutines". */
static const http_route routes[] = {
    {"", HTTP_GET, http_index, NULL, NULL},
    {"www/", HTTP_GET, http_www, NULL, NULL},
    {"labels", HTTP_GET, http_labels, NULL, NULL},
    {"accounting", HTTP_GET, http_accounting, NULL, NULL},
    {"metrics", HTTP_GET, http_metrics, NULL, NULL},
    {"wall", HTTP_GET, http_wall, NULL, NULL},
    {"fgprof", HTTP_GET, http_fgprof, NULL, NULL},
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
    {"pid/", HTTP_GET | HTTP_POST, http_relay, NULL, NULL},
    {"trace", HTTP_GET, http_trace,
     "A trace of execution of the current program. You can specify the "
     "duration in the seconds GET parameter. After you get the trace file, "
     "open it in Perfetto (ui.perfetto.dev) to investigate the trace.",
     NULL},
};

/* exit() tears down, under threads that keep running, what handlers use:
 * glibc's _IO_cleanup flushes every FILE without its lock and, after two
 * tries at the lock, unbuffers it anyway (genops.c: "we flush them
 * underneath them"), so a handler writing an open_memstream (index,
 * goroutine, metrics, symbol) or reading /proc/self/maps with getline
 * (symbolize.c, on every profile) can fault; then library destructors
 * (libmicrohttpd's, gnutls's) run.  That was the segfault at exit seen
 * about once in 730 runs with requests in flight.  So the first start
 * registers an atexit handler, which runs before _IO_cleanup and the
 * destructors: it refuses new requests, makes waiting handlers return
 * (http_stopping) and waits, at most EXIT_DRAIN_NS, until every request
 * open (from its URI to its completion) is done, the calling thread's own
 * excepted.  Open means on any connection, a suspended one whose handler
 * runs on a window thread included: its answer is queued by the pool
 * thread once the connection resumes, exit or not (http_on_request).  "The
 * calling thread's own" is the request whose handler runs on it
 * (http_run_handler), not every request of the connections a pool thread
 * serves.  It does not stop the daemon: joining its threads from a
 * thread of the daemon (a handler of the program's that calls exit) would
 * never return. */
#define EXIT_DRAIN_NS 2000000000LL
static atomic_long requests_open;
static atomic_bool process_exiting;
static __thread long requests_open_here; /* handlers running on this thread */

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

static bool client_gone(http_req *r)
{
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

http_end http_request_end(http_req *r)
{
    /* exit() sets both flags: it is the exit that ends the wait. */
    if (atomic_load(&process_exiting))
        return HTTP_PROGRAM_EXITING;
    if (atomic_load(&http_stopping))
        return HTTP_SERVER_STOPPING;
    return client_gone(r) ? HTTP_CLIENT_GONE : HTTP_GOING_ON;
}

/* ---- Dispatch --------------------------------------------------------------- */

/* HEAD is served as GET: libmicrohttpd sends the same headers, with
 * GET's Content-Length, and leaves out the body (Go answers HEAD with
 * GET's headers too). */
static unsigned method_bit(const char *method)
{
    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
        strcmp(method, MHD_HTTP_METHOD_HEAD) == 0)
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

/* What a request's Content-Length fields announce, all of them
 * (libmicrohttpd frames the body by the first alone): every element of
 * every field's list must be a number, the same one (a length given again
 * is that length, RFC 9110 8.6), or the framing is invalid.  Past the
 * largest number, the largest. */
struct announced {
    unsigned long long length;
    bool seen, invalid;
};

/* One element of a Content-Length list, at *p (moved past it). */
static void see_length_element(struct announced *a, const char **p)
{
    const char *s = *p;
    unsigned long long v = 0;
    if (*s < '0' || *s > '9')
        a->invalid = true;
    for (; *s >= '0' && *s <= '9'; s++)
        v = v > (ULLONG_MAX - 9) / 10 ? ULLONG_MAX : v * 10 + (*s - '0');
    if (a->seen && v != a->length)
        a->invalid = true;
    a->length = v;
    a->seen = true;
    *p = s;
}

static enum MHD_Result see_length(void *cls, enum MHD_ValueKind kind,
                                  const char *key, const char *value)
{
    (void)kind;
    struct announced *a = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) != 0)
        return MHD_YES;
    const char *p = value + strspn(value, " \t");
    for (;;) {
        see_length_element(a, &p);
        p += strspn(p, " \t");
        if (*p != ',')
            break;
        p++;
        p += strspn(p, " \t");
    }
    if (*p != '\0')
        a->invalid = true;
    return MHD_YES;
}

/* The announced length (0 without Content-Length); false when the
 * fields disagree or one is not a number: the request's framing is
 * invalid (RFC 9112 6.3), where its body ends cannot be told. */
static bool announced_length(struct MHD_Connection *conn,
                             unsigned long long *length)
{
    struct announced a = {0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, see_length, &a);
    *length = a.length;
    return !a.invalid;
}

/* A request whose body cannot be framed: 400, and the connection is
 * closed, since what follows cannot be told apart from its body (a proxy
 * in front that framed it by the other length would send a smuggled
 * request next). */
static void refuse_framing(http_req *r)
{
    const char *headers[] = {"Content-Type", "text/plain; charset=utf-8",
                             "X-Go-Pprof", "1", "Connection", "close", NULL};
    static const char msg[] = "Bad Request: the Content-Length header "
                              "fields disagree or are not a number\n";
    http_send(r, MHD_HTTP_BAD_REQUEST, headers, msg, sizeof msg - 1);
}

/* Answers a request that cannot be served, as soon as its headers are in,
 * before any body is read: 400 for a body that cannot be framed, 403 for
 * a foreign Host on a loopback server, 401 without the token (offering
 * Bearer and Basic), 413 for an announced body over the limit.  Returns
 * whether it answered. */
static bool refuse_early(http_req *r)
{
    unsigned long long length;
    if (!announced_length(r->conn, &length)) {
        refuse_framing(r);
        return true;
    }
    if (http_srv.tls.ca != NULL && !http_tls_client_verified(r->conn)) {
        http_error(r, MHD_HTTP_FORBIDDEN,
                   "a client certificate signed by the http_tls_ca "
                   "authority is required");
        return true;
    }
    if (!http_host_allowed(r->conn, http_srv.on_loopback, http_srv.port)) {
        http_error(r, MHD_HTTP_FORBIDDEN,
                   "this loopback server answers only loopback Host names "
                   "(localhost, 127.0.0.1, [::1]) with its port; add other "
                   "names to the http_allowed_hosts setting");
        return true;
    }
    if (!http_authorized(r->conn, http_srv.token)) {
        const char *headers[] = {"Content-Type", "text/plain; charset=utf-8",
                                 "X-Go-Pprof", "1", "WWW-Authenticate",
                                 "Bearer", "WWW-Authenticate",
                                 "Basic realm=\"cpprof\", charset=\"UTF-8\"",
                                 NULL};
        static const char msg[] = "Unauthorized\n";
        http_send(r, MHD_HTTP_UNAUTHORIZED, headers, msg, sizeof msg - 1);
        return true;
    }
    if (length > http_srv.max_body) {
        http_error(r, MHD_HTTP_CONTENT_TOO_LARGE,
                   "request body larger than %zu bytes", http_srv.max_body);
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

/* Whether the request holds its thread for a window: a CPU or wall
 * profile, or any ?seconds= (a delta or the labels' CPU summary). */
static bool waits_out_window(http_req *r, const http_route *route)
{
    return route->handler == http_profile || route->handler == http_wall ||
           route->handler == http_fgprof || route->handler == http_trace ||
           route->handler == http_relay ||
           http_query(r, "seconds") != NULL;
}

/* Runs the route's handler; a handler that answered nothing gets a 500
 * naming its error. */
int http_run_handler(http_req *r, const http_route *route)
{
    requests_open_here++; /* this thread's own, should its handler exit() */
    int rc = route->handler(r);
    requests_open_here--;
    if (!r->responded)
        return http_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s",
                          cpprof_strerror(rc < 0 ? rc : -EIO));
    return rc;
}

/* Routes a complete request (body received) to its handler. */
static int dispatch(http_req *r, const char *url)
{
    if (strcmp(url, "/debug/pprof") == 0) {
        /* As Go's ServeMux: the directory without its slash redirects. */
        const char *headers[] = {"Location", HTTP_PREFIX, NULL};
        return http_send(r, MHD_HTTP_MOVED_PERMANENTLY, headers, "", 0);
    }
    /* Prometheus scrapes /metrics by convention: the "metrics" route. */
    if (strcmp(url, "/metrics") == 0)
        url = HTTP_PREFIX "metrics";
    /* fgprof's path, which Grafana Alloy's profile.fgprof scrapes. */
    if (strcmp(url, "/debug/fgprof") == 0)
        url = HTTP_PREFIX "fgprof";
    if (strncmp(url, HTTP_PREFIX, strlen(HTTP_PREFIX)) != 0)
        return http_error(r, MHD_HTTP_NOT_FOUND, "404 page not found");
    r->path = url + strlen(HTTP_PREFIX);
    const http_route *route = find_route(r->path);
    if (route == NULL)
        return http_error(r, MHD_HTTP_NOT_FOUND, "Unknown profile");
    if (!(route->methods & r->method))
        return http_send_error(r, MHD_HTTP_METHOD_NOT_ALLOWED,
                          allowed_methods(route->methods),
                          "Method Not Allowed");
    if (r->body_too_big)
        return http_error(r, MHD_HTTP_CONTENT_TOO_LARGE,
                          "request body larger than %zu bytes",
                          http_srv.max_body);
    if (waits_out_window(r, route)) {
        /* A window costs CPU (a profile): not at another site's asking. */
        if (http_cross_site(r->conn, http_srv.port))
            return http_error(r, MHD_HTTP_FORBIDDEN,
                              "a cross-site request may not start a profile "
                              "window (Sec-Fetch-Site or Origin)");
        return http_window_hand(r, route);
    }
    return http_run_handler(r, route);
}

/* Keeps up to http_srv.max_body bytes of the body; past that, remembers only
 * that it was too big, so a huge upload costs no memory. */
static void take_body(http_req *r, const char *data, size_t len)
{
    if (r->body_too_big || r->body_len + len > http_srv.max_body) {
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
enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn,
                                const char *url, const char *method,
                                const char *version, const char *upload,
                                size_t *upload_len, void **con_cls)
{
    http_req *r = *con_cls;
    (void)cls, (void)version;

    if (r == NULL)
        return MHD_NO; /* http_new_request() failed to allocate */
    /* The answer a window thread made is queued even while exit() drains:
     * that request is open, and the drain waits for it. */
    if (r->pending != NULL)
        return http_queue_pending(r) == 0 ? MHD_YES : MHD_NO;
    if (atomic_load(&process_exiting))
        return MHD_NO; /* exit() is tearing the process down */
    http_label_thread();
    if (r->conn == NULL) {
        r->conn = conn;
        r->method = method_bit(method);
        if (!refuse_early(r))
            http_conns_authorized(conn);
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
void *http_new_request(void *cls, const char *uri,
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
    atomic_fetch_add(&requests_open, 1); /* before on_request reads
                                            process_exiting */
    return r;
}

/* atexit: see process_exiting's comment. */
void http_drain_at_exit(void)
{
    atomic_store(&process_exiting, true);
    atomic_store(&http_stopping, true);
    struct timespec pause = {0, 1000000};
    int64_t deadline = clock_mono_ns() + EXIT_DRAIN_NS;
    while (atomic_load(&requests_open) > requests_open_here &&
           clock_mono_ns() < deadline)
        nanosleep(&pause, NULL);
}

void http_on_completed(void *cls, struct MHD_Connection *conn,
                       void **con_cls, enum MHD_RequestTerminationCode why)
{
    http_req *r = *con_cls;
    (void)cls, (void)conn, (void)why;
    if (r != NULL) {
        if (r->pending != NULL)
            MHD_destroy_response(r->pending);
        free(r->raw_query);
        free(r->body);
        free(r);
        *con_cls = NULL;
        atomic_fetch_sub(&requests_open, 1);
    }
}

/* libmicrohttpd's unescaping, except that %00 stays as it is: a decoded
 * NUL would end the path or value early, so that "heap%00" served heap
 * and "seconds=1%00" read as 1.  Kept encoded, such input is an unknown
 * profile or a bad value, answered as any other.  Returns the new length. */
size_t http_unescape(void *cls, struct MHD_Connection *conn, char *s)
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


/* In a forked child no request is open: their threads stayed in the
 * parent. */
void http_requests_forget_after_fork(void)
{
    atomic_store(&requests_open, 0);
}
