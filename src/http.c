/*
 * http.c -- the embedded HTTP server: lifecycle, routing, Go's response form.
 *
 * libmicrohttpd serves on a fixed pool of http_threads threads (poll), so
 * that a request creates no thread.  A request that waits out a window (a
 * CPU profile, any ?seconds=) would hold its pool thread and every
 * connection that thread serves, so its connection is suspended and the
 * handler runs on one of http_threads window threads, made at start, which
 * resume it when done; a window past those is a 503 naming the setting.
 * Suspension rather than a larger pool: a pool thread blocked for 30 s
 * stalls the keep-alive connections it holds (a Prometheus scrape among
 * them), whatever the pool's size.  All these threads are cpprof's: not
 * counted by threadcreate, labelled pprof_internal=http.  This file owns everything the handlers share: the route table (one row per
 * /debug/pprof/ endpoint, with the methods it accepts), the headers every
 * response carries (X-Content-Type-Options: nosniff; X-Frame-Options and
 * CSP frame-ancestors refusing any frame), and Go's error form
 * (text/plain, X-Go-Pprof: 1, message plus newline) that `go tool pprof`
 * shows to its user.  Handlers live in files of their own (http_profile.c,
 * ...) and see only http.h.
 *
 * We bind the listening socket ourselves rather than let libmicrohttpd do it,
 * so that a failure comes back as a real errno (-EADDRINUSE, -EACCES) and a
 * test binding port 0 can learn the port it got (http_port()).
 */
#define _GNU_SOURCE /* POLLRDHUP, vasprintf */
#include "own.h"
#include "http.h"
#include "symbolize.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "atfork.h"
#include "config.h"
#include "cpprof.h"
#include "thread.h"
#include "warn.h"

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
    /* A request waiting out a window runs on a window thread while its
     * connection is suspended: its response is kept here until the
     * connection is resumed (only libmicrohttpd's thread may queue it). */
    const http_route *route;      /* set when handed to a window thread */
    struct MHD_Response *pending; /* the response it made, not yet queued */
    unsigned pending_status;
    int handler_rc;
    http_req *next_waiting;       /* in the window queue */
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
static bool server_on_loopback; /* then only loopback Host names answered */
static http_tls server_tls;     /* its PEM texts, kept for the server's life */
/* The server's own descriptors (listener first, then libmicrohttpd's),
 * each with the identity it had at start, and the thread that checks them
 * (see "Descriptors the host cannot take"). */
enum { OWN_FDS_MAX = 2 * 64 + 8 }; /* an eventfd a thread, and room */
static struct own_fd {
    int fd;
    dev_t dev;
    ino_t ino;
} own_fds[OWN_FDS_MAX];
static size_t n_own_fds;
static int listen_fd = -1; /* accepted on by the watch thread */
static pthread_t watch_thread;
static bool watching;
static atomic_bool watch_stop;
static atomic_bool server_lost; /* the watch thread stopped the server */
/* Requests waiting out a window now, and how many may: one per window
 * thread.  The queue hands them to those threads. */
static atomic_int windows_open;
static int windows_max;
enum { WINDOW_THREADS_MAX = 64 };
static pthread_t window_threads[WINDOW_THREADS_MAX];
static int n_window_threads;
static pthread_mutex_t window_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t window_ready = PTHREAD_COND_INITIALIZER;
static http_req *window_queue; /* under window_lock */
static bool windows_closing;   /* under window_lock */

/* ---- The server's threads are cpprof's ------------------------------------------
 *
 * The pool's threads and the watch thread are the profiler's, not the
 * program's: they are created with the collectors' guard set, so
 * threadcreate does not count them (nor does heap.c sample what starting
 * them allocates), and they carry the label pprof_internal=http, so that
 * the census and CPU profiles name them and `-tagignore pprof_internal=http`
 * leaves them out.  A pool thread takes the label on its first request (it
 * starts inside libmicrohttpd), a window or watch thread as it starts; the
 * index page reports their CPU time. */

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

/* The server threads that have run (for their CPU time), and the CPU
 * time of those of servers since stopped. */
enum { SERVER_THREADS_MAX = 64 + 1 };
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t server_threads[SERVER_THREADS_MAX];
static size_t n_server_threads;
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

/* Gives the calling server thread its label and counts it, once. */
static void label_server_thread(void)
{
    static __thread bool labelled;
    if (labelled)
        return;
    labelled = true;
    cpprof_set_thread_labels(internal_labels());
    pthread_mutex_lock(&threads_lock);
    if (!threads_closed && n_server_threads < SERVER_THREADS_MAX)
        server_threads[n_server_threads++] = pthread_self();
    pthread_mutex_unlock(&threads_lock);
}

/* Called as the server stops, while its threads still run: their time so
 * far is kept, and they are forgotten before they end. */
static void retire_server_threads(void)
{
    pthread_mutex_lock(&threads_lock);
    for (size_t i = 0; i < n_server_threads; i++)
        retired_cpu_seconds += thread_cpu_seconds(server_threads[i]);
    n_server_threads = 0;
    threads_closed = true;
    pthread_mutex_unlock(&threads_lock);
}

static void open_server_threads(void)
{
    pthread_mutex_lock(&threads_lock);
    threads_closed = false;
    pthread_mutex_unlock(&threads_lock);
}

int http_windows_open(void)
{
    return atomic_load(&windows_open);
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
 * creates are not counted as the program's; the caller's guard is
 * restored.  (The caller's labels stay: switching them would move what
 * the caller allocates meanwhile to another set's accounting.) */
static int as_internal(int (*start)(void *), void *arg)
{
    int busy = own_busy;
    own_busy = 1;
    int rc = start(arg);
    own_busy = busy;
    return rc;
}

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
 * (server_stopping) and waits, at most EXIT_DRAIN_NS, until every request
 * open (from its URI to its completion) is done, the calling thread's own
 * excepted.  Open means on any connection, a suspended one whose handler
 * runs on a window thread included: its answer is queued by the pool
 * thread once the connection resumes, exit or not (on_request).  "The
 * calling thread's own" is the request whose handler runs on it
 * (run_handler), not every request of the connections a pool thread
 * serves.  It does not stop the daemon: joining its threads from a
 * thread of the daemon (a handler of the program's that calls exit) would
 * never return. */
#define EXIT_DRAIN_NS 2000000000LL
static atomic_long requests_open;
static atomic_bool process_exiting;
static __thread long requests_open_here; /* handlers running on this thread */

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
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    0);
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
 * NULL-terminated name/value pairs in `headers`.  No response may be shown
 * in another page's frame (X-Frame-Options for older browsers, CSP's
 * frame-ancestors for newer): a hidden frame of the index would run its
 * scripts, same-origin, for whatever site holds the frame, and a visible
 * one could be overlaid to steal a click on its buttons. */
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
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "frame-ancestors 'none'");
    for (; headers[0] != NULL; headers += 2)
        MHD_add_response_header(resp, headers[0], headers[1]);
    r->responded = true;
    if (r->route != NULL) { /* on a window thread: queued once resumed */
        r->pending = resp;
        r->pending_status = status;
        return 0;
    }
    ok = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
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

int http_reply_gzip(http_req *r, const char *content_type, const void *body,
                    size_t len)
{
    const char *headers[] = {"Content-Type", content_type,
                             "Content-Encoding", "gzip",
                             "Vary", "Accept-Encoding", NULL};
    return send_response(r, MHD_HTTP_OK, headers, body, len);
}

/* Whether an Accept-Encoding list names gzip (or *) without q=0: RFC 9110
 * 12.5.3, parameters other than q ignored. */
static bool accepts_coding(const char *list, const char *coding)
{
    size_t clen = strlen(coding);
    for (const char *p = list; *p;) {
        p += strspn(p, " \t,");
        size_t n = strcspn(p, " \t,;");
        bool match = (n == clen && strncasecmp(p, coding, n) == 0) ||
                     (n == 1 && *p == '*');
        p += n;
        bool refused = false;
        while (*p && *p != ',') {
            p += strspn(p, " \t;");
            if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=')
                refused = strtod(p + 2, NULL) <= 0;
            p += strcspn(p, ";,");
        }
        if (match && !refused)
            return true;
    }
    return false;
}

bool http_accepts_gzip(http_req *r)
{
    const char *v = MHD_lookup_connection_value(
        r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    return v != NULL && accepts_coding(v, "gzip");
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

/* The Content-Length the client announced, or 0. */
static unsigned long long announced_length(struct MHD_Connection *conn)
{
    const char *v = MHD_lookup_connection_value(
        conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    return v != NULL ? strtoull(v, NULL, 10) : 0;
}

/* Answers a request that cannot be served, as soon as its headers are in,
 * before any body is read: 403 for a foreign Host on a loopback server,
 * 401 without the token (offering Bearer and Basic), 413 for an announced
 * body over the limit.  Returns whether it answered. */
static bool refuse_early(http_req *r)
{
    if (server_tls.ca != NULL && !http_tls_client_verified(r->conn)) {
        http_error(r, MHD_HTTP_FORBIDDEN,
                   "a client certificate signed by the http_tls_ca "
                   "authority is required");
        return true;
    }
    if (!http_host_allowed(r->conn, server_on_loopback, server_port)) {
        http_error(r, MHD_HTTP_FORBIDDEN,
                   "this loopback server answers only loopback Host names "
                   "(localhost, 127.0.0.1, [::1]) with its port; add other "
                   "names to the http_allowed_hosts setting");
        return true;
    }
    if (!http_authorized(r->conn, server_token)) {
        const char *headers[] = {"Content-Type", "text/plain; charset=utf-8",
                                 "X-Go-Pprof", "1", "WWW-Authenticate",
                                 "Bearer", "WWW-Authenticate",
                                 "Basic realm=\"cpprof\", charset=\"UTF-8\"",
                                 NULL};
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

/* Whether the request holds its thread for a window: a CPU profile, or
 * any ?seconds= (a delta or the labels' CPU summary). */
static bool waits_out_window(http_req *r, const http_route *route)
{
    return route->handler == http_profile || http_query(r, "seconds") != NULL;
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

/* Runs the route's handler; a handler that answered nothing gets a 500
 * naming its error. */
static int run_handler(http_req *r, const http_route *route)
{
    requests_open_here++; /* this thread's own, should its handler exit() */
    int rc = route->handler(r);
    requests_open_here--;
    if (!r->responded)
        return http_error(r, MHD_HTTP_INTERNAL_SERVER_ERROR, "%s",
                          cpprof_strerror(rc < 0 ? rc : -EIO));
    return rc;
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
    label_server_thread();
    pthread_mutex_lock(&window_lock);
    for (;;) {
        while (window_queue == NULL && !windows_closing)
            pthread_cond_wait(&window_ready, &window_lock);
        if (window_queue == NULL)
            break;
        http_req *r = window_queue;
        window_queue = r->next_waiting;
        pthread_mutex_unlock(&window_lock);
        r->handler_rc = run_handler(r, r->route);
        atomic_fetch_sub(&windows_open, 1);
        MHD_resume_connection(r->conn);
        pthread_mutex_lock(&window_lock);
    }
    pthread_mutex_unlock(&window_lock);
    return NULL;
}

static int create_window_threads(void *arg)
{
    (void)arg;
    windows_closing = false;
    for (n_window_threads = 0; n_window_threads < windows_max;
         n_window_threads++) {
        int rc = pthread_create(&window_threads[n_window_threads], NULL,
                                window_thread, NULL);
        if (rc != 0)
            return -rc;
    }
    return 0;
}

/* Ends the window threads once their requests are done (a stopping
 * server makes every waiting handler return: http_client_gone). */
static void end_window_threads(void)
{
    pthread_mutex_lock(&window_lock);
    windows_closing = true;
    pthread_cond_broadcast(&window_ready);
    pthread_mutex_unlock(&window_lock);
    for (int i = 0; i < n_window_threads; i++)
        pthread_join(window_threads[i], NULL);
    n_window_threads = 0;
}

/* Queues the response a window thread made, on the call libmicrohttpd
 * makes once the connection is resumed. */
static int queue_pending(http_req *r)
{
    enum MHD_Result ok =
        MHD_queue_response(r->conn, r->pending_status, r->pending);
    MHD_destroy_response(r->pending);
    r->pending = NULL;
    return ok == MHD_YES && r->handler_rc == 0 ? 0 : -EIO;
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
    if (waits_out_window(r, route)) {
        /* A window costs CPU (a profile): not at another site's asking. */
        if (http_cross_site(r->conn, server_port))
            return http_error(r, MHD_HTTP_FORBIDDEN,
                              "a cross-site request may not start a profile "
                              "window (Sec-Fetch-Site or Origin)");
        if (!open_window())
            return http_error(r, MHD_HTTP_SERVICE_UNAVAILABLE,
                              "%d requests already wait out a profile "
                              "window, as many as the server has threads "
                              "for (setting http_threads=%d)",
                              windows_max, windows_max);
        hand_to_window_thread(r, route);
        return 0;
    }
    return run_handler(r, route);
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
    /* The answer a window thread made is queued even while exit() drains:
     * that request is open, and the drain waits for it. */
    if (r->pending != NULL)
        return queue_pending(r) == 0 ? MHD_YES : MHD_NO;
    if (atomic_load(&process_exiting))
        return MHD_NO; /* exit() is tearing the process down */
    label_server_thread();
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
    atomic_fetch_add(&requests_open, 1); /* before on_request reads
                                            process_exiting */
    return r;
}

/* atexit: see process_exiting's comment. */
static void drain_requests_at_exit(void)
{
    atomic_store(&process_exiting, true);
    atomic_store(&server_stopping, true);
    struct timespec now, pause = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long deadline = now.tv_sec * 1000000000LL + now.tv_nsec +
                         EXIT_DRAIN_NS;
    while (atomic_load(&requests_open) > requests_open_here &&
           now.tv_sec * 1000000000LL + now.tv_nsec < deadline) {
        nanosleep(&pause, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
    }
}

static void on_completed(void *cls, struct MHD_Connection *conn,
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

/* ---- Descriptors the host cannot take -------------------------------------------
 *
 * The server's descriptors live in the host's table.  A daemon that closes
 * every inherited descriptor and opens its own files would get their
 * numbers, and libmicrohttpd, still polling them, would accept on and read
 * from the daemon's files (its wake-up read of eight bytes moved the
 * file's offset: records written were never read back).  So:
 *   - the listener is moved to a high number (fd_floor()), and in zero-code
 *     mode, where the process has one thread at start, every lower free
 *     number is held while libmicrohttpd starts so that its own
 *     descriptors land high too: a program meets them only after opening
 *     about a thousand files of its own;
 *   - a watch thread checks every WATCH_MS that each descriptor is still
 *     the object it was (the listener also before each accept: the watch
 *     thread is the one that accepts, see http_conns.c).  When one was
 *     closed, it puts a harmless eventfd back at that exact number
 *     (F_DUPFD at a free number returns that number, so nothing the host
 *     opened is ever replaced) and stops the
 *     server, saying so once on stderr.  libmicrohttpd's threads are then
 *     asleep in poll() on the objects that were closed, which poll keeps
 *     alive and which nothing can wake: MHD_stop_daemon() would
 *     wait for it for ever.  So it is left asleep, and should it ever wake
 *     it finds only our placeholders at its numbers.  The old listener
 *     keeps its port until the process exits.  When the number already names
 *     something of the host's, stopping would close it; the server is then
 *     left as it is and stderr says that too. */

enum { WATCH_MS = 100, FD_FLOOR_MAX = 1000, FD_FLOOR_ROOM = 24 };

/* The lowest number the server's descriptors take: near the top of the
 * soft RLIMIT_NOFILE (leaving room for a few of ours), at most
 * FD_FLOOR_MAX; 0 when the table is too small to spare it. */
static int fd_floor(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 2 * FD_FLOOR_ROOM)
        return 0;
    rlim_t top = rl.rlim_cur - FD_FLOOR_ROOM;
    return top < FD_FLOOR_MAX ? (int)top : FD_FLOOR_MAX;
}

/* fd moved to a close-on-exec number at or above `floor` (fd is closed),
 * or fd itself when no such number is free. */
static int move_high(int fd, int floor)
{
    int high = floor > fd ? fcntl(fd, F_DUPFD_CLOEXEC, floor) : -1;
    if (high < 0)
        return fd;
    close(fd);
    return high;
}

/* Holds every free number below `floor` (with duplicates of `fd`), so that
 * descriptors opened meanwhile land at or above it.  Only while the
 * process has one thread: another thread opening a file would get a high
 * number, or none.  Returns how many are held, in held[] (malloc'd). */
static size_t hold_low_numbers(int fd, int floor, int **held)
{
    size_t n = 0;
    *held = malloc((size_t)floor * sizeof **held);
    for (int d; *held != NULL && n < (size_t)floor &&
                (d = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0;) {
        if (d >= floor) {
            close(d);
            break;
        }
        (*held)[n++] = d;
    }
    return n;
}

static void release_numbers(int *held, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(held[i]);
    free(held);
}

/* Records fd and the object it names now as one of the server's. */
static void own_fd(int fd)
{
    struct stat st;
    if (n_own_fds < OWN_FDS_MAX && fstat(fd, &st) == 0)
        own_fds[n_own_fds++] = (struct own_fd){fd, st.st_dev, st.st_ino};
}

/* Whether the descriptor `name` of /proc/self/fd (open as dir) is an anonymous
 * inode (eventfd, epoll): what libmicrohttpd opens for itself. */
static bool anon_inode(DIR *dir, const char *name)
{
    char link[64];
    ssize_t n = readlinkat(dirfd(dir), name, link, sizeof link - 1);
    return n > 0 && strncmp(link, "anon_inode:", 11) == 0;
}

/* Records the descriptors libmicrohttpd opened as it started: anonymous
 * inodes not open before (before[] lists those, ending with -1). */
static void own_new_fds(const int *before)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        bool old = e->d_name[0] == '.' || fd == dirfd(d);
        for (const int *b = before; *b >= 0 && !old; b++)
            old = *b == fd;
        if (!old && anon_inode(d, e->d_name))
            own_fd(fd);
    }
    closedir(d);
}

/* The numbers open now, ending with -1 (malloc'd), or NULL. */
static int *open_fds(void)
{
    size_t n = 0, cap = 16;
    int *fds = malloc(cap * sizeof *fds);
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; fds != NULL && d != NULL && (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == dirfd(d))
            continue;
        if (n + 1 == cap) {
            int *grown = realloc(fds, (cap *= 2) * sizeof *fds);
            if (grown == NULL) {
                free(fds);
                fds = NULL;
                break;
            }
            fds = grown;
        }
        fds[n++] = fd;
    }
    if (d != NULL)
        closedir(d);
    if (fds != NULL)
        fds[n] = -1;
    return fds;
}

enum fd_fate { FD_KEPT, FD_CLOSED, FD_TAKEN };

static enum fd_fate fate_of(const struct own_fd *o)
{
    struct stat st;
    if (fstat(o->fd, &st) != 0)
        return errno == EBADF ? FD_CLOSED : FD_KEPT;
    return st.st_dev == o->dev && st.st_ino == o->ino ? FD_KEPT : FD_TAKEN;
}

/* Puts a placeholder at o's number if it is still free; whether it did. */
static bool refill(const struct own_fd *o)
{
    int ph = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ph < 0)
        return false;
    int at = ph == o->fd ? ph : fcntl(ph, F_DUPFD_CLOEXEC, o->fd);
    if (at != ph)
        close(ph);
    if (at == o->fd)
        return true;
    if (at >= 0)
        close(at); /* the number was taken meanwhile: the host's now */
    return false;
}

/* Called by the watch thread: a lost descriptor is dealt with as the
 * section's comment says.  Returns whether the server was given up. */
static bool stop_if_lost(void)
{
    size_t lost = n_own_fds;
    for (size_t i = 0; i < n_own_fds && lost == n_own_fds; i++)
        if (fate_of(&own_fds[i]) != FD_KEPT)
            lost = i;
    if (lost == n_own_fds)
        return false;
    bool safe = true;
    for (size_t i = 0; i < n_own_fds; i++)
        if (fate_of(&own_fds[i]) == FD_TAKEN ||
            (fate_of(&own_fds[i]) == FD_CLOSED && !refill(&own_fds[i])))
            safe = false;
    /* Handlers waiting out a profile end, as on a stop. */
    atomic_store(&server_stopping, true);
    if (safe)
        warn_stderr("cpprof: the HTTP server's %s (descriptor %d) was "
                "closed by the program; the server has stopped\n",
                lost == 0 ? "listening socket" : "descriptor",
                own_fds[lost].fd);
    else
        warn_stderr("cpprof: the HTTP server's descriptor %d was closed "
                "and its number reused by the program; the server has "
                "stopped, but its thread may still use that number\n",
                own_fds[lost].fd);
    return true;
}

static long long monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* Accepts the connection waiting on the listener (http_conns.c); returns
 * whether to leave the listener unpolled until the next tick: accept
 * failed, as at the descriptor limit, where the client stays queued and
 * the listener readable.  Said once on stderr. */
static bool accept_or_back_off(void)
{
    static atomic_bool said;
    int rc = http_conns_accept(server, listen_fd);
    if (rc < 0 && !atomic_exchange(&said, true))
        warn_stderr("cpprof: the HTTP server cannot accept a connection: "
                    "%s; it leaves it queued and tries again every %d ms\n",
                    cpprof_strerror(rc), WATCH_MS);
    return rc < 0;
}

/* The watch thread also accepts the server's connections: it polls the
 * listener while there is room for one more (http_conns_room) and it is
 * not backing off, and every WATCH_MS checks the server's descriptors and
 * the connections' time to be authorized.  The listener is checked before
 * every accept too, so that a number the program took over is never
 * accepted on. */
static void *watch_fds(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "cpprof-watch");
    label_server_thread();
    long long next_tick = monotonic_ms() + WATCH_MS;
    bool back_off = false;
    while (!atomic_load(&watch_stop)) {
        long long wait = next_tick - monotonic_ms();
        struct pollfd p = {.fd = listen_fd, .events = POLLIN};
        nfds_t n = !back_off && http_conns_room();
        int ready = poll(&p, n, wait > 0 ? (int)wait : 0);
        back_off = false;
        if (atomic_load(&watch_stop))
            break;
        bool tick = monotonic_ms() >= next_tick;
        bool listener_moved = n_own_fds > 0 && fate_of(&own_fds[0]) != FD_KEPT;
        if ((tick || listener_moved) && stop_if_lost()) {
            atomic_store(&server_lost, true);
            break;
        }
        if (tick) {
            http_conns_tick();
            symbolize_release_if_idle();
            next_tick = monotonic_ms() + WATCH_MS;
        }
        if (ready == 1)
            back_off = !(p.revents & POLLIN) || accept_or_back_off();
    }
    return NULL;
}

static int create_watch_thread(void *arg)
{
    (void)arg;
    return -pthread_create(&watch_thread, NULL, watch_fds, NULL);
}

static int start_watch(void)
{
    atomic_store(&watch_stop, false);
    atomic_store(&server_lost, false);
    int rc = as_internal(create_watch_thread, NULL);
    watching = rc == 0;
    return rc;
}

/* Ends the watch thread; returns whether it had given the server up (its
 * thread cannot be joined). */
static bool end_watch(void)
{
    if (!watching)
        return false;
    atomic_store(&watch_stop, true); /* seen within WATCH_MS */
    pthread_join(watch_thread, NULL);
    watching = false;
    n_own_fds = 0;
    return atomic_load(&server_lost);
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

/* The server's settings; a refused value among them keeps it from starting
 * (fail closed): a token with a stray \r must not leave the server open to
 * everyone, nor a bad limit leave it with one nobody chose. */
static const cfg_id server_settings[] = {
    CFG_HTTP_ADDR, CFG_HTTP_ALLOW_REMOTE, CFG_HTTP_REQUIRE_TOKEN,
    CFG_HTTP_TOKEN, CFG_HTTP_MAX_CONNECTIONS, CFG_HTTP_CONNECTION_TIMEOUT,
    CFG_HTTP_HEADER_TIMEOUT, CFG_HTTP_MAX_BODY, CFG_HTTP_CMDLINE,
    CFG_HTTP_THREADS, CFG_HTTP_ALLOWED_HOSTS, CFG_HTTP_TLS_CERT, CFG_HTTP_TLS_KEY,
    CFG_HTTP_TLS_CA,
};

/* The first server setting whose value was refused, or -1. */
static int refused_server_setting(void)
{
    for (size_t i = 0; i < sizeof server_settings / sizeof *server_settings;
         i++)
        if (cfg_refused(server_settings[i]))
            return (int)server_settings[i];
    return -1;
}

/* libmicrohttpd's connection notification. */
static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    if (server_tls.ca != NULL)
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
 * (open_window).  libmicrohttpd divides its connection limit among the
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
                     (server_tls.cert != NULL ? MHD_USE_TLS : 0) |
                     (family == AF_INET6 ? MHD_USE_IPv6 : 0);
    /* HTTPS when a certificate is set; the CA, when set, makes
     * libmicrohttpd ask clients for theirs, on_connection makes the
     * handshake fail without one, and refuse_early checks it. */
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_CERT_CALLBACK, (intptr_t)http_tls_certificate,
         (void *)http_tls_certificate},
        {MHD_OPTION_HTTPS_MEM_TRUST, 0, server_tls.ca},
        {MHD_OPTION_END, 0, NULL},
    };
    if (server_tls.cert == NULL)
        tls[0].option = MHD_OPTION_END;
    else if (server_tls.ca == NULL)
        tls[1].option = MHD_OPTION_END;
    /* The timeout counts idle time (a client trickling its request or not
     * reading the answer), never a handler's own wait for a profile.  No
     * listening socket: the watch thread accepts (http_conns.c). */
    return MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, NULL,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, new_request, NULL,
        MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
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
    open_server_threads();
    fd = move_high(fd, floor);
    server_port = bound_port(fd); /* before any request checks its Host */
    int *before = open_fds();
    size_t nheld = one_thread ? hold_low_numbers(fd, floor, &held) : 0;
    unsigned threads = (unsigned)cfg_int(CFG_HTTP_THREADS),
             max_conns = (unsigned)cfg_int(CFG_HTTP_MAX_CONNECTIONS);
    if (threads > max_conns)
        threads = max_conns > 1 ? max_conns : 2;
    windows_max = (int)cfg_int(CFG_HTTP_THREADS);
    struct daemon_start ds = {family, threads, NULL};
    int rc = http_conns_open(max_conns,
                             (unsigned)cfg_int(CFG_HTTP_HEADER_TIMEOUT));
    if (before != NULL && rc == 0)
        as_internal(run_start_daemon, &ds);
    server = ds.daemon;
    release_numbers(held, nheld);
    if (server != NULL) {
        own_fd(fd);
        own_new_fds(before);
    }
    free(before);
    if (server == NULL) {
        http_conns_close();
        close(fd);
        return rc < 0 ? rc : -EIO;
    }
    listen_fd = fd;
    rc = as_internal(create_window_threads, NULL);
    if (rc == 0)
        rc = start_watch();
    if (rc < 0) {
        end_window_threads();
        MHD_stop_daemon(server);
        http_conns_close();
        close_listener();
        server = NULL;
        n_own_fds = 0;
        return rc;
    }
    return 0;
}

static int start_locked(const char *addr, bool one_thread)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (refused_server_setting() >= 0)
        return CPPROF_EREFUSED;
    int rc = addr_parse(addr, &ss, &len);
    if (rc < 0)
        return rc;
    if ((rc = choose_token(&ss, &server_token)) < 0)
        return rc;
    server_on_loopback = is_loopback(&ss);
    if ((rc = http_tls_load(&server_tls)) < 0) {
        free(server_token);
        return rc;
    }
    int fd = listen_on(&ss, len);
    server_max_body = (size_t)cfg_int(CFG_HTTP_MAX_BODY);
    rc = fd < 0 ? fd : start_on(fd, ss.ss_family, one_thread);
    if (rc < 0) {
        free(server_token);
        http_tls_free(&server_tls);
        return rc;
    }
    static bool drain_registered; /* under server_lock */
    if (!drain_registered)
        drain_registered = atexit(drain_requests_at_exit) == 0;
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
    if (server != NULL) {
        if (!atomic_load(&server_lost)) /* else the number may be the host's */
            close_listener();
        server = NULL;
        server_port = 0;
        server_token = NULL;
        server_tls = (http_tls){NULL, NULL, NULL};
    }
    watching = false;
    n_own_fds = 0;
    n_window_threads = 0;
    n_server_threads = 0;
    window_queue = NULL;
    atomic_store(&windows_open, 0);
    atomic_store(&requests_open, 0); /* their threads stayed in the parent */
    atomic_store(&server_lost, false);
    http_conns_forget_after_fork();
    window_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    threads_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
    window_ready = (pthread_cond_t)PTHREAD_COND_INITIALIZER;
    pthread_mutex_unlock(&server_lock);
}

/* Starts the server unless one runs. */
static int start(const char *addr, bool one_thread)
{
    int rc;
    if (addr == NULL)
        addr = cfg_str(CFG_HTTP_ADDR);
    static const atfork_handlers on_fork = {
        http_atfork_prepare, http_atfork_parent, http_forget_after_fork};
    atfork_add(ATFORK_HTTP, &on_fork);
    pthread_mutex_lock(&server_lock);
    /* libmicrohttpd's threads, created now, are cpprof's own for life:
     * what they allocate is not the program's (collect.h). */
    own_work_enter();
    rc = server != NULL ? CPPROF_ERUNNING : start_locked(addr, one_thread);
    own_work_leave();
    pthread_mutex_unlock(&server_lock);
    return rc;
}

int cpprof_http_start(const char *addr)
{
    return start(addr, false);
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
        retire_server_threads();
        end_window_threads();
        bool given_up = end_watch();
        if (!given_up) {
            MHD_stop_daemon(server);
            http_conns_close();
            close_listener();
        }
        listen_fd = -1; /* given up: its number may be the program's now */
        atomic_store(&server_stopping, false);
        server = NULL;
        server_port = 0;
        free(server_token);
        server_token = NULL;
        if (given_up) /* its threads may still point at the texts */
            server_tls = (http_tls){NULL, NULL, NULL};
        http_tls_free(&server_tls);
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

/* Zero-code mode's variables taken out of the environment, and by whom
 * (http_zero_code_env). */
static const char *zero_code_vars[HTTP_ZERO_CODE_VARS];
static size_t n_zero_code_vars;
static pid_t zero_code_owner;

size_t http_zero_code_env(const char *vars[HTTP_ZERO_CODE_VARS],
                          pid_t *owner)
{
    for (size_t i = 0; i < n_zero_code_vars; i++)
        vars[i] = zero_code_vars[i];
    *owner = zero_code_owner;
    return n_zero_code_vars;
}

/* Removes every NAME=... entry from the process's environment in place,
 * keeping the first (the one getenv saw) for an exec of this process.
 * Not unsetenv(): a program may define its own (bash does, over its shell
 * variables, which it has not even set up while constructors run), and
 * the dynamic linker gives cpprof's call to it, which then leaves the
 * variable to every child.  glibc's unsetenv also shifts the array in
 * place, so environ and main's envp (the same array) both lose it. */
static void take_from_environ(const char *name)
{
    size_t len = strlen(name);
    const char *taken = NULL;
    char **to = environ;
    for (char **from = environ; from != NULL && *from != NULL; from++) {
        if (strncmp(*from, name, len) != 0 || (*from)[len] != '=')
            *to++ = *from;
        else if (taken == NULL)
            taken = *from;
    }
    if (to != NULL)
        *to = NULL;
    if (taken != NULL && n_zero_code_vars < HTTP_ZERO_CODE_VARS) {
        zero_code_vars[n_zero_code_vars++] = taken;
        zero_code_owner = getpid();
    }
}

/* Zero-code mode: `LD_PRELOAD=libcpprof.so CPPROF_HTTP=HOST:PORT program`
 * serves /debug/pprof/ from any dynamically linked program that never heard
 * of cpprof.  A constructor without a priority runs after every prioritised
 * one, so the settings (config_load) and the interposers are ready.  The
 * variables are removed first, while the process still has one thread, so
 * that programs it starts do not all fight for the same port, nor learn the
 * token (config_load has read it); an exec of this process gets them back
 * (execinterpose.c). */
__attribute__((constructor)) static void http_serve_from_load(void)
{
    cfg_freeze(CFG_HTTP);
    const char *addr = cfg_str(CFG_HTTP);
    if (addr[0] == '\0')
        return;
    take_from_environ("CPPROF_HTTP");
    take_from_environ("CPPROF_HTTP_TOKEN");
    int rc = start(addr, true);
    if (rc == CPPROF_EREFUSED) {
        char var[64];
        cfg_env_name((cfg_id)refused_server_setting(), var, sizeof var);
        warn_stderr("cpprof: not serving CPPROF_HTTP=%s: %s was refused, "
                "and the server does not start without the value asked "
                "for\n", addr, var);
    } else if (rc < 0) {
        warn_stderr("cpprof: cannot serve CPPROF_HTTP=%s: %s\n", addr,
                cpprof_strerror(rc));
    }
}
