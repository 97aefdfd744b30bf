/*
 * asio_echo_client.c -- the client of test/asio_echo.sh: busy and parked
 * connections per tenant to test/asio_echo's echo server, from a process
 * of its own (its CPU is not the server's).
 *
 *   asio_echo_client PORT
 *
 * Each connection sends its tenant's name as its first line and waits for
 * the echo (the server then knows its tenant).  A busy connection then
 * sends a message, reads it back and pauses, again and again; a parked one
 * sends nothing more.  Prints "ready" once every connection has its echo;
 * on SIGUSR1 the busy connections finish: each shuts its side, reads the
 * server's close and exits, and then it prints "quiet acme=N globex=N
 * initech=N", the parked connections per tenant, which stay open until
 * SIGTERM.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TENANTS 3
static const char *const names[TENANTS] = {"acme", "globex", "initech"};
/* The tenants' busy connections are 1 : 2 : 5 of the load. */
static const int busy[TENANTS] = {1, 2, 5};
static const int parked[TENANTS] = {2, 3, 4};

#define MESSAGE 1024
#define PAUSE_NS 2000000 /* between a busy connection's messages */

static atomic_bool finishing;

static void die(const char *what)
{
    fprintf(stderr, "asio_echo_client: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            die("send");
        p += k;
        n -= (size_t)k;
    }
}

static void recv_all(int fd, char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            die("recv");
        p += k;
        n -= (size_t)k;
    }
}

/* A connection whose server side knows it is tenant t's. */
static int connect_as(int port, int t)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    char line[32], echo[32];
    int n = snprintf(line, sizeof line, "%s\n", names[t]);
    send_all(fd, line, (size_t)n);
    recv_all(fd, echo, (size_t)n);
    if (memcmp(line, echo, (size_t)n) != 0) {
        fprintf(stderr, "asio_echo_client: the handshake's echo differs\n");
        exit(1);
    }
    return fd;
}

static void *run_busy(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char out[MESSAGE], in[MESSAGE];
    memset(out, 'x', sizeof out);
    struct timespec pause = {0, PAUSE_NS};
    while (!atomic_load(&finishing)) {
        send_all(fd, out, sizeof out);
        recv_all(fd, in, sizeof in);
        nanosleep(&pause, NULL);
    }
    shutdown(fd, SHUT_WR);
    while (recv(fd, in, sizeof in, 0) > 0)
        ; /* until the server closes */
    close(fd);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: asio_echo_client PORT\n");
        return 2;
    }
    int port = atoi(argv[1]);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    pthread_t threads[64];
    int n = 0;
    for (int t = 0; t < TENANTS; t++) {
        for (int i = 0; i < parked[t]; i++)
            connect_as(port, t); /* left open */
        for (int i = 0; i < busy[t]; i++)
            if (pthread_create(&threads[n++], NULL, run_busy,
                               (void *)(intptr_t)connect_as(port, t)) != 0)
                die("pthread_create");
    }
    printf("ready\n");
    fflush(stdout);
    int sig;
    while (sigwait(&sigs, &sig) == 0 && sig != SIGUSR1)
        if (sig == SIGTERM)
            return 0;
    atomic_store(&finishing, true);
    for (int i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    printf("quiet");
    for (int t = 0; t < TENANTS; t++)
        printf(" %s=%d", names[t], parked[t]);
    printf("\n");
    fflush(stdout);
    sigdelset(&sigs, SIGUSR1);
    sigwait(&sigs, &sig);
    return 0;
}
