/*
 * bench_http.h -- what the benchmarks that talk to cpprof's server in their
 * own process share (bench/http, bench/tasks): a loopback connection to
 * its port and one GET whose whole answer is read.  Any failure exits,
 * naming the program: a benchmark figure made of errors is no figure.
 */
#ifndef CPPROF_BENCH_HTTP_H
#define CPPROF_BENCH_HTTP_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static inline int bench_http_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        fprintf(stderr, "%s: connect: %s\n", program_invocation_short_name,
                strerror(errno));
        exit(1);
    }
    return fd;
}

/* Sends one GET of `path` and reads its answer (headers, then
 * Content-Length bytes of body); exits unless it is a 200.  Returns the
 * body's length. */
static inline size_t bench_http_get(int fd, const char *path, int keep_alive)
{
    const char *me = program_invocation_short_name;
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: localhost"
                     "\r\nConnection: %s\r\n\r\n",
                     path, keep_alive ? "keep-alive" : "close");
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        fprintf(stderr, "%s: send: %s\n", me, strerror(errno));
        exit(1);
    }
    char buf[4096];
    size_t got = 0;
    const char *end = NULL;
    while (!end) {
        ssize_t r = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (r <= 0) {
            fprintf(stderr, "%s: the server closed before answering\n", me);
            exit(1);
        }
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    int status = 0;
    const char *cl = strcasestr(buf, "\r\nContent-Length:");
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || status != 200 || !cl) {
        fprintf(stderr, "%s: answer was not a 200 with a length: %.80s\n",
                me, buf);
        exit(1);
    }
    size_t body = strtoul(cl + 17, NULL, 10);
    size_t have = got - (size_t)(end + 4 - buf);
    while (have < body) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0) {
            fprintf(stderr, "%s: the body was cut short\n", me);
            exit(1);
        }
        have += (size_t)r;
    }
    return body;
}

#endif
