/*
 * http_access.c -- who may ask the HTTP server: the token (Bearer, or HTTP
 * Basic with the token as password), the Host names a loopback server
 * answers (DNS rebinding), and whether a browser says a request comes from
 * another site.  Pure checks on a request's headers, apart from the
 * server's lifecycle so that they read, and are reviewed, as one piece:
 * http_dispatch.c calls them from refuse_early() before any body is read,
 * and from the dispatch of requests that would start a window.
 */
#define _GNU_SOURCE
#include "config.h"
#include "http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Compares without an early exit, so the time taken does not tell a client
 * how much of a guessed token was right. */
static bool same_secret(const char *given, size_t given_len,
                        const char *secret)
{
    size_t n = strlen(secret);
    unsigned char diff = given_len != n;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)secret[i] ^
                (unsigned char)(i < given_len ? given[i] : 0);
    return diff == 0;
}

/* The credentials of an Authorization value of `scheme`, named in any
 * case (schemes are case-insensitive, RFC 9110 11.1: libmicrohttpd's
 * Basic parser wants "Basic") and followed by one space or more; NULL for
 * another scheme. */
static const char *credentials(const char *auth, const char *scheme)
{
    size_t n = strlen(scheme);
    if (auth == NULL || strncasecmp(auth, scheme, n) != 0 || auth[n] != ' ')
        return NULL;
    return auth + n + strspn(auth + n, " ");
}

/* Whether Basic credentials (base64 of "user:password") have the token
 * as password, whatever the user. */
static bool basic_has_token(const char *b64, const char *token)
{
    gnutls_datum_t in = {(unsigned char *)b64, (unsigned)strlen(b64)};
    gnutls_datum_t out = {NULL, 0};
    if (gnutls_base64_decode2(&in, &out) != 0)
        return false;
    const char *user = (const char *)out.data;
    const char *colon = memchr(user, ':', out.size);
    bool ok = colon != NULL &&
              same_secret(colon + 1, out.size - (size_t)(colon + 1 - user),
                          token);
    gnutls_free(out.data);
    return ok;
}

/* Whether the request may be served: always when the server needs no
 * token, else only with "Authorization: Bearer <token>" or HTTP Basic with
 * the token as password (any user name): what go tool pprof, curl and
 * browsers send from https://user:TOKEN@host/. */
bool http_authorized(struct MHD_Connection *conn, const char *token)
{
    if (token[0] == '\0')
        return true;
    const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_AUTHORIZATION);
    const char *given = credentials(auth, "Bearer");
    if (given != NULL)
        return same_secret(given, strlen(given), token);
    given = credentials(auth, "Basic");
    return given != NULL && basic_has_token(given, token);
}

/* Whether `host` (a Host header's name, port cut off) is a loopback name:
 * localhost, 127.x.x.x or [::1]. */
static bool loopback_name(const char *host, size_t len)
{
    char name[64];
    struct in_addr a4;
    if (len >= sizeof name)
        return false;
    memcpy(name, host, len);
    name[len] = '\0';
    if (strcasecmp(name, "localhost") == 0 || strcmp(name, "[::1]") == 0)
        return true;
    return inet_pton(AF_INET, name, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* Whether `host` is one of the http_allowed_hosts names. */
static bool allowed_name(const char *host, size_t len)
{
    const char *list = cfg_str(CFG_HTTP_ALLOWED_HOSTS);
    while (*list) {
        size_t n = strcspn(list, ",");
        if (n == len && strncasecmp(list, host, len) == 0)
            return true;
        list += n + (list[n] == ',');
    }
    return false;
}

/* DNS rebinding: a page the developer opens may resolve its own name to
 * 127.0.0.1 and read the server as same-origin; its requests then carry
 * that foreign name as Host.  A loopback server answers only Host names
 * that are loopback or allowed (with our port, or none); a request
 * without Host (HTTP/1.0) comes from no browser. */
bool http_host_allowed(struct MHD_Connection *conn, bool on_loopback, int port)
{
    if (!on_loopback)
        return true;
    const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_HOST);
    if (host == NULL)
        return true;
    const char *colon = strrchr(host, ':');
    if (colon != NULL && strchr(colon, ']') != NULL)
        colon = NULL; /* "[::1]" without a port */
    size_t len = colon != NULL ? (size_t)(colon - host) : strlen(host);
    if (colon != NULL && atoi(colon + 1) != port)
        return false;
    return loopback_name(host, len) || allowed_name(host, len);
}

/* Whether a browser says the request comes from another site: a
 * Sec-Fetch-Site of cross-site, or an Origin whose host is not one
 * http_host_allowed() would answer. */
bool http_cross_site(struct MHD_Connection *conn, int port)
{
    const char *site = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                   "Sec-Fetch-Site");
    if (site != NULL && strcasecmp(site, "cross-site") == 0)
        return true;
    const char *origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                     "Origin");
    if (origin == NULL || strcmp(origin, "null") == 0)
        return origin != NULL;
    const char *host = strstr(origin, "://");
    if (host == NULL)
        return true;
    host += 3;
    const char *colon = strrchr(host, ':');
    if (colon != NULL && strchr(colon, ']') != NULL)
        colon = NULL;
    size_t len = colon != NULL ? (size_t)(colon - host) : strlen(host);
    if (colon == NULL || atoi(colon + 1) != port)
        return true;
    return !loopback_name(host, len) && !allowed_name(host, len);
}
