/*
 * http.h -- what an endpoint handler sees of the embedded HTTP server: its
 * request, the replies in Go's form, the route table, and the handlers.
 *
 * Each endpoint is a handler function in a file of its own (http_profile.c,
 * ...), listed in the route table (http_dispatch.c).  The server's
 * internals are in http_server.h, which no handler includes, so that
 * handlers compile without libmicrohttpd's or GnuTLS's headers.  Connections
 * are accepted by the server's watch thread and served by a fixed pool of
 * libmicrohttpd threads; a handler that waits out a window (a CPU profile,
 * any ?seconds=) runs on a window thread while its connection is
 * suspended, so a 30-second profile holds up no other client.
 */
#ifndef CPPROF_HTTP_H
#define CPPROF_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct http_req http_req;

/* A query parameter's value, or NULL when absent. */
const char *http_query(http_req *r, const char *name);

/* Parses query parameter `name` as a decimal integer in min..max (digits
 * only) into *out.  Returns 0, 1 when the parameter is absent (*out
 * untouched), or -EINVAL for a bad value, which the caller answers with a
 * 400 naming the parameter. */
int http_query_long(http_req *r, const char *name, long min, long max,
                    long *out);

/* Sends a 200 response.  `attachment` (may be NULL) becomes
 * Content-Disposition: attachment; filename="<attachment>".  Every reply
 * counts against http_reply_kb until its client has read it (http_reply.c):
 * a large one is held gzip'd (sent so to a client that accepts gzip,
 * inflated as it is read to one that does not), and answered 503 with
 * Retry-After instead when it would pass the limit. */
int http_reply(http_req *r, const char *content_type, const char *attachment,
               const void *body, size_t len);

/* A reply body written piece by piece and compressed as it comes, for a
 * reply too large to make whole first (a trace): open, write (0, or the
 * first error, which later writes return too), then http_reply_out, which
 * sends it as http_reply would and takes it, or http_out_free. */
typedef struct http_out http_out;
int http_out_open(http_out **out);
int http_out_write(http_out *b, const void *data, size_t len);
int http_reply_out(http_req *r, const char *content_type,
                   const char *attachment, http_out *b);
void http_out_free(http_out *b);

/* What replies hold now for clients that have not read them, in bytes,
 * and how many replies http_reply_kb has refused since start (/metrics). */
size_t http_reply_held_bytes(void);
unsigned long http_replies_refused(void);

/* Sends a 200 response with `doc` as JSON (json_dumps with `flags`), and
 * releases doc.  -ENOMEM when doc is NULL (a json_pack that failed) or
 * cannot be dumped. */
struct json_t;
int http_reply_json(http_req *r, struct json_t *doc, size_t flags);

/* Sends Go's error form: text/plain; charset=utf-8, X-Go-Pprof: 1, the
 * message and a newline. */
int http_error(http_req *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The request body (NUL-terminated, *len bytes; NULL with *len 0 when
 * there is none).  Bodies over the "http_max_body" setting (default 64 KiB)
 * are answered 413 before any handler runs. */
const void *http_body(http_req *r, size_t *len);

/* The query string exactly as sent, without the '?' ("" when none):
 * /symbol reads addresses from it undecoded, as Go reads RawQuery. */
const char *http_raw_query(http_req *r);

/* Whether the request is a POST (else a GET). */
bool http_is_post(http_req *r);

/* The path after /debug/pprof/ ("" for the index itself). */
const char *http_path(http_req *r);

/* What ends a handler's wait for request r before its time (a profile's
 * window): nothing yet, its client closing the connection (the socket is
 * polled), the server stopping (cpprof_http_stop(), or its descriptors
 * taken by the program), or the program exiting (exit() waits for open
 * requests, briefly: http_dispatch.c). */
typedef enum {
    HTTP_GOING_ON,
    HTTP_CLIENT_GONE,
    HTTP_SERVER_STOPPING,
    HTTP_PROGRAM_EXITING,
} http_end;
http_end http_request_end(http_req *r);

/* The port the running server listens on (useful after binding port 0), or
 * CPPROF_ENOTRUNNING. */
int http_port(void);

/* The workers below this process (http_forks.c), for the index: its HTML
 * section (nothing when there are none), and a JSON array of {"pid",
 * "parent", "name", "title", "state", "url"}. */
void http_forks_put_html(FILE *f);
struct json_t *http_forks_json(void);
/* Why this process's forks are not workers (the worker signal is taken,
 * the relay socket cannot be made), or NULL where they are (or
 * CPPROF_HTTP_FORKS=0 says they need not be). */
const char *http_forks_declined(void);

/* Why the server's libraries look names up in the program before their
 * own tree (upper.c: a sanitizer runtime refuses RTLD_DEEPBIND), or NULL
 * where they do not: a function the program exports under one of their
 * names then takes their calls. */
const char *http_libraries_unisolated(void);

typedef int (*http_handler)(http_req *r);

enum http_method { HTTP_GET = 1, HTTP_POST = 2 };

/* A row of the route table (http_dispatch.c): the one list of endpoints,
 * which the index page (http_index.c) renders, so a new profile shows up
 * there by adding its row. */
typedef struct {
    const char *name;   /* path after /debug/pprof/; "" is the index; a name
                           ending in '/' serves every path under it */
    unsigned methods;   /* enum http_method bits it accepts */
    http_handler handler;
    const char *desc;   /* the index's one-line description (Go's wording);
                           NULL: not a profile, not listed */
    long (*count)(void);/* the index's Count column; NULL shows 0 as Go does
                           for cmdline, profile and symbol; a negative
                           result shows as unknown */
} http_route;

/* The route table, *n rows, in the order it lists them. */
const http_route *http_routes(size_t *n);

/* The CPU time the server's own threads have used (pool and watch thread,
 * of this server and those before it) and how many run now. */
int http_own_cpu(double *seconds, size_t *threads);

/* Requests waiting out a window (a profile, a ?seconds= delta) now. */
int http_windows_open(void);

/* Handlers, one per file, listed in the route table.  Each sends exactly
 * one response (http_reply or http_error) and returns its result. */
int http_profile(http_req *r);     /* http_profile.c: /debug/pprof/profile */
int http_goroutine(http_req *r);   /* http_goroutine.c: .../goroutine */
int http_goroutineleak(http_req *r); /* http_goroutine.c: .../goroutineleak */
int http_heap(http_req *r);        /* http_heap.c: .../heap */
int http_allocs(http_req *r);      /* http_heap.c: .../allocs */
int http_block(http_req *r);       /* http_heap.c: .../block */
int http_mutex(http_req *r);       /* http_heap.c: .../mutex */
int http_threadcreate(http_req *r);/* http_heap.c: .../threadcreate */
int http_index(http_req *r);       /* http_index.c: /debug/pprof/ */
int http_www(http_req *r);         /* http_index.c: .../www/ (page files) */
int http_symbol(http_req *r);      /* http_symbol.c: .../symbol */
int http_cmdline(http_req *r);     /* http_cmdline.c: .../cmdline */
int http_labels(http_req *r);      /* http_labels.c: .../labels (JSON) */
int http_wall(http_req *r);        /* http_wall.c: .../wall */
int http_fgprof(http_req *r);      /* http_wall.c: /debug/fgprof */
int http_trace(http_req *r);       /* http_trace.c: .../trace */
int http_relay(http_req *r);       /* http_relay.c: .../pid/PID/... */

/* The JSON form of the proto profiles (http_json.c; README, "JSON
 * profile").  http_profile_format_error checks `format` (absent or
 * "proto": the proto; "json"), `proto` and `debug` before any window
 * starts: NULL, or the message of the 400 to answer.  http_reply_profile
 * then sends the
 * gzip'd profile.proto `gz` as the request asked: the proto as attachment
 * NAME, or its JSON form, gzip'd when the client accepts it; `labelled`
 * says whether this profile type carries labels at all (CPU and goroutine
 * do; Go's heap, allocs, block, mutex and threadcreate never do). */
const char *http_profile_format_error(http_req *r);
int http_reply_profile(http_req *r, const char *attachment, bool labelled,
                       const unsigned char *gz, size_t len);
/* The JSON form of gzip'd profile gz, in a malloc'd *out (*out_len bytes);
 * with `proto` the gzip'd bytes themselves too, base64.  -EINVAL when gz
 * is not a profile the builder wrote (unreadable, an id out of range),
 * -ENOMEM. */
int http_profile_json(const unsigned char *gz, size_t len, bool labelled,
                      bool proto, char **out, size_t *out_len);
/* fgprof's folded form of gzip'd profile gz (http_folded.c), in a
 * malloc'd *out: -EINVAL when gz is not a profile, -ENOMEM. */
int http_profile_folded(const unsigned char *gz, size_t len, char **out,
                        size_t *out_len);
struct Perftools__Profiles__Profile;
/* Unpacks a gzip'd profile.proto (free with
 * perftools__profiles__profile__free_unpacked); NULL when it does not. */
struct Perftools__Profiles__Profile *http_profile_unpack(
    const unsigned char *gz, size_t len);
/* Answers a request whose CPU profile did not start (cpprof_cpu_profile_
 * start's error rc): a 500 saying why, and for a signal the program
 * handles itself, which signal and the setting that picks another. */
int http_cpu_profile_refused(http_req *r, int rc);
int http_accounting(http_req *r);  /* http_metrics.c: .../accounting */
int http_metrics(http_req *r);     /* http_metrics.c: /metrics */

/* The index's counts (http_index.c): live threads, heap and allocs
 * buckets, block and mutex records, threads created. */
long http_count_threads(void);
/* The threads that cannot run again (http_goroutine.c). */
long http_count_leaked(void);
long http_count_heap(void);
long http_count_block(void);
long http_count_mutex(void);
long http_count_threadcreate(void);

#endif
