/*
 * addr.c -- "HOST:PORT" to a socket address, for the HTTP server.
 *
 * Hosts are numeric, or "localhost", or empty: a name would need a
 * resolver, which can block the host program's start (zero-code mode parses
 * CPPROF_HTTP in a constructor) and could bind somewhere unexpected.  Go's
 * "localhost:6060" and ":6060" are accepted because users type them; both
 * mean 127.0.0.1 here.  Go's ":6060" listens on every interface, but
 * profiles and the command line can hold secrets, so an address that
 * names no host stays on loopback (a remote one must be written out, and
 * then needs the http_allow_remote setting).  Each way an address can be
 * wrong has its own code, so the message says which part to fix.
 */
#include "addr.h"
#include "upper_calls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "cpprof.h"

/* Parses a decimal port, 0..65535, digits only. */
static int parse_port(const char *s, in_port_t *port)
{
    unsigned long v = 0;
    if (*s == '\0' || strlen(s) > 5)
        return CPPROF_EADDRPORT;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return CPPROF_EADDRPORT;
        v = v * 10 + (unsigned long)(*s - '0');
    }
    if (v > 65535)
        return CPPROF_EADDRPORT;
    *port = htons((in_port_t)v);
    return 0;
}

/* "[IPV6]" into *in6. */
static int parse_ipv6_host(char *host, size_t host_len,
                           struct sockaddr_in6 *in6)
{
    if (host_len < 3 || host[host_len - 1] != ']')
        return CPPROF_EADDRHOST;
    host[host_len - 1] = '\0';
    if (inet_pton(AF_INET6, host + 1, &in6->sin6_addr) != 1)
        return CPPROF_EADDRHOST;
    in6->sin6_family = AF_INET6;
    return 0;
}

/* "A.B.C.D", "localhost" or "" into *in4. */
static int parse_ipv4_host(const char *host, struct sockaddr_in *in4)
{
    if (host[0] == '\0' || strcmp(host, "localhost") == 0)
        in4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    else if (inet_pton(AF_INET, host, &in4->sin_addr) != 1)
        return CPPROF_EADDRHOST;
    in4->sin_family = AF_INET;
    return 0;
}

/* The colon before PORT: the last one, or for "[IPV6]" the one right after
 * the bracket (an IPv6 address has colons of its own); NULL if none. */
static const char *port_colon(const char *addr)
{
    if (addr[0] != '[')
        return strrchr(addr, ':');
    const char *close = strchr(addr, ']');
    return close != NULL && close[1] == ':' ? close + 1 : NULL;
}

int addr_parse(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *colon = addr != NULL ? port_colon(addr) : NULL;
    int rc;

    if (colon == NULL)
        return CPPROF_EADDRFORM;
    size_t host_len = (size_t)(colon - addr);
    if (host_len >= sizeof host)
        return CPPROF_EADDRHOST;
    memcpy(host, addr, host_len);
    host[host_len] = '\0';
    memset(ss, 0, sizeof *ss);

    if (host[0] == '[') {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        if ((rc = parse_ipv6_host(host, host_len, in6)) < 0)
            return rc;
        *len = sizeof *in6;
        return parse_port(colon + 1, &in6->sin6_port);
    }
    struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
    if ((rc = parse_ipv4_host(host, in4)) < 0)
        return rc;
    *len = sizeof *in4;
    return parse_port(colon + 1, &in4->sin_port);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(addr_parse);

bool addr_is_loopback(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(
            &((const struct sockaddr_in6 *)ss)->sin6_addr);
    return (ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr) >> 24) ==
           127;
}
UPPER_CALLS(addr_is_loopback);

int addr_listen(const struct sockaddr_storage *ss, socklen_t len)
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
UPPER_CALLS(addr_listen);
