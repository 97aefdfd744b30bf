/*
 * check_http.c -- unit tests of the HTTP server's lifecycle (http.c):
 * strict HOST:PORT parsing with Go's localhost:PORT and :PORT (on loopback)
 * and a code naming the part that is wrong, start/stop codes, IPv4 and IPv6 loopback, a
 * taken port reported as such, stopping frees every socket and thread,
 * cpprof's threads labelled pprof_internal from their start,
 * stopping does not wait out a running CPU profile, and a census signal
 * the program took is reported by both goroutine forms.  The endpoints' HTTP
 * contract is tested against the demo by test/http_profile.sh.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <cpprof.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
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

#include "census.h"
#include "http.h"
#include "labels.h"
#include "sampler.h"
#include "symbolize.h"

/* Entries in a /proc/self directory (fds or threads). */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    ck_assert_ptr_nonnull(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A connected socket to the running server (family AF_INET or AF_INET6). */
static int connect_server(int family)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        a->sin6_port = htons((in_port_t)http_port());
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a->sin_port = htons((in_port_t)http_port());
        len = sizeof *a;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&ss, len), 0);
    return fd;
}

static void send_get(int fd, const char *path)
{
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                     path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
}

/* GETs path and returns the status code, leaving the response's first
 * RESPONSE_MAX - 1 bytes in reply (NULL: not wanted). */
enum { RESPONSE_MAX = 4096 };

static int get(int family, const char *path, char reply[RESPONSE_MAX])
{
    char own[RESPONSE_MAX], *buf = reply ? reply : own;
    size_t len = 0;
    ssize_t n;
    int fd = connect_server(family), status = -1;
    send_get(fd, path);
    while (len < RESPONSE_MAX - 1 &&
           (n = read(fd, buf + len, RESPONSE_MAX - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    close(fd);
    ck_assert_int_eq(sscanf(buf, "HTTP/1.1 %d", &status), 1);
    return status;
}

static int get_status(int family, const char *path)
{
    return get(family, path, NULL);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Each bad address gets the code of the part that is wrong, whose message
 * says how to write it. */
START_TEST(bad_addresses_name_what_is_wrong)
{
    static const struct {
        const char *addr;
        int code;
    } bad[] = {
        {"", CPPROF_EADDRFORM},
        {"127.0.0.1", CPPROF_EADDRFORM},
        {"[::1]", CPPROF_EADDRFORM},
        {"[::1:6060", CPPROF_EADDRFORM},
        {"[::1]6060", CPPROF_EADDRFORM},
        {"1.2.3:80", CPPROF_EADDRHOST},
        {"::1:6060", CPPROF_EADDRHOST},
        {"[]:6060", CPPROF_EADDRHOST},
        {"[127.0.0.1]:6060", CPPROF_EADDRHOST},
        {"example.com:6060", CPPROF_EADDRHOST},
        {"localhostx:6060", CPPROF_EADDRHOST},
        {"127.0.0.1:", CPPROF_EADDRPORT},
        {"127.0.0.1:65536", CPPROF_EADDRPORT},
        {"127.0.0.1:+80", CPPROF_EADDRPORT},
        {"127.0.0.1:-1", CPPROF_EADDRPORT},
        {"127.0.0.1:80x", CPPROF_EADDRPORT},
        {"127.0.0.1: 80", CPPROF_EADDRPORT},
        {"127.0.0.1:0000080", CPPROF_EADDRPORT},
        {":http", CPPROF_EADDRPORT},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = cpprof_http_start(bad[i].addr);
        ck_assert_msg(rc == bad[i].code, "\"%s\": %d (%s), expected %d",
                      bad[i].addr, rc, cpprof_strerror(rc), bad[i].code);
    }
    ck_assert_int_eq(http_port(), CPPROF_ENOTRUNNING);
    ck_assert_ptr_nonnull(strstr(cpprof_strerror(CPPROF_EADDRFORM), "HOST:PORT"));
    ck_assert_ptr_nonnull(strstr(cpprof_strerror(CPPROF_EADDRHOST), "HOST"));
    ck_assert_ptr_nonnull(strstr(cpprof_strerror(CPPROF_EADDRPORT), "65535"));
    /* The setting checks addresses as the server does. */
    ck_assert_int_eq(cpprof_set("http_addr", "example.com:6060"), CPPROF_EVALUE);
    ck_assert_int_eq(cpprof_set("http_addr", ":6060"), 0);
    ck_assert_int_eq(cpprof_set("http_addr", "127.0.0.1:6060"), 0);
}
END_TEST

/* The address the running server listens on, as text. */
static void bound_host(char *buf, size_t len)
{
    /* The server's socket is the listening one on its port: found among
     * our fds rather than trusted to an fd number. */
    for (int fd = 3; fd < 1024; fd++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int listening = 0;
        socklen_t il = sizeof listening;
        if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &il) < 0 ||
            !listening)
            continue;
        if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            if (ntohs(a->sin6_port) != http_port())
                continue;
            inet_ntop(AF_INET6, &a->sin6_addr, buf, (socklen_t)len);
        } else {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            if (ntohs(a->sin_port) != http_port())
                continue;
            inet_ntop(AF_INET, &a->sin_addr, buf, (socklen_t)len);
        }
        return;
    }
    snprintf(buf, len, "(no listening socket on port %d)", http_port());
}

/* Go's forms: "localhost:PORT" and ":PORT" listen on 127.0.0.1 only (Go's
 * ":PORT" would be every interface), "[::1]:PORT" on ::1. */
START_TEST(go_style_addresses_listen_on_loopback)
{
    static const struct {
        const char *addr, *bound;
    } forms[] = {
        {"localhost:0", "127.0.0.1"},
        {":0", "127.0.0.1"},
        {"[::1]:0", "::1"},
    };
    char host[INET6_ADDRSTRLEN];
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        int rc = cpprof_http_start(forms[i].addr);
        if (rc == -EADDRNOTAVAIL && strchr(forms[i].bound, ':'))
            continue; /* no IPv6 loopback in this container */
        ck_assert_msg(rc == 0, "%s: %s", forms[i].addr, cpprof_strerror(rc));
        bound_host(host, sizeof host);
        ck_assert_str_eq(host, forms[i].bound);
        close(connect_server(strchr(forms[i].bound, ':') ? AF_INET6 : AF_INET));
        ck_assert_int_eq(cpprof_http_stop(), 0);
    }
}
END_TEST

START_TEST(start_twice_and_stop_twice)
{
    ck_assert_int_eq(cpprof_http_stop(), CPPROF_ENOTRUNNING);
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    ck_assert_int_gt(http_port(), 0);
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), CPPROF_ERUNNING);
    ck_assert_int_eq(get_status(AF_INET, "/debug/pprof/no-such"), 404);
    ck_assert_int_eq(cpprof_http_stop(), 0);
    ck_assert_int_eq(cpprof_http_stop(), CPPROF_ENOTRUNNING);
    ck_assert_int_eq(http_port(), CPPROF_ENOTRUNNING);
}
END_TEST

START_TEST(serves_ipv6_loopback)
{
    ck_assert_int_eq(cpprof_http_start("[::1]:0"), 0);
    ck_assert_int_eq(get_status(AF_INET6, "/debug/pprof/no-such"), 404);
    ck_assert_int_eq(cpprof_http_stop(), 0);
}
END_TEST

START_TEST(taken_port_is_eaddrinuse)
{
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", http_port());
    ck_assert_int_eq(cpprof_http_stop(), 0);

    /* Someone else takes the port: our start must say so, not "EIO". */
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    a.sin_port = htons((in_port_t)atoi(strchr(addr, ':') + 1));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    ck_assert_int_eq(cpprof_http_start(addr), -EADDRINUSE);
    close(fd);
    ck_assert_int_eq(cpprof_http_start(addr), 0);
    ck_assert_int_eq(cpprof_http_stop(), 0);
}
END_TEST

/* The number of threads in /proc/self/task once it is `want`, or what it
 * is after 2 s: a thread pthread_join has returned for may still be listed
 * for a moment (the kernel wakes the joiner before it removes the task). */
static int tasks_once(int want)
{
    int n = count_entries("/proc/self/task");
    for (int i = 0; i < 200 && n != want; i++) {
        struct timespec ms = {0, 10000000};
        nanosleep(&ms, NULL);
        n = count_entries("/proc/self/task");
    }
    return n;
}

START_TEST(stop_frees_sockets_and_threads)
{
    int fds = count_entries("/proc/self/fd");
    int threads = count_entries("/proc/self/task");
    for (int round = 0; round < 3; round++) {
        ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
        for (int i = 0; i < 5; i++)
            ck_assert_int_eq(get_status(AF_INET, "/elsewhere"), 404);
        /* An idle keep-alive connection must not outlive the server. */
        int idle = connect_server(AF_INET);
        ck_assert_int_eq(cpprof_http_stop(), 0);
        close(idle);
        ck_assert_int_eq(count_entries("/proc/self/fd"), fds);
        ck_assert_int_eq(tasks_once(threads), threads);
    }
}
END_TEST

/* The value of pprof_internal in set, or NULL. */
static const char *internal_role(const cpprof_labelset *set)
{
    for (size_t i = 0; set && i < cpprof_labelset_size(set); i++)
        if (strcmp(labelset_key(set, i), "pprof_internal") == 0)
            return labelset_value(set, i);
    return NULL;
}

/* A census at once after the server starts, before any request: every
 * thread but this one (the program's only thread) is cpprof's and must
 * carry pprof_internal, libmicrohttpd's pool threads included, and the
 * index's count of the server's threads is all of them; the last rounds
 * with the largest pool (its threads, as many window threads and two
 * more: a list of 65 slots counted half of them). */
START_TEST(own_threads_labelled_from_their_start)
{
    for (int round = 0; round < 22; round++) {
        if (round == 20)
            ck_assert_int_eq(cpprof_set("http_threads", "64"), 0);
        ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
        census c;
        ck_assert_int_eq(census_take_labels(&c), 0);
        size_t server = 0;
        for (size_t i = 0; i < c.n; i++) {
            if (c.threads[i].tid == getpid())
                continue;
            const char *role = internal_role(c.threads[i].labels);
            char path[64], name[32] = "?";
            snprintf(path, sizeof path, "/proc/self/task/%d/comm",
                     (int)c.threads[i].tid);
            FILE *f = fopen(path, "r");
            if (f) {
                if (!fgets(name, sizeof name, f))
                    strcpy(name, "?");
                name[strcspn(name, "\n")] = '\0';
                fclose(f);
            }
            ck_assert_msg(role != NULL,
                          "round %d: thread %d (%s) of %zu carries no "
                          "pprof_internal",
                          round, (int)c.threads[i].tid, name, c.n);
            server += strcmp(role, "http") == 0;
        }
        double cpu;
        size_t counted;
        ck_assert_int_eq(http_own_cpu(&cpu, &counted), 0);
        ck_assert_msg(counted == server,
                      "round %d: the index counts %zu server threads of %zu",
                      round, counted, server);
        census_release(&c);
        ck_assert_int_eq(cpprof_http_stop(), 0);
    }
    ck_assert_int_eq(cpprof_set("http_threads", "4"), 0);
}
END_TEST

static bool server_answered(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) == 1;
}

/* Connects and sends a 60-second profile request, and returns once the
 * server's handler holds the profiler: probing with our own start then
 * fails with EBUSY.  If our probe wins the race instead, the handler answers
 * 500 (busy); the request is then sent again on a new connection. */
static int start_profile_in_handler(void)
{
    double give_up = now_s() + 10;
    for (;;) {
        int fd = connect_server(AF_INET);
        send_get(fd, "/debug/pprof/profile?seconds=60");
        while (!server_answered(fd)) {
            int rc = cpprof_cpu_profile_start();
            if (rc == CPPROF_EBUSY)
                return fd;
            ck_assert_int_eq(rc, 0);
            unsigned char *buf;
            size_t len;
            ck_assert_int_eq(cpprof_cpu_profile_stop(&buf, &len), 0);
            free(buf);
            ck_assert_msg(now_s() < give_up, "handler never started a profile");
            usleep(10000);
        }
        close(fd);
    }
}

START_TEST(stop_does_not_wait_out_a_profile)
{
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    int fd = start_profile_in_handler();
    double t0 = now_s();
    ck_assert_int_eq(cpprof_http_stop(), 0);
    /* One 100 ms poll, plus the profile's own stop, not 60 s. */
    ck_assert_double_lt(now_s() - t0, 5.0);
    close(fd);
    /* The abandoned profile released the profiler. */
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    ck_assert_int_eq(cpprof_cpu_profile_stop(&buf, &len), 0);
    free(buf);
}
END_TEST

static atomic_bool stop_spinning;

static void *spin(void *arg)
{
    (void)arg;
    volatile unsigned long n = 0;
    while (!atomic_load(&stop_spinning))
        n++;
    return NULL;
}

/* A profile whose client went away is stopped and dropped without being
 * built: building it would symbolize the samples (here a spinning
 * thread's) for nobody.  cpprof_http_stop waits for the handler, so the
 * symbolizer has been used by then or never. */
START_TEST(abandoned_profile_is_not_built)
{
    pthread_t spinner;
    ck_assert_int_eq(pthread_create(&spinner, NULL, spin, NULL), 0);
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    int fd = connect_server(AF_INET);
    send_get(fd, "/debug/pprof/profile?seconds=60");
    double give_up = now_s() + 10;
    while (!sampler_running()) {
        ck_assert_msg(now_s() < give_up, "the handler started no profile");
        usleep(1000);
    }
    /* The spinner's samples: 100 Hz of its CPU. */
    struct timespec samples = {0, 300000000};
    nanosleep(&samples, NULL);
    close(fd);
    give_up = now_s() + 10;
    while (sampler_running()) {
        ck_assert_msg(now_s() < give_up, "the profile outlived its client");
        usleep(1000);
    }
    ck_assert_int_eq(cpprof_http_stop(), 0);
    ck_assert_uint_eq(symbolize_own_bytes(), 0);
    atomic_store(&stop_spinning, true);
    pthread_join(spinner, NULL);
}
END_TEST

/* A program that handles the census's signal itself: both forms of the
 * goroutine profile answer 500 naming the setting to change, the delta
 * through the named profiles' "failed to collect profile" (Go's words). */
static void programs_own_handler(int sig)
{
    (void)sig;
}

START_TEST(goroutine_names_a_taken_census_signal)
{
    ck_assert_int_eq(cpprof_set("census_signal", "45"), 0);
    struct sigaction sa = {.sa_handler = programs_own_handler};
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(45, &sa, NULL), 0);
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    char reply[RESPONSE_MAX];
    ck_assert_int_eq(get(AF_INET, "/debug/pprof/goroutine", reply), 500);
    ck_assert_msg(strstr(reply, "signal 45 (setting census_signal)"), "%s",
                  reply);
    ck_assert_int_eq(get(AF_INET, "/debug/pprof/goroutine?seconds=1", reply),
                     500);
    ck_assert_msg(strstr(reply, "failed to collect profile: ") &&
                      strstr(reply, "census_signal"),
                  "%s", reply);
    ck_assert_int_eq(cpprof_http_stop(), 0);
}
END_TEST

/* The whole body of GET path (malloc'd), or NULL on a status other
 * than 200. */
static char *get_body(const char *path)
{
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    int fd = connect_server(AF_INET);
    send_get(fd, path);
    ssize_t n;
    while (len < cap - 1 && (n = read(fd, buf + len, cap - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    close(fd);
    int status = 0;
    sscanf(buf, "HTTP/1.1 %d", &status);
    if (status == 200)
        return buf;
    free(buf);
    return NULL;
}

static pthread_mutex_t program_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t program_cv = PTHREAD_COND_INITIALIZER;
static bool program_signalled;

static void *signal_program(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&program_mu);
    program_signalled = true;
    pthread_cond_signal(&program_cv);
    pthread_mutex_unlock(&program_mu);
    return NULL;
}

/* The program handles both the census's and the CPU profile's signal: the
 * index says, before anyone asks, that both profiles are declined and
 * which setting picks another signal; /profile names its signal. */
START_TEST(index_names_taken_signals)
{
    ck_assert_int_eq(cpprof_set("census_signal", "45"), 0);
    ck_assert_int_eq(cpprof_set("cpu_signal", "46"), 0);
    struct sigaction sa = {.sa_handler = programs_own_handler};
    sigemptyset(&sa.sa_mask);
    ck_assert_int_eq(sigaction(45, &sa, NULL), 0);
    ck_assert_int_eq(sigaction(46, &sa, NULL), 0);
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    char *index = get_body("/debug/pprof/?format=json");
    ck_assert_ptr_nonnull(index);
    ck_assert_msg(strstr(index, "set CPPROF_CPU_SIGNAL (setting cpu_signal)") &&
                      strstr(index, "set CPPROF_CENSUS_SIGNAL (setting "
                                    "census_signal)"),
                  "%s", index);
    free(index);
    char reply[RESPONSE_MAX];
    ck_assert_int_eq(get(AF_INET, "/debug/pprof/profile?seconds=1", reply),
                     500);
    ck_assert_msg(strstr(reply, "signal 46 (setting cpu_signal)"), "%s",
                  reply);
    ck_assert_int_eq(cpprof_http_stop(), 0);
}
END_TEST

/* A wait of the program's own: the block profile must show it. */
__attribute__((noinline)) void program_waits_for_work(void)
{
    pthread_t t;
    /* Held from before the signaller starts, so it can set the flag only
     * once the wait below has let go of the mutex: the wait happens, on a
     * loaded machine or under qemu too. */
    pthread_mutex_lock(&program_mu);
    ck_assert_int_eq(pthread_create(&t, NULL, signal_program, NULL), 0);
    while (!program_signalled)
        pthread_cond_wait(&program_cv, &program_mu);
    pthread_mutex_unlock(&program_mu);
    pthread_join(t, NULL);
}

/* cpprof's own threads wait for work: a window thread for the next request
 * that waits out a window, the server's threads for connections.  Those
 * waits are the profiler's, and stay out of the block profile,
 * where a window thread's idle wait was the longest "program" wait of all;
 * the program's own wait is there. */
START_TEST(own_waits_stay_out_of_the_block_profile)
{
    ck_assert_int_eq(cpprof_set("block_profile_rate", "1"), 0);
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    /* Each waits out its window on a window thread, which waited for it. */
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(get_status(AF_INET, "/debug/pprof/block?seconds=1"),
                         200);
    program_waits_for_work();
    char *body = get_body("/debug/pprof/block?debug=1");
    ck_assert_ptr_nonnull(body);
    ck_assert_msg(strstr(body, "program_waits_for_work"), "%s", body);
    ck_assert_msg(!strstr(body, "window_thread") && !strstr(body, "MHD_"),
                  "cpprof's own waits in the block profile:\n%s", body);
    free(body);
    ck_assert_int_eq(cpprof_http_stop(), 0);
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *life = tcase_create("lifecycle");
    tcase_set_timeout(life, 30);
    tcase_add_test(life, bad_addresses_name_what_is_wrong);
    tcase_add_test(life, go_style_addresses_listen_on_loopback);
    tcase_add_test(life, start_twice_and_stop_twice);
    tcase_add_test(life, serves_ipv6_loopback);
    tcase_add_test(life, taken_port_is_eaddrinuse);
    tcase_add_test(life, stop_frees_sockets_and_threads);
    tcase_add_test(life, stop_does_not_wait_out_a_profile);
    tcase_add_test(life, abandoned_profile_is_not_built);
    tcase_add_test(life, goroutine_names_a_taken_census_signal);
    tcase_add_test(life, index_names_taken_signals);
    tcase_add_test(life, own_waits_stay_out_of_the_block_profile);
    suite_add_tcase(s, life);
    /* It counts every thread of the process as the program's or cpprof's;
     * qemu-user runs one of its own (CK_EXCLUDE_TAGS, test/cross/aarch64.sh). */
    TCase *own = tcase_create("own_threads");
    tcase_set_timeout(own, 30);
    tcase_set_tags(own, "every_thread_is_the_program");
    tcase_add_test(own, own_threads_labelled_from_their_start);
    suite_add_tcase(s, own);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(http_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
