/*
 * http_slowloris.c -- slow clients without the token cannot lock out one
 * with it.
 *
 * A server with a token and its default pool of 32 connections; 40
 * clients without the token each send a request line and then one header
 * byte every 10 s: never idle for http_connection_timeout, never complete,
 * so never refused.  Each one the server closes comes back after a pause,
 * as such a client would.  Meanwhile a client with the token asks every
 * half second, each time once, without retrying; it must be answered 200
 * within 2 s every time (the figure, far above the milliseconds a
 * request takes: a bound on being locked out, not a speed).  And no slow
 * connection may live past the header bound (http_header_timeout, set to
 * 3 s here) with generous slack: the server must shut them.  Then a few
 * slow clients alone, too few to be shut to make room, must be shut for
 * their time within the same bound.
 *
 * Before the fix the slow clients held all 32 connections for as long as
 * they liked: the token's requests waited unanswered, and 32 slow
 * connections lived the whole run.
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

enum {
    SLOW_CLIENTS = 40,
    HEADER_BOUND_S = 3,
    RUN_MS = 12000,
    BYTE_EVERY_MS = 10000,
    COME_BACK_MS = 500,     /* a closed slow client's pause before again */
    TOKEN_EVERY_MS = 500,
    ANSWER_MS = 2000,       /* the acceptance figure */
    LIFETIME_SLACK_MS = 5000, /* a loaded 2-core machine, sanitizers */
};

static const char token[] = "slowloris-test-token";
static int port;
static atomic_bool running = true;

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static int connect_server(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        fprintf(stderr, "http_slowloris: connect: %s\n", strerror(errno));
        exit(1);
    }
    return fd;
}

static bool send_all(int fd, const char *s, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, s, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        s += n, len -= (size_t)n;
    }
    return true;
}

/* ---- The client with the token ------------------------------------------ */

struct token_result {
    int asked, answered_in_time;
    long long slowest_ms; /* of the answered ones */
    int first_failure;    /* its status, 0 if none arrived */
};

/* One request with the token, once: the status line's code if it came
 * within ANSWER_MS, else 0; *took is how long it took. */
static int ask_with_token(long long *took)
{
    char req[512], buf[256] = "";
    snprintf(req, sizeof req,
             "GET /debug/pprof/cmdline HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
             "Authorization: Bearer %s\r\nConnection: close\r\n\r\n",
             port, token);
    long long t0 = now_ms();
    int fd = connect_server(), status = 0;
    size_t got = 0;
    if (send_all(fd, req, strlen(req)))
        while (got < sizeof buf - 1 && strchr(buf, '\n') == NULL) {
            long long left = t0 + ANSWER_MS - now_ms();
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (left <= 0 || poll(&p, 1, (int)left) != 1)
                break;
            ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
            if (n <= 0)
                break;
            got += (size_t)n;
            buf[got] = '\0';
        }
    buf[got] = '\0';
    *took = now_ms() - t0;
    close(fd);
    if (strchr(buf, '\n') != NULL)
        sscanf(buf, "HTTP/1.%*d %d", &status);
    return status;
}

static void *token_client(void *arg)
{
    struct token_result *res = arg;
    pause_ms(1000); /* the slow clients are in place */
    for (long long end = now_ms() + RUN_MS - 1000; now_ms() < end;) {
        long long took;
        int status = ask_with_token(&took);
        res->asked++;
        if (status == 200 && took <= ANSWER_MS) {
            res->answered_in_time++;
            if (took > res->slowest_ms)
                res->slowest_ms = took;
        } else if (res->answered_in_time + 1 == res->asked) {
            res->first_failure = status;
            fprintf(stderr, "http_slowloris: request %d with the token: "
                    "status %d after %lld ms\n", res->asked, status, took);
        }
        pause_ms(TOKEN_EVERY_MS);
    }
    atomic_store(&running, false);
    return NULL;
}

/* ---- The slow clients ------------------------------------------------- */

struct slow {
    int fd;                 /* -1 while away */
    long long since_ms;     /* connected, or left */
    long long next_byte_ms;
};

static void slow_connect(struct slow *s)
{
    static const char line[] = "GET /debug/pprof/cmdline HTTP/1.1\r\n";
    s->fd = connect_server();
    s->since_ms = now_ms();
    s->next_byte_ms = s->since_ms + BYTE_EVERY_MS;
    send_all(s->fd, line, sizeof line - 1);
}

/* A few slow clients, fewer than the pool holds, so that none is shut to
 * make room: each must be shut for its time alone, within the header
 * bound and the slack.  Returns how many were. */
static int shut_for_time(int n)
{
    struct slow slow[SLOW_CLIENTS];
    int shut = 0;
    for (int i = 0; i < n; i++)
        slow_connect(&slow[i]);
    long long end = now_ms() + HEADER_BOUND_S * 1000 + LIFETIME_SLACK_MS;
    for (int left = n; left > 0 && now_ms() < end;) {
        struct pollfd p[SLOW_CLIENTS];
        for (int i = 0; i < n; i++)
            p[i] = (struct pollfd){.fd = slow[i].fd, .events = POLLIN};
        poll(p, (nfds_t)n, 100);
        for (int i = 0; i < n; i++) {
            char buf[512];
            if (p[i].revents != 0 &&
                recv(slow[i].fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) {
                close(slow[i].fd);
                slow[i].fd = -1;
                shut++, left--;
            }
        }
    }
    for (int i = 0; i < n; i++)
        if (slow[i].fd >= 0)
            close(slow[i].fd);
    return shut;
}

int main(void)
{
    if (cpprof_set("http_token", token) != 0) {
        fprintf(stderr, "http_slowloris: cannot set the token\n");
        return 1;
    }
    char bound[16];
    snprintf(bound, sizeof bound, "%d", HEADER_BOUND_S);
    int rc = cpprof_set("http_header_timeout", bound);
    if (rc != 0) /* a library without the setting: judged all the same */
        fprintf(stderr, "http_slowloris: http_header_timeout: %s\n",
                cpprof_strerror(rc));
    if ((rc = cpprof_http_start("127.0.0.1:0")) != 0) {
        fprintf(stderr, "http_slowloris: start: %s\n", cpprof_strerror(rc));
        return 1;
    }
    port = http_port();

    struct slow slow[SLOW_CLIENTS];
    for (int i = 0; i < SLOW_CLIENTS; i++)
        slow_connect(&slow[i]);
    struct token_result res = {0};
    pthread_t t;
    if (pthread_create(&t, NULL, token_client, &res) != 0)
        return 1;

    int shut_by_server = 0;
    long long longest_ms = 0;
    while (atomic_load(&running)) {
        struct pollfd p[SLOW_CLIENTS];
        for (int i = 0; i < SLOW_CLIENTS; i++)
            p[i] = (struct pollfd){.fd = slow[i].fd, .events = POLLIN};
        poll(p, SLOW_CLIENTS, 100);
        long long now = now_ms();
        for (int i = 0; i < SLOW_CLIENTS; i++) {
            struct slow *s = &slow[i];
            char buf[512];
            if (s->fd < 0) {
                if (now - s->since_ms >= COME_BACK_MS)
                    slow_connect(s);
            } else if (p[i].revents != 0 &&
                       recv(s->fd, buf, sizeof buf, MSG_DONTWAIT) <= 0) {
                shut_by_server++;
                if (now - s->since_ms > longest_ms)
                    longest_ms = now - s->since_ms;
                close(s->fd);
                s->fd = -1;
                s->since_ms = now;
            } else if (now >= s->next_byte_ms) {
                send_all(s->fd, "X", 1); /* of a header never finished */
                s->next_byte_ms = now + BYTE_EVERY_MS;
            }
        }
    }
    pthread_join(t, NULL);
    int still_open_long = 0;
    long long now = now_ms();
    for (int i = 0; i < SLOW_CLIENTS; i++)
        if (slow[i].fd >= 0) {
            long long age = now - slow[i].since_ms;
            if (age > longest_ms)
                longest_ms = age;
            still_open_long += age > HEADER_BOUND_S * 1000 + LIFETIME_SLACK_MS;
            close(slow[i].fd);
        }

    printf("http_slowloris: %d of %d requests with the token answered 200 "
           "within %d ms (slowest %lld ms); the server shut %d slow "
           "connections; the longest-lived lived %lld ms, %d still open "
           "past %d s\n",
           res.answered_in_time, res.asked, ANSWER_MS, res.slowest_ms,
           shut_by_server, longest_ms, still_open_long,
           HEADER_BOUND_S + LIFETIME_SLACK_MS / 1000);
    enum { FEW = 8 };
    int shut_alone = shut_for_time(FEW);
    printf("http_slowloris: of %d slow clients alone, the server shut %d "
           "within %d s\n", FEW, shut_alone,
           HEADER_BOUND_S + LIFETIME_SLACK_MS / 1000);
    bool ok = res.asked > 0 && res.answered_in_time == res.asked &&
              shut_by_server > 0 &&
              longest_ms <= HEADER_BOUND_S * 1000 + LIFETIME_SLACK_MS &&
              shut_alone == FEW;
    cpprof_http_stop();
    printf("http_slowloris: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
