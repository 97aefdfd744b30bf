/*
 * fork_storm.c -- fork() without exec in a tight loop while every part of
 * cpprof that holds a lock across fork is busy.
 *
 * fork's prepare handlers take the locks of every module (atfork.h's
 * levels).  When they took heap.c's lock before the unwinder's writer
 * mutex, a fork met the sampler's collector holding that mutex in
 * read_maps() and waiting for heap.c's lock in a sampled realloc: both
 * waited for ever, and then every sampled malloc spun on heap.c's lock.
 *
 * Three threads fork, and each child (allocating first where the
 * allocator allows it: below) exits with a known status, while other
 * threads start and stop CPU profiles, take censuses through the server's
 * goroutine endpoint, allocate and free with changing labels, contend on
 * a mutex (block and mutex profiles on) and create threads (the
 * threadcreate profile, and the sampler's collector reading the maps for
 * each new thread), with accounting on.  Twice: with every allocation
 * sampled (mem_profile_rate 1, where the deadlock came within a few
 * hundred forks) and at the default rate.  Each round ends after FORKS
 * forks and at least a few profiles and censuses, so that they ran
 * together.  Linked with the shared library, as programs are: the order
 * of separate pthread_atfork registrations was its constructors' order.
 * A hang is no fork completing for STALL_SECONDS (a fork takes
 * milliseconds, tens on a loaded machine); it fails with the counts.
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


enum {
    FORKERS = 3,
    FORKS = 1000,         /* per round, all forkers together */
    MIN_PROFILES = 5,     /* per round */
    MIN_CENSUSES = 5,     /* per round */
    ALLOCATORS = 2,
    STALL_SECONDS = 60,
    CHILD_STATUS = 42,
};

static atomic_bool stopping;
static atomic_long forks, profiles, censuses, allocations, creations;
static const char *volatile round_name = "(none)";

static void die(const char *what, int err)
{
    fprintf(stderr, "fork_storm: %s: %s\n", what,
            err < 0 ? cpprof_strerror(err) : strerror(err));
    exit(1);
}

static void say(const char *s)
{
    ssize_t ignored = write(2, s, strlen(s));
    (void)ignored;
}

static void say_num(long v)
{
    char digits[24], out[24];
    int n = 0, k = 0;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    while (n > 0)
        out[k++] = digits[--n];
    out[k] = '\0';
    say(out);
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
    nanosleep(&ts, NULL);
}

/* A hang is no fork completing for STALL_SECONDS: then the threads may be
 * stuck anywhere, inside the allocator too, so this only sleeps, loads and
 * writes. */
static void *watchdog(void *arg)
{
    (void)arg;
    long last = -1;
    int still = 0;
    for (;;) {
        pause_ms(1000);
        long now = atomic_load(&forks);
        still = now == last ? still + 1 : 0;
        last = now;
        if (still < STALL_SECONDS)
            continue;
        say("fork_storm: HANG: no fork completed for ");
        say_num(STALL_SECONDS);
        say(" s at mem_profile_rate ");
        say(round_name);
        say(" (forks ");
        say_num(now);
        say(", CPU profiles ");
        say_num(atomic_load(&profiles));
        say(", censuses ");
        say_num(atomic_load(&censuses));
        say(" in this round)\n");
        _exit(1);
    }
    return NULL;
}

static void *forker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork", errno);
        if (pid == 0) {
#ifndef CPPROF_SANITIZER_INTERCEPTS
            /* The child's allocations take the collectors' locks (every
             * one is sampled at rate 1): they must have come back.  Not
             * under a sanitizer, whose allocator keeps no lock across
             * fork (check_lifecycle.c). */
            void *volatile p = malloc(100);
            free(p);
#endif
            _exit(CHILD_STATUS);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0)
            if (errno != EINTR)
                die("waitpid", errno);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_STATUS) {
            fprintf(stderr, "fork_storm: child %s %d, want status %d\n",
                    WIFEXITED(status) ? "exited with status" : "killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                    CHILD_STATUS);
            exit(1);
        }
        atomic_fetch_add(&forks, 1);
    }
    return NULL;
}

static void *profiler(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        int rc = cpprof_cpu_profile_start();
        if (rc != 0)
            die("cpprof_cpu_profile_start", rc);
        pause_ms(100); /* the collector reads the maps as threads come */
        unsigned char *buf;
        size_t len;
        rc = cpprof_cpu_profile_stop(&buf, &len);
        if (rc != 0)
            die("cpprof_cpu_profile_stop", rc);
        free(buf);
        atomic_fetch_add(&profiles, 1);
        pause_ms(50);
    }
    return NULL;
}

static int port;

/* A free loopback port, for the server (bound and closed: the server binds
 * it next). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        die("a free port", errno);
    close(fd);
    return ntohs(a.sin_port);
}

/* GET `path` from the in-process server; dies unless it answers 200. */
static void http_get(const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((in_port_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect to the server", errno);
    char req[256], head[16] = "";
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Connection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n)
        die("send a request", errno);
    char buf[65536];
    size_t got = 0;
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
        if (r > 0 && got < sizeof head - 1) {
            size_t k = (size_t)r < sizeof head - 1 - got ? (size_t)r
                                                          : sizeof head - 1 - got;
            memcpy(head + got, buf, k);
            got += k;
        }
    close(fd);
    if (strncmp(head, "HTTP/1.1 200", 12) != 0) {
        fprintf(stderr, "fork_storm: GET %s answered \"%s\"\n", path, head);
        exit(1);
    }
}

/* Censuses through the goroutine endpoint (the server's threads and lock
 * with them). */
static void *censor(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        http_get("/debug/pprof/goroutine?debug=1");
        atomic_fetch_add(&censuses, 1);
        pause_ms(100);
    }
    return NULL;
}

static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;

static void *allocator(void *arg)
{
    long id = (long)arg;
    char value[32];
    for (long i = 0; !atomic_load(&stopping); i++) {
        snprintf(value, sizeof value, "%ld", i % 50);
        const char *kv[] = {"allocator", value};
        cpprof_labelset *set;
        int rc = cpprof_labels(&set, 2, kv);
        if (rc != 0)
            die("cpprof_labels", rc);
        cpprof_set_thread_labels(set);
        cpprof_labelset_release(set);
        void *volatile p = malloc((size_t)(16 + i % 4096));
        p = realloc(p, (size_t)(32 + (i * 7 + id) % 8192));
        pthread_mutex_lock(&contended);
        free(p);
        pthread_mutex_unlock(&contended);
        atomic_fetch_add(&allocations, 1);
        if (i % 64 == 63)
            pause_ms(1); /* the program's own work between bursts */
    }
    return NULL;
}

static void *nothing(void *arg) { return arg; }

static void *creator(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        pthread_t t;
        int rc = pthread_create(&t, NULL, nothing, NULL);
        if (rc != 0)
            die("pthread_create", rc);
        pthread_join(t, NULL);
        atomic_fetch_add(&creations, 1);
        pause_ms(10);
    }
    return NULL;
}

static void run_round(const char *rate)
{
    int rc = cpprof_set("mem_profile_rate", rate);
    if (rc != 0)
        die("cpprof_set mem_profile_rate", rc);
    round_name = rate;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    atomic_store(&stopping, false);
    atomic_store(&forks, 0);
    atomic_store(&profiles, 0);
    atomic_store(&censuses, 0);

    pthread_t t[FORKERS + ALLOCATORS + 3];
    int n = 0;
    for (int i = 0; i < FORKERS; i++)
        pthread_create(&t[n++], NULL, forker, NULL);
    for (long i = 0; i < ALLOCATORS; i++)
        pthread_create(&t[n++], NULL, allocator, (void *)i);
    pthread_create(&t[n++], NULL, profiler, NULL);
    pthread_create(&t[n++], NULL, censor, NULL);
    pthread_create(&t[n++], NULL, creator, NULL);
    while (atomic_load(&forks) < FORKS ||
           atomic_load(&profiles) < MIN_PROFILES ||
           atomic_load(&censuses) < MIN_CENSUSES)
        pause_ms(10);
    atomic_store(&stopping, true);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("fork_storm: mem_profile_rate %s: %ld forks, %ld CPU profiles, "
           "%ld censuses, %ld allocation rounds, %ld threads created in "
           "%.1f s\n",
           rate, atomic_load(&forks), atomic_load(&profiles),
           atomic_load(&censuses), atomic_load(&allocations),
           atomic_load(&creations),
           (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    pthread_t dog;
    pthread_create(&dog, NULL, watchdog, NULL);
    char addr[32];
    int rc;
    do {
        port = free_port();
        snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
        rc = cpprof_http_start(addr);
    } while (rc == -EADDRINUSE);
    if (rc != 0)
        die("cpprof_http_start", rc);
    rc = cpprof_accounting_enable();
    if (rc != 0)
        die("cpprof_accounting_enable", rc);
    cpprof_set_block_profile_rate(1);
    cpprof_set_mutex_profile_fraction(1);
    char default_rate[32];
    snprintf(default_rate, sizeof default_rate, "%d", 512 * 1024);
    run_round("1");
    run_round(default_rate);
    printf("fork_storm: PASS\n");
    return 0;
}
