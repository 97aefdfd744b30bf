/*
 * fuzz_http.c -- libFuzzer target for the HTTP surface: request line, path,
 * query string, headers and body (POST /debug/pprof/symbol), as a hostile
 * client on the loopback interface would send them.
 *
 * Why the real server on a loopback port rather than a call into the
 * dispatch code: what a client reaches first is libmicrohttpd's parser and
 * http_dispatch.c's glue (raw query capture, body limits, the token check, the
 * route table), and that glue is static to http_dispatch.c.  Running the server the
 * library ships, inside this process, fuzzes exactly that path with no test
 * hook in the library; libFuzzer's coverage counters and the sanitizers
 * see the connection threads as they see any other.  The cost is a thread
 * and a connection per input (hundreds of inputs a second, enough for the
 * bounded CI run).
 *
 * Each input is sent as the raw bytes of one connection, then the write
 * side is shut, so an incomplete request ends at once instead of waiting
 * out the idle timeout.  What comes back must be empty (libmicrohttpd may
 * drop a malformed or half-closed request) or start with an HTTP/1.x
 * status line.  Every 64 inputs, and at the end, a plain request must
 * still get its 200: the server keeps serving whatever it was sent.
 *
 * Long-running endpoints are bounded by settings, not by filtering the
 * input: profile_max_seconds=1 and a client that reads for at most 1.5 s
 * and then hangs up (the handler sees it gone and stops).
 *
 * Run: test/fuzz/fuzz_http -max_total_time=60 -dict=SRC/test/fuzz/http.dict
 *      CORPUS_DIR SRC/test/fuzz/corpus/http
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

/* Longest we wait for one answer: over the 1 s profile ceiling. */
#define ANSWER_MS 1500

static int port;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* libFuzzer's SIGALRM (its -timeout check, every timeout/2 + 1 s) has a
 * handler without SA_RESTART, so this thread's calls may fail with EINTR:
 * each is tried again (connect on a new socket: an interrupted one goes on
 * connecting in the background).  CI once aborted on "connect:
 * Interrupted system call". */
static int connect_server(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        if (fd >= 0 && errno == EINTR) {
            close(fd);
            continue;
        }
        perror("fuzz_http: connect");
        abort();
    }
}

/* Sends `data`, shuts the write side and reads the answer's first bytes
 * into buf (NUL-terminated); returns how many were read. */
static size_t exchange(const uint8_t *data, size_t len, char *buf,
                       size_t cap)
{
    int fd = connect_server();
    size_t got = 0;
    while (len > 0) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the server may close on a bad request: fine */
        data += n, len -= (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    int64_t deadline = now_ms() + ANSWER_MS;
    for (;;) {
        int64_t left = deadline - now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0)
            break;
        /* A thread census signals this thread too, and poll is never
         * restarted: EINTR. */
        int ready = poll(&p, 1, (int)left);
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            break;
        char sink[4096];
        char *to = got < cap - 1 ? buf + got : sink;
        size_t room = got < cap - 1 ? cap - 1 - got : sizeof sink;
        ssize_t n = recv(fd, to, room, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (to != sink)
            got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    return got;
}

static void check_answer(const char *buf, size_t got)
{
    if (got == 0)
        return;
    if (got < 12 || strncmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ') {
        fprintf(stderr, "fuzz_http: not an HTTP answer: %.80s\n", buf);
        abort();
    }
}

/* The server still answers a plain request with a 200. */
static void check_serving(void)
{
    static const char req[] =
        "GET /debug/pprof/cmdline HTTP/1.1\r\nHost: localhost\r\n\r\n";
    char buf[64];
    exchange((const uint8_t *)req, sizeof req - 1, buf, sizeof buf);
    if (strncmp(buf, "HTTP/1.1 200 ", 13) != 0) {
        fprintf(stderr, "fuzz_http: server stopped serving: %.60s\n", buf);
        abort();
    }
}

static void set(const char *name, const char *value)
{
    int rc = cpprof_set(name, value);
    if (rc != 0) {
        fprintf(stderr, "fuzz_http: %s=%s: %s\n", name, value,
                cpprof_strerror(rc));
        abort();
    }
}

static void check_at_exit(void)
{
    check_serving();
    cpprof_http_stop();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    set("profile_max_seconds", "1");
    set("http_connection_timeout", "2");
    set("http_max_connections", "512");
    int rc = cpprof_http_start("127.0.0.1:0");
    if (rc != 0) {
        fprintf(stderr, "fuzz_http: start: %s\n", cpprof_strerror(rc));
        abort();
    }
    port = http_port();
    atexit(check_at_exit);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    static unsigned inputs;
    char buf[256];
    size_t got = exchange(data, len, buf, sizeof buf);
    check_answer(buf, got);
    if (++inputs % 64 == 0)
        check_serving();
    return 0;
}
