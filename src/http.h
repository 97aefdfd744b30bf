/*
 * http.h -- the embedded HTTP server (http.c) and what handlers use.
 *
 * libmicrohttpd runs one thread per connection, so a 30-second CPU profile
 * blocks only its own client.  http.c owns routing, Go's response headers
 * and error format; each endpoint is a handler function in a file of its own
 * (http_profile.c, ...), listed in http.c's route table.
 */
#ifndef CPPROF_HTTP_H
#define CPPROF_HTTP_H

#include <stdbool.h>
#include <stddef.h>

typedef struct http_req http_req;

/* A query parameter's value, or NULL when absent. */
const char *http_query(http_req *r, const char *name);

/* Sends a 200 response.  `attachment` (may be NULL) becomes
 * Content-Disposition: attachment; filename="<attachment>". */
int http_reply(http_req *r, const char *content_type, const char *attachment,
               const void *body, size_t len);

/* Sends Go's error form: text/plain; charset=utf-8, X-Go-Pprof: 1, the
 * message and a newline. */
int http_error(http_req *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The request body (NUL-terminated, *len bytes; NULL with *len 0 when
 * there is none).  Bodies over 64 KiB are answered 413 before any handler
 * runs. */
const void *http_body(http_req *r, size_t *len);

/* Whether the client has closed its connection (polls the socket).  Also
 * true once cpprof_http_stop() has begun, which shuts every connection. */
bool http_client_gone(http_req *r);

/* The port the running server listens on (useful after binding port 0), or
 * CPPROF_ENOTRUNNING. */
int http_port(void);

typedef int (*http_handler)(http_req *r);

/* Handlers, one per file, listed in http.c's route table.  Each sends
 * exactly one response (http_reply or http_error) and returns its result. */
int http_profile(http_req *r);     /* http_profile.c: /debug/pprof/profile */
int http_goroutine(http_req *r);   /* http_goroutine.c: .../goroutine */
int http_heap(http_req *r);        /* http_heap.c: .../heap */
int http_allocs(http_req *r);      /* http_heap.c: .../allocs */
int http_block(http_req *r);       /* http_heap.c: .../block */
int http_mutex(http_req *r);       /* http_heap.c: .../mutex */
int http_threadcreate(http_req *r);/* http_heap.c: .../threadcreate */

#endif
