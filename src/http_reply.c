/*
 * http_reply.c -- the server's responses: the headers every response
 * carries (X-Content-Type-Options: nosniff; X-Frame-Options and CSP
 * frame-ancestors refusing any frame), Go's error form (text/plain,
 * X-Go-Pprof: 1, message plus newline) that `go tool pprof` shows to its
 * user, gzip'd and JSON bodies.  A response made on a window thread is
 * kept until libmicrohttpd's thread resumes the connection, since only
 * that thread may queue it.
 */
#define _GNU_SOURCE /* vasprintf */
#include "http_server.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Queues `body` (copied) with the headers every response has, plus the
 * NULL-terminated name/value pairs in `headers`.  No response may be shown
 * in another page's frame (X-Frame-Options for older browsers, CSP's
 * frame-ancestors for newer): a hidden frame of the index would run its
 * scripts, same-origin, for whatever site holds the frame, and a visible
 * one could be overlaid to steal a click on its buttons. */
int http_send(http_req *r, unsigned status, const char *const *headers,
              const void *body, size_t len)
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
    return http_send(r, MHD_HTTP_OK, headers, body, len);
}

int http_reply_gzip(http_req *r, const char *content_type, const void *body,
                    size_t len)
{
    const char *headers[] = {"Content-Type", content_type,
                             "Content-Encoding", "gzip",
                             "Vary", "Accept-Encoding", NULL};
    return http_send(r, MHD_HTTP_OK, headers, body, len);
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
int http_send_error(http_req *r, unsigned status, const char *allow,
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
    int rc = http_send(r, status, headers, body, len + 1);
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
    int rc = http_send_error(r, (unsigned)status, NULL, msg);
    free(msg);
    return rc;
}

int http_reply_json(http_req *r, json_t *doc, size_t flags)
{
    char *text = doc != NULL ? json_dumps(doc, flags) : NULL;
    json_decref(doc);
    if (text == NULL)
        return -ENOMEM;
    int rc = http_reply(r, "application/json", NULL, text, strlen(text));
    free(text);
    return rc;
}

/* Queues the response a window thread made, on the call libmicrohttpd
 * makes once the connection is resumed. */
int http_queue_pending(http_req *r)
{
    enum MHD_Result ok =
        MHD_queue_response(r->conn, r->pending_status, r->pending);
    MHD_destroy_response(r->pending);
    r->pending = NULL;
    return ok == MHD_YES && r->handler_rc == 0 ? 0 : -EIO;
}
