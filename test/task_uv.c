/*
 * task_uv.c -- the program of test/task_uv.sh: a libuv server whose every
 * connection is a task (docs/tasks.md), the pattern for an event loop: one
 * thread runs every tenant's callbacks, so labels must follow the
 * connection, not the thread.  Clients in the same program, on threads of
 * their own, talk to it over loopback TCP.
 *
 *   task_uv --addr HOST:PORT --profile FILE
 *
 * A connection's first byte names its tenant (acme, globex, initech: 3, 4
 * and 5 connections); the server makes it a task labelled tenant=NAME.
 * Each later byte is a request: on_read enters the connection's task,
 * burns the tenant's cost in CPU (acme 5 ms, globex 10 ms, initech 25 ms)
 * in a function of the tenant's own (work_acme, ...), answers one byte
 * and leaves the task in await_request ("io"): the connection waits in the
 * loop for its next request, which its client sends 2 to 4 ms after the
 * answer.  Each request measures its CPU with the loop thread's CPU clock
 * from just after enter to just before leave: the tenant's truth.
 *
 * Output and run as test/task_pool.c's ("truth ...", then at the quiet
 * moment "quiet ..."), but for "migrations", always 0: one loop thread.
 * The clients are held (no request in flight) while the profile starts
 * and stops, and at the quiet moment, when each tenant's first client has
 * closed its connection (the server ends that task on EOF) and every
 * other connection waits for a request.
 */
#define _GNU_SOURCE
#include "task_run.h"

#include <cpprof.h>
#include <uv.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define THINK_NS 2000000
#define NCONNS (3 + 4 + 5)

static _Atomic int64_t truth_ns[TASK_TENANTS];
static atomic_int ended; /* connections whose task the server ended */
static atomic_int write_errors;
static int port;

/* ---- The server: one loop, a task per connection ------------------------ */

struct conn {
    uv_tcp_t tcp;
    cpprof_task task; /* {0} until the tenant byte came */
    int tenant;
    char buf[64];
};

static uv_loop_t loop;
static uv_tcp_t server;
static uv_async_t stop_async;
static const char answer = 'd';

static void on_closed(uv_handle_t *h) { free(h->data); }

static void on_alloc(uv_handle_t *h, size_t size, uv_buf_t *out)
{
    (void)size;
    struct conn *c = h->data;
    *out = uv_buf_init(c->buf, sizeof c->buf);
}

static void on_written(uv_write_t *w, int status)
{
    if (status < 0)
        atomic_fetch_add(&write_errors, 1);
    free(w);
}

/* Where a connection waits for its next request: the census shows it. */
static __attribute__((noinline)) void await_request(struct conn *c)
{
    task_check(cpprof_task_leave(c->task, "io", 0), "leave");
    __asm__ volatile(""); /* not a tail call */
}

static void serve_request(struct conn *c)
{
    task_check(cpprof_task_enter(c->task), "enter");
    atomic_fetch_add(&truth_ns[c->tenant], task_work(c->tenant));
    uv_write_t *w = malloc(sizeof *w);
    uv_buf_t b = uv_buf_init((char *)&answer, 1);
    if (!w || uv_write(w, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0)
        atomic_fetch_add(&write_errors, 1);
    await_request(c);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct conn *c = s->data;
    if (n < 0) { /* the client closed: its task ends */
        if (c->task.id) {
            task_check(cpprof_task_end(c->task), "end");
            atomic_fetch_add(&ended, 1);
        }
        uv_close((uv_handle_t *)s, on_closed);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (c->task.id == 0) { /* the first byte: the tenant */
            c->tenant = b->base[i] - '0';
            const char *kv[] = {"tenant", task_tenant_names[c->tenant]};
            cpprof_labelset *set;
            task_check(cpprof_labels(&set, 2, kv), "labels");
            task_check(cpprof_task_create(&c->task, set), "create");
            cpprof_labelset_release(set);
        } else {
            serve_request(c);
        }
    }
}

static void on_connection(uv_stream_t *srv, int status)
{
    struct conn *c = calloc(1, sizeof *c);
    if (status < 0 || !c) {
        fprintf(stderr, "task_uv: a connection was not accepted\n");
        exit(1);
    }
    uv_tcp_init(&loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) == 0)
        uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    else
        uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, h->data && h != (uv_handle_t *)&server ? on_closed : NULL);
}

static void on_stop(uv_async_t *a)
{
    (void)a;
    uv_walk(&loop, close_any, NULL);
}

static void *loop_main(void *arg)
{
    (void)arg;
    uv_run(&loop, UV_RUN_DEFAULT);
    return NULL;
}

static int start_server(void)
{
    struct sockaddr_in sa;
    int len = sizeof sa;
    uv_loop_init(&loop);
    uv_tcp_init(&loop, &server);
    uv_async_init(&loop, &stop_async, on_stop);
    uv_ip4_addr("127.0.0.1", 0, &sa);
    if (uv_tcp_bind(&server, (const struct sockaddr *)&sa, 0) < 0 ||
        uv_listen((uv_stream_t *)&server, 64, on_connection) < 0 ||
        uv_tcp_getsockname(&server, (struct sockaddr *)&sa, &len) < 0)
        return -1;
    port = ntohs(sa.sin_port);
    return 0;
}

/* ---- The clients --------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool hold, stopping;
static int in_flight;          /* requests sent, not yet answered */
static bool closing[NCONNS];   /* the client closes at its next turn */

struct client {
    int index, tenant;
};

static int connect_server(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        perror("task_uv: connect");
        exit(1);
    }
    return fd;
}

static void *client_main(void *arg)
{
    struct client *cl = arg;
    unsigned seed = (unsigned)cl->index;
    int fd = connect_server();
    char tenant = (char)('0' + cl->tenant), req = 'w', got;
    if (write(fd, &tenant, 1) != 1) {
        perror("task_uv: the tenant byte");
        exit(1);
    }
    for (;;) {
        pthread_mutex_lock(&mu);
        while (hold && !stopping && !closing[cl->index])
            pthread_cond_wait(&cv, &mu);
        if (stopping || closing[cl->index]) {
            pthread_mutex_unlock(&mu);
            break;
        }
        in_flight++;
        pthread_mutex_unlock(&mu);
        if (write(fd, &req, 1) != 1 || read(fd, &got, 1) != 1) {
            perror("task_uv: a request");
            exit(1);
        }
        pthread_mutex_lock(&mu);
        in_flight--;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        struct timespec think = {0, THINK_NS + rand_r(&seed) % THINK_NS};
        nanosleep(&think, NULL);
    }
    close(fd);
    return NULL;
}

/* Holds the clients (true) until no request is in flight, or lets them
 * go on (false). */
static void hold_clients(bool on)
{
    pthread_mutex_lock(&mu);
    hold = on;
    pthread_cond_broadcast(&cv);
    while (on && in_flight > 0)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
}

/* ---- The run ------------------------------------------------------------- */

static int64_t truth_of(int t) { return atomic_load(&truth_ns[t]); }

/* Each tenant's first client closes; once the server has ended those
 * tasks, every other connection waits for its next request. */
static void quiet(const struct client *clients)
{
    int parked[TASK_TENANTS] = {0};
    bool first_seen[TASK_TENANTS] = {false};
    hold_clients(true);
    pthread_mutex_lock(&mu);
    for (int i = 0; i < NCONNS; i++) {
        int t = clients[i].tenant;
        if (!first_seen[t]) {
            first_seen[t] = true;
            closing[i] = true;
        } else {
            parked[t]++;
        }
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int tick = 0; tick < 6000 && atomic_load(&ended) < TASK_TENANTS; tick++)
        usleep(10000);
    task_print_quiet(parked);
}

int main(int argc, char **argv)
{
    const char *path = task_start(argc, argv);
    if (start_server() != 0) {
        fprintf(stderr, "task_uv: the libuv server did not start\n");
        return 1;
    }
    pthread_t loop_thread, client_threads[NCONNS];
    pthread_create(&loop_thread, NULL, loop_main, NULL);
    static struct client clients[NCONNS];
    int n = 0;
    for (int t = 0; t < TASK_TENANTS; t++)
        for (int k = 0; k < task_tenant_jobs[t]; k++, n++) {
            clients[n] = (struct client){n, t};
            pthread_create(&client_threads[n], NULL, client_main, &clients[n]);
        }

    sleep(1);
    task_profile(path, hold_clients, truth_of, NULL);
    quiet(clients);

    task_await_term();
    pthread_mutex_lock(&mu);
    stopping = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < NCONNS; i++)
        pthread_join(client_threads[i], NULL);
    uv_async_send(&stop_async);
    pthread_join(loop_thread, NULL);
    uv_loop_close(&loop);
    cpprof_http_stop();
    return atomic_load(&write_errors) ? 1 : 0;
}
