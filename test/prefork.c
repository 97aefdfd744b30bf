/*
 * prefork.c -- a pre-forking server's shape, for test/prefork.sh: the
 * process started serves nothing of the work; forked children do it,
 * each waiting for its next request in a blocking call, as nginx's and
 * PostgreSQL's do.
 *
 *   prefork workers SECONDS PIDFILE: forks two workers that serve
 *     requests for SECONDS: a 10 ms one in prefork_request_path (the work
 *     a profile must find), then a 1 ms wait for the next in poll; each
 *     writes "worker PID" to PIDFILE once fork has returned in it, and
 *     "interrupted PID" should a wait fail.  Forks three idle workers
 *     that wait SECONDS: "idle PID" in one epoll_wait, "napping PID" in
 *     2 s polls, "sleeping PID" in 2 s nanosleeps; they write "woke PID"
 *     should epoll_wait return before, "short PID" should a poll or a
 *     nanosleep end before its 2 s or fail.  Forks a child that execs `sleep
 *     SECONDS` at once and one that exits at once ("exec PID", "exit
 *     PID"), one that execs `sleep SECONDS` once the file PIDFILE.go
 *     exists ("late PID"), and waits for them all, forking one more idle
 *     worker ("forked PID", in epoll_wait) once PIDFILE.fork exists.
 *   prefork daemon SECONDS PIDFILE: forks and exits 1 s later (a daemon's
 *     start, whose first process outlives the fork by a while); the
 *     daemon writes "daemon PID", forks one worker as above ("worker
 *     PID") and waits for it in sigsuspend, as nginx's master does.
 *   prefork orphan SECONDS PIDFILE: the same, but the first process
 *     stops the daemon (SIGSTOP), writes "stopped PID" and exits at once:
 *     continued once it is gone, the daemon runs its fork handlers as an
 *     orphan, as a loaded machine may run those of nginx's daemon.
 *   prefork unreaped SECONDS PIDFILE: forks a worker that _exits once the
 *     file PIDFILE.go exists ("exiting PID"), and one that stops cpprof's
 *     server (cpprof_http_stop, found in the cpprof preloaded) once
 *     PIDFILE.stop exists, writes "unserved PID" after and lives on in
 *     2 s polls ("stopping PID"; "unstoppable PID" and exits, should the stop
 *     fail); then sleeps SECONDS, reaping neither.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* What a worker does for a request: CPU, in a frame of its own. */
__attribute__((noinline)) static unsigned long prefork_request_path(double until)
{
    volatile unsigned long x = 0;
    while (now() < until)
        for (int i = 0; i < 100000; i++)
            x += (unsigned long)i * 2654435761u;
    return x;
}

static void note(const char *pidfile, const char *what, pid_t pid)
{
    FILE *f = fopen(pidfile, "a");
    if (f == NULL) {
        perror(pidfile);
        exit(2);
    }
    fprintf(f, "%s %d\n", what, (int)pid);
    fclose(f);
}

/* Serves a request every 11 ms or so until SECONDS have passed. */
static void serve_requests(double seconds, const char *pidfile)
{
    double until = now() + seconds;
    while (now() < until) {
        prefork_request_path(now() + 0.01);
        if (poll(NULL, 0, 1) != 0)
            note(pidfile, "interrupted", getpid());
    }
}

static pid_t fork_worker(double seconds, const char *pidfile)
{
    pid_t pid = fork();
    if (pid == 0) {
        note(pidfile, "worker", getpid()); /* fork has returned here */
        serve_requests(seconds, pidfile);
        _exit(0);
    }
    return pid;
}

/* How an idle worker waits. */
enum idle { IDLE_EPOLL, IDLE_POLL, IDLE_SLEEP };

/* Waits SECONDS as HOW says: in one epoll_wait, which nothing ends before
 * (its set is empty), or in polls or nanosleeps of 2 s, each of which
 * must last that long.  A wait cut short is noted ("woke PID" for the
 * epoll_wait, "short PID" for the others). */
static void wait_idle(double seconds, const char *pidfile, enum idle how)
{
    double until = now() + seconds;
    if (how == IDLE_EPOLL) {
        int ep = epoll_create1(EPOLL_CLOEXEC);
        struct epoll_event ev;
        if (epoll_wait(ep, &ev, 1, (int)(seconds * 1000)) != 0)
            note(pidfile, "woke", getpid());
        return;
    }
    while (now() < until) {
        double start = now();
        struct timespec nap = {2, 0};
        int rc = how == IDLE_POLL ? poll(NULL, 0, 2000) : nanosleep(&nap, NULL);
        if (rc != 0 || now() - start < 2.0)
            note(pidfile, "short", getpid());
    }
}

/* A worker no request comes to, for SECONDS, noted as WHAT. */
static void fork_idle(double seconds, const char *pidfile, enum idle how,
                      const char *what)
{
    pid_t pid = fork();
    if (pid == 0) {
        wait_idle(seconds, pidfile, how);
        _exit(0);
    }
    note(pidfile, what, pid);
}

/* Waits for the file PIDFILE.SUFFIX to exist, looking every 20 ms from a
 * poll: a wait, where a worker's part may start. */
static void await_file(const char *pidfile, const char *suffix)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.%s", pidfile, suffix);
    while (access(path, F_OK) != 0)
        poll(NULL, 0, 20);
}

/* A worker that serves for a while and then execs: it waits for the
 * file PIDFILE.go (made by the test once the index lists it). */
static void exec_when_told(const char *seconds, const char *pidfile)
{
    await_file(pidfile, "go");
    execlp("sleep", "sleep", seconds, (char *)NULL);
    _exit(127);
}

/* The unreaped mode's workers: the parent reaps neither. */
static void fork_unreaped(double seconds, const char *pidfile)
{
    pid_t pid = fork();
    if (pid == 0) {
        await_file(pidfile, "go");
        _exit(0);
    }
    note(pidfile, "exiting", pid);
    if ((pid = fork()) == 0) {
        await_file(pidfile, "stop");
        int (*stop)(void) = (int (*)(void))dlsym(RTLD_DEFAULT,
                                                 "cpprof_http_stop");
        int rc = stop != NULL ? stop() : -1;
        note(pidfile, rc == 0 ? "unserved" : "unstoppable", getpid());
        if (rc != 0)
            _exit(1);
        wait_idle(seconds, pidfile, IDLE_POLL);
        _exit(0);
    }
    note(pidfile, "stopping", pid);
    sleep((unsigned)seconds); /* no wait: both stay unreaped */
}

/* Reaps its children until none is left, forking one more idle worker
 * ("forked PID") once the file PIDFILE.fork exists: a fork made when the
 * test says, while a client of cpprof's is connected to this process. */
static void reap_and_fork(double seconds, const char *pidfile)
{
    char path[4096];
    snprintf(path, sizeof path, "%s.fork", pidfile);
    bool forked = false;
    for (;;) {
        pid_t pid;
        while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
            ;
        if (pid < 0)
            return; /* none left */
        if (!forked && access(path, F_OK) == 0) {
            forked = true;
            fork_idle(seconds, pidfile, IDLE_EPOLL, "forked");
        }
        poll(NULL, 0, 20);
    }
}

static void on_child(int signo) { (void)signo; }

/* The daemon's start: waits for its children as nginx's master does, in
 * sigsuspend until SIGCHLD (blocked from before the fork on, so that no
 * exit is missed). */
static void daemon_serve(double seconds, const char *pidfile)
{
    struct sigaction sa = {.sa_handler = on_child};
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    fork_worker(seconds, pidfile);
    for (;;) {
        pid_t pid;
        while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
            ;
        if (pid < 0)
            return; /* none left */
        sigsuspend(&old);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: prefork workers|daemon|orphan|unreaped SECONDS "
                        "PIDFILE\n");
        return 2;
    }
    double seconds = atof(argv[2]);
    const char *pidfile = argv[3];
    if (strcmp(argv[1], "workers") == 0) {
        fork_worker(seconds, pidfile);
        fork_worker(seconds, pidfile);
        fork_idle(seconds, pidfile, IDLE_EPOLL, "idle");
        fork_idle(seconds, pidfile, IDLE_POLL, "napping");
        fork_idle(seconds, pidfile, IDLE_SLEEP, "sleeping");
        pid_t pid = fork();
        if (pid == 0) {
            execlp("sleep", "sleep", argv[2], (char *)NULL);
            _exit(127);
        }
        note(pidfile, "exec", pid);
        if ((pid = fork()) == 0)
            _exit(0);
        note(pidfile, "exit", pid);
        if ((pid = fork()) == 0)
            exec_when_told(argv[2], pidfile);
        note(pidfile, "late", pid);
        reap_and_fork(seconds, pidfile);
        return 0;
    }
    if (strcmp(argv[1], "unreaped") == 0) {
        fork_unreaped(seconds, pidfile);
        return 0;
    }
    bool orphan = strcmp(argv[1], "orphan") == 0;
    if (strcmp(argv[1], "daemon") == 0 || orphan) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid != 0 && orphan) {
            /* Stops it as it leaves fork, unless it has run already (then
             * the test shows less, never wrongly). */
            kill(pid, SIGSTOP);
            note(pidfile, "stopped", pid);
            _exit(0);
        }
        if (pid != 0) {
            usleep(1000000); /* the daemon is armed and waits meanwhile */
            return 0;
        }
        setsid();
        note(pidfile, "daemon", getpid());
        daemon_serve(seconds, pidfile);
        return 0;
    }
    fprintf(stderr, "prefork: unknown mode %s\n", argv[1]);
    return 2;
}
