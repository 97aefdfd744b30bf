/*
 * check_lifecycle.c -- the process's own lifecycle around cpprof: fork()
 * and exit().
 *
 * fork() without exec: the child of a process that
 * was profiling and serving starts with a clean, usable profiler, and
 * keeps neither the parent's profile nor its listening socket.
 *
 * The parent serves on a port and runs a CPU profile when it forks.  The
 * child starts and stops a CPU profile of its own (it used to get "cpu
 * profiling already in use", and its stop hung on the parent's collector
 * thread, which the child does not have), then serves on another port and
 * answers a request.  While the child is still alive, the parent stops its
 * server and starts it again on its own port: the child's copy of the
 * listening socket used to make that fail with "Address already in use".
 * A watchdog alarm turns a hang into a failure.
 *
 * exit() with a request in flight (a segfault at exit
 * about once in 730 runs): exit's stdio cleanup and library destructors
 * used to run under handlers still at work (a profile being symbolized
 * reads /proc/self/maps through stdio).  A child calls exit() while a
 * /profile request is inside its handler (known from the sampler's
 * collector thread existing): it must answer that request before the
 * process ends, and exit cleanly.
 *
 * cpprof's messages: a line longer than the few hundred bytes formatted
 * on the caller's stack is written whole, in one write, and one past
 * 2 KiB is cut there, still ending in its newline.
 */
#define _GNU_SOURCE
#include <check.h>
#include <cpprof.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "warn.h"

#include "http.h"

/* The status of GET path from the server on `port` (0: no answer). */
static int http_status(int port, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    char buf[512];
    int n = snprintf(buf, sizeof buf,
                     "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    int status = 0;
    if (write(fd, buf, (size_t)n) == n && read(fd, buf, sizeof buf - 1) > 0)
        sscanf(buf, "HTTP/1.%*d %d", &status);
    close(fd);
    return status;
}

/* What the child checks; its exit status is the number of the first
 * check that failed (0: all passed). */
static int child_checks(int ready_fd, int done_fd)
{
    alarm(20);
    if (cpprof_cpu_profile_start() != 0)
        return 1;
    unsigned char *buf;
    size_t len;
    if (cpprof_cpu_profile_stop(&buf, &len) != 0 || len < 2)
        return 2;
    free(buf);
    if (cpprof_http_start("127.0.0.1:0") != 0)
        return 3;
    if (http_status(http_port(), "/debug/pprof/cmdline") != 200)
        return 4;
    char c = 'r';
    if (write(ready_fd, &c, 1) != 1)
        return 5;
    if (read(done_fd, &c, 1) != 1) /* the parent has restarted */
        return 6;
    if (cpprof_http_stop() != 0)
        return 7;
    return 0;
}

START_TEST(child_profiles_and_serves_parent_restarts)
{
    alarm(30);
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    int port = http_port();
    ck_assert_int_gt(port, 0);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    int ready[2], done[2];
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(done), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(child_checks(ready[1], done[0]));
    close(ready[1]);
    close(done[0]);
    char c;
    if (read(ready[0], &c, 1) != 1) {
        int status;
        waitpid(pid, &status, 0);
        ck_abort_msg("the child failed before serving: %s %d",
                     WIFEXITED(status) ? "check" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status)
                                       : WTERMSIG(status));
    }
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(cpprof_cpu_profile_stop(&buf, &len), 0);
    free(buf);
    ck_assert_int_eq(cpprof_http_stop(), 0);
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    int rc = cpprof_http_start(addr);
    ck_assert_msg(rc == 0, "restart on port %d with the child alive: %s",
                  port, cpprof_strerror(rc));
    ck_assert_int_eq(http_status(port, "/debug/pprof/cmdline"), 200);
    ck_assert_int_eq(write(done[1], "d", 1), 1);
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child: %s %d", WIFEXITED(status) ? "check" : "signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    ck_assert_int_eq(cpprof_http_stop(), 0);
}
END_TEST

/* Whether a thread named `comm` exists. */
static bool thread_named(const char *comm)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    bool found = false;
    while (!found && d && (e = readdir(d))) {
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            found = fgets(name, sizeof name, f) &&
                    strncmp(name, comm, strlen(comm)) == 0;
            fclose(f);
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* The child: serves, and calls exit() once a /profile handler runs. */
static void exit_while_profiling(int port_fd)
{
    alarm(20);
    if (cpprof_http_start("127.0.0.1:0") != 0)
        _exit(10);
    int port = http_port();
    if (write(port_fd, &port, sizeof port) != sizeof port)
        _exit(11);
    struct timespec pause = {0, 1000000};
    while (!thread_named("cpprof-sampler"))
        nanosleep(&pause, NULL);
    exit(0);
}

START_TEST(exit_answers_request_in_flight)
{
    alarm(30);
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        exit_while_profiling(pipefd[1]);
    close(pipefd[1]);
    int port;
    ck_assert_int_eq(read(pipefd[0], &port, sizeof port), sizeof port);
    int status_code = http_status(port, "/debug/pprof/profile?seconds=10");
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child: %s %d", WIFEXITED(status) ? "status" : "signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    ck_assert_msg(status_code != 0,
                  "the process exited without answering the request");
}
END_TEST

/* The bytes warn_stderr writes for "%s\n" of n copies of c, read back
 * from the file descriptor 2 is for the call. */
static char *warned(size_t n, char c, size_t *len)
{
    char *text = malloc(n + 1), path[] = "/tmp/check_warn.XXXXXX";
    memset(text, c, n);
    text[n] = '\0';
    int fd = mkstemp(path), saved = dup(2);
    ck_assert(fd >= 0 && saved >= 0);
    ck_assert_int_eq(dup2(fd, 2), 2);
    warn_remember_stderr();
    warn_stderr("%s\n", text);
    dup2(saved, 2);
    close(saved);
    warn_remember_stderr();
    char *out = calloc(1, n + 2);
    ssize_t got = pread(fd, out, n + 1, 0);
    ck_assert_int_ge(got, 0);
    *len = (size_t)got;
    close(fd);
    unlink(path);
    free(text);
    return out;
}

START_TEST(long_messages_whole_or_cut)
{
    size_t len;
    char *out = warned(300, 'x', &len);
    ck_assert_uint_eq(len, 301);
    ck_assert(out[0] == 'x' && out[299] == 'x' && out[300] == '\n');
    free(out);
    out = warned(3000, 'y', &len);
    ck_assert_uint_eq(len, 2047);
    ck_assert(out[0] == 'y' && out[2045] == 'y' && out[2046] == '\n');
    free(out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 60);
    /* Not under ASan: its allocator has no fork handlers, so a child
     * forked while another thread held its lock (the sampler's collector,
     * a server thread) waits on it forever; glibc's malloc locks its
     * arenas across fork.  Seen: the child's new collector stuck in
     * asan_realloc's size-class lock. */
#ifndef CPPROF_SANITIZER_INTERCEPTS
    tcase_add_test(tc, child_profiles_and_serves_parent_restarts);
#endif
    tcase_add_test(tc, exit_answers_request_in_flight);
    tcase_add_test(tc, long_messages_whole_or_cut);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
