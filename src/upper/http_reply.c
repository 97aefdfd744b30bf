/*
 * http_reply.c -- the server's responses: the headers every response
 * carries (X-Content-Type-Options: nosniff; X-Frame-Options and CSP
 * frame-ancestors refusing any frame), Go's error form (text/plain,
 * X-Go-Pprof: 1, message plus newline) that `go tool pprof` shows to its
 * user, JSON bodies; and what replies hold until their clients read them,
 * bounded across clients (below).  A response made on a window thread is
 * kept until libmicrohttpd's thread resumes the connection, since only
 * that thread may queue it.
 */
#define _GNU_SOURCE /* vasprintf */
#include "http_server.h"
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

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

/* Whether the request's Accept-Encoding admits gzip. */
static bool accepts_gzip(http_req *r)
{
    const char *v = MHD_lookup_connection_value(
        r->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    return v != NULL && accepts_coding(v, "gzip");
}

/* ---- What replies hold ------------------------------------------------- */

/* A reply's body from its making until libmicrohttpd frees it (sent, or its
 * connection closed): the memory a client that does not read holds.  A
 * small body (SMALL_REPLY at most: errors, the index, metrics) is held as
 * made and always admitted, so the server keeps answering whatever is
 * held.  A larger one is held gzip'd (a trace's JSON shrinks about twenty
 * times), sent as it is held to a client that accepts gzip and inflated
 * a block at a time, as the client reads, for one that does not; it is
 * admitted only while what all clients' replies hold stays within
 * http_reply_kb, else answered 503 with Retry-After.  30 clients that ask
 * for a 40 MB trace and never read held 30 plain copies (the host grew
 * from 39 to 795 MB). */
#define SMALL_REPLY 65536u
#define INFLATE_BLOCK 32768u
/* An inflating reply's own memory: zlib's state and window, and
 * libmicrohttpd's block. */
#define INFLATE_BYTES (INFLATE_BLOCK + 32768u + 8192u)

static atomic_size_t held_bytes;
static atomic_ulong refused;

typedef struct {
    size_t bytes;      /* what it counts in held_bytes */
    unsigned char *data;
    size_t len;        /* as held */
    size_t map;        /* a large body's own mapping (see gz_reserve),
                          its size; 0: a small one, malloc'd */
    bool gz;           /* gzip'd by the server, plain_len inflated */
    size_t plain_len;
    bool inflated;     /* sent inflated (its client takes no gzip) */
    bool inflating;    /* z holds zlib's state (from the first block) */
    z_stream z;
} held;

size_t http_reply_held_bytes(void)
{
    return atomic_load(&held_bytes);
}

unsigned long http_replies_refused(void)
{
    return atomic_load(&refused);
}

/* Counts h in held_bytes, unless it `may_refuse` and would pass the
 * limit. */
static bool admit(held *h, bool may_refuse)
{
    size_t limit = (size_t)cfg_int(CFG_HTTP_REPLY_KB) * 1024;
    size_t now = atomic_load(&held_bytes);
    do {
        if (may_refuse && now + h->bytes > limit)
            return false;
    } while (!atomic_compare_exchange_weak(&held_bytes, &now,
                                           now + h->bytes));
    return true;
}

static void held_free(held *h)
{
    if (h->inflating)
        inflateEnd(&h->z);
    if (h->map)
        munmap(h->data, h->map);
    else
        free(h->data);
    free(h);
}

/* libmicrohttpd is done with the response (MHD_ContentReaderFreeCallback). */
static void release(void *cls)
{
    held *h = cls;
    atomic_fetch_sub(&held_bytes, h->bytes);
    held_free(h);
}

/* The next block of a gzip'd body, inflated (MHD_ContentReaderCallback):
 * called as the client's socket takes more, on libmicrohttpd's thread.
 * zlib's state is made at the first block, there, not where the reply
 * was made: a window thread's allocator arena, which its request's
 * encoding has just filled and emptied, is not pinned by it. */
static ssize_t inflate_block(void *cls, uint64_t pos, char *buf, size_t max)
{
    held *h = cls;
    if (pos >= h->plain_len)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (!h->inflating) {
        h->z.next_in = h->data;
        h->z.avail_in = (uInt)h->len;
        if (inflateInit2(&h->z, 15 + 16) != Z_OK)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        h->inflating = true;
    }
    h->z.next_out = (unsigned char *)buf;
    h->z.avail_out = (uInt)(max < UINT_MAX ? max : UINT_MAX);
    int zrc = inflate(&h->z, Z_NO_FLUSH);
    size_t n = (size_t)(h->z.next_out - (unsigned char *)buf);
    if ((zrc != Z_OK && zrc != Z_STREAM_END) || n == 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    return (ssize_t)n;
}

/* ---- Bodies written piece by piece ------------------------------------- */

struct http_out {
    z_stream z;
    unsigned char *gz;
    size_t gz_len, gz_cap, plain_len;
    int rc; /* the first error */
};

int http_out_open(http_out **out)
{
    http_out *b = calloc(1, sizeof *b);
    *out = NULL;
    if (b == NULL)
        return -ENOMEM;
    if (deflateInit2(&b->z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK) {
        free(b);
        return -ENOMEM;
    }
    *out = b;
    return 0;
}

void http_out_free(http_out *b)
{
    if (b == NULL)
        return;
    deflateEnd(&b->z);
    if (b->gz_cap)
        munmap(b->gz, b->gz_cap);
    free(b);
}

/* Room for `more` bytes after b->gz_len in b->gz, a mapping of its own
 * (mmap, then mremap, doubling), not the program's malloc: the block
 * lives as long as its client takes to read, and made in the arena of
 * the thread that encoded it, it kept that arena's freed working set from
 * going back to the system (glibc trims a heap only above its highest
 * live block): 15 MB of a window thread for each of the first clients
 * that did not read (test/trace_flight_clients.sh). */
static int gz_reserve(http_out *b, size_t more)
{
    if (b->gz_cap - b->gz_len >= more)
        return 0;
    size_t cap = b->gz_cap ? 2 * b->gz_cap : 65536;
    while (cap - b->gz_len < more)
        cap *= 2;
    void *p = b->gz_cap ? mremap(b->gz, b->gz_cap, cap, MREMAP_MAYMOVE)
                        : mmap(NULL, cap, PROT_READ | PROT_WRITE,
                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    b->gz = p;
    b->gz_cap = cap;
    return 0;
}

/* Deflates what b->z has in with `flush`, growing b->gz. */
static int deflate_in(http_out *b, int flush)
{
    int zrc;
    do {
        if (gz_reserve(b, 16384))
            return b->rc = -ENOMEM;
        b->z.next_out = b->gz + b->gz_len;
        b->z.avail_out = (uInt)(b->gz_cap - b->gz_len);
        zrc = deflate(&b->z, flush);
        b->gz_len = b->gz_cap - b->z.avail_out;
        if (zrc == Z_STREAM_ERROR)
            return b->rc = -EIO;
    } while (b->z.avail_in > 0 || (flush == Z_FINISH && zrc != Z_STREAM_END));
    return 0;
}

int http_out_write(http_out *b, const void *data, size_t len)
{
    const unsigned char *p = data;
    while (b->rc == 0 && len > 0) {
        size_t n = len < UINT_MAX ? len : UINT_MAX;
        b->z.next_in = (unsigned char *)p;
        b->z.avail_in = (uInt)n;
        deflate_in(b, Z_NO_FLUSH);
        b->plain_len += n, p += n, len -= n;
    }
    return b->rc;
}

/* b's mapping cut down to the whole pages its bytes take. */
static void gz_trim(http_out *b)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t need = (b->gz_len + page - 1) / page * page;
    void *p = need && need < b->gz_cap
                  ? mremap(b->gz, b->gz_cap, need, 0)
                  : MAP_FAILED;
    if (p != MAP_FAILED)
        b->gz_cap = need;
}

/* b, finished, as what a reply holds (b freed), or NULL for out of
 * memory. */
static held *held_of_out(http_out *b)
{
    held *h = b->rc == 0 && deflate_in(b, Z_FINISH) == 0
                  ? calloc(1, sizeof *h)
                  : NULL;
    if (h != NULL) {
        gz_trim(b);
        *h = (held){.bytes = b->gz_cap, .data = b->gz, .len = b->gz_len,
                    .map = b->gz_cap, .gz = true,
                    .plain_len = b->plain_len};
        b->gz_cap = 0;
    }
    http_out_free(b);
    return h;
}

/* A copy of body as what a reply holds, or NULL: a large one in a
 * mapping of its own (as gz_reserve's, for the same reason). */
static held *held_copy(const void *body, size_t len)
{
    held *h = calloc(1, sizeof *h);
    size_t map = len > SMALL_REPLY ? len : 0;
    void *data = map ? mmap(NULL, map, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                     : malloc(len ? len : 1);
    if (data == MAP_FAILED)
        data = NULL;
    if (h == NULL || data == NULL) {
        free(h);
        if (map && data != NULL)
            munmap(data, map);
        else
            free(data);
        return NULL;
    }
    memcpy(data, body, len);
    *h = (held){.bytes = len, .data = data, .len = len, .map = map};
    return h;
}

/* ---- Responses ----------------------------------------------------------- */

/* Queues the response made of h with the headers every response has, plus
 * the NULL-terminated name/value pairs in `headers`.  No response may be
 * shown in another page's frame (X-Frame-Options for older browsers,
 * CSP's frame-ancestors for newer): a hidden frame of the index would run
 * its scripts, same-origin, for whatever site holds the frame, and a
 * visible one could be overlaid to steal a click on its buttons.  h is
 * the response's from here on, counted until libmicrohttpd frees it. */
static int queue(http_req *r, unsigned status, const char *const *headers,
                 held *h)
{
    struct MHD_Response *resp =
        h->inflated ? MHD_create_response_from_callback(
                          h->plain_len, INFLATE_BLOCK, inflate_block, h,
                          release)
                    : MHD_create_response_from_buffer_with_free_callback_cls(
                          h->len, h->data, release, h);
    if (resp == NULL) {
        atomic_fetch_sub(&held_bytes, h->bytes);
        held_free(h);
        return -ENOMEM;
    }
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "frame-ancestors 'none'");
    if (h->gz && !h->inflated)
        MHD_add_response_header(resp, "Content-Encoding", "gzip");
    if (h->gz)
        MHD_add_response_header(resp, "Vary", "Accept-Encoding");
    for (; headers[0] != NULL; headers += 2)
        MHD_add_response_header(resp, headers[0], headers[1]);
    r->responded = true;
    if (r->route != NULL) { /* on a window thread: queued once resumed */
        r->pending = resp;
        r->pending_status = status;
        return 0;
    }
    enum MHD_Result ok = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
    return ok == MHD_YES ? 0 : -EIO;
}

/* The 503 of a reply that would pass http_reply_kb: what holds the memory,
 * and when to come back (a client that does not read lets go of its reply
 * when its connection idles out, http_connection_timeout). */
static int refuse(http_req *r, const held *h)
{
    char retry[24], *msg;
    snprintf(retry, sizeof retry, "%ld",
             cfg_int(CFG_HTTP_CONNECTION_TIMEOUT));
    const char *headers[] = {"Content-Type", "text/plain; charset=utf-8",
                             "X-Go-Pprof", "1", "Retry-After", retry, NULL};
    atomic_fetch_add(&refused, 1);
    if (asprintf(&msg,
                 "busy: the replies this server holds for clients that have "
                 "not read them yet take %zu KiB, and this one (%zu KiB as "
                 "held) would pass the http_reply_kb limit of %ld "
                 "KiB; retry after %s s, or raise the setting "
                 "(CPPROF_HTTP_REPLY_KB)\n",
                 http_reply_held_bytes() / 1024, h->bytes / 1024,
                 cfg_int(CFG_HTTP_REPLY_KB), retry) < 0)
        return -ENOMEM;
    int rc = http_send(r, MHD_HTTP_SERVICE_UNAVAILABLE, headers, msg,
                       strlen(msg));
    free(msg);
    return rc;
}

/* Sends what h holds (taking it), or the 503 when a large reply would pass
 * the limit. */
static int send_held(http_req *r, unsigned status, const char *const *headers,
                     held *h)
{
    if (h == NULL)
        return -ENOMEM;
    h->inflated = h->gz && !accepts_gzip(r);
    if (h->inflated)
        h->bytes += INFLATE_BYTES;
    if (!admit(h, h->bytes > SMALL_REPLY)) {
        int rc = refuse(r, h);
        held_free(h);
        return rc;
    }
    return queue(r, status, headers, h);
}

/* Whether body is gzip data already (a profile's .pb.gz): compressing it
 * again gains nothing. */
static bool gzipped(const unsigned char *body, size_t len)
{
    return len >= 2 && body[0] == 0x1f && body[1] == 0x8b;
}

int http_send(http_req *r, unsigned status, const char *const *headers,
              const void *body, size_t len)
{
    if (len <= SMALL_REPLY || gzipped(body, len))
        return send_held(r, status, headers, held_copy(body, len));
    http_out *b;
    int rc = http_out_open(&b);
    if (rc == 0)
        rc = http_out_write(b, body, len);
    if (rc) {
        http_out_free(b);
        return rc;
    }
    return send_held(r, status, headers, held_of_out(b));
}

/* The headers of a 200 reply of content_type, `attachment` as
 * Content-Disposition's file name (NULL: none), in disposition's room. */
static int reply_headers(const char *headers[5], const char *content_type,
                         const char *attachment, char *disposition,
                         size_t room)
{
    headers[0] = "Content-Type";
    headers[1] = content_type;
    headers[2] = attachment != NULL ? "Content-Disposition" : NULL;
    headers[3] = disposition;
    headers[4] = NULL;
    if (attachment != NULL &&
        snprintf(disposition, room, "attachment; filename=\"%s\"",
                 attachment) >= (int)room)
        return -EINVAL;
    return 0;
}

int http_reply(http_req *r, const char *content_type, const char *attachment,
               const void *body, size_t len)
{
    char disposition[256];
    const char *headers[5];
    int rc = reply_headers(headers, content_type, attachment, disposition,
                           sizeof disposition);
    return rc ? rc : http_send(r, MHD_HTTP_OK, headers, body, len);
}

int http_reply_out(http_req *r, const char *content_type,
                   const char *attachment, http_out *b)
{
    char disposition[256];
    const char *headers[5];
    int rc = reply_headers(headers, content_type, attachment, disposition,
                           sizeof disposition);
    if (rc) {
        http_out_free(b);
        return rc;
    }
    return send_held(r, MHD_HTTP_OK, headers, held_of_out(b));
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
