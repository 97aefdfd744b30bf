/*
 * zerolisten.c -- zero-code mode holds its address from load and
 * loads the server at its first client.
 *
 * A pre-forking server's parent forks for every connection (PostgreSQL's
 * postmaster), and a fork of a process whose server runs costs what its
 * threads and libraries cost: every mapping of the server's 22 libraries
 * copied and torn down again, the threads' stacks and malloc arenas
 * written by glibc's fork handlers, 3 to 5 times a plain fork
 * (bench/fork).  Most of the time nobody asks.  So zero-code mode checks
 * its settings and binds its address at load (a port in use, a refused
 * value are said at once, as before), and one small thread of cpprof's
 * waits for the first connection; only then is libcpprof-upper.so loaded
 * and the server started on that listener, which accepts the connection
 * that woke it.  Until then the process carries that thread, its
 * listener and its fork handlers, and its forks are armed workers
 * (forkwake.c) that load the server themselves when woken.
 *
 * Over HTTPS the server starts at load, as GnuTLS must check the
 * certificate files before anyone relies on them.
 */
#define _GNU_SOURCE
#include "zerolisten.h"
#include "server_entry.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addr.h"
#include "atfork.h"
#include "config.h"
#include "cpprof.h"
#include "forkwake.h"
#include "interpose.h"
#include "own.h"
#include "procfile.h"
#include "thread.h"
#include "util.h"
#include "warn.h"

enum { CHECK_MS = 1000 }; /* how often the listener's identity is checked */

/* Under the fork handlers' rule: set before the thread starts, read by the
 * child; the thread only reads them. */
static char held_addr[96];
static int held_fd ATFORK_HELD = -1;
static dev_t held_dev ATFORK_HELD;
static ino_t held_ino ATFORK_HELD;
static pid_t holder ATFORK_HELD; /* this process, once in the family */
static pid_t worker_of ATFORK_HELD; /* in a worker forked meanwhile: its
                                       parent */
/* This process holds the address, or is a worker forked meanwhile: its
 * forks are workers (nginx's master, forked by the process started, forks
 * its workers before it takes that process's address). */
static bool in_family ATFORK_HELD;
static _Atomic bool handed;   /* the server took the listener */

bool http_zero_listen_possible(void)
{
    return cfg_str(CFG_HTTP_TLS_CERT)[0] == '\0';
}

/* Whether fd still names the socket bound at load: a daemon that closes
 * every descriptor may have given its number to a file of its own. */
ATFORK_CHILD static bool still_ours(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_dev == held_dev &&
           st.st_ino == held_ino;
}

/* The server, loaded and started on the listener once a client is there. */
static void *wait_for_client(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "cpprof-listen"); /* not the interposed call: it
                                            allocates */
    for (;;) {
        struct pollfd p = {.fd = held_fd, .events = POLLIN};
        int ready = poll(&p, 1, CHECK_MS);
        if (!still_ours(held_fd) || (ready == 1 && (p.revents & POLLNVAL))) {
            /* A number the program may own now: never polled again. */
            warn_stderr("cpprof: the HTTP server's listening socket "
                        "(descriptor %d) was closed by the program; the "
                        "server has stopped (CPPROF_HTTP=%s, before anyone "
                        "asked)\n", held_fd, held_addr);
            return NULL;
        }
        if (ready == 1)
            break;
    }
    atomic_store(&handed, true);
    own_work_enter();
    thread_label_internal("http"); /* cpprof's, now that it allocates */
    int rc = http_start_listening(held_addr, held_fd);
    own_work_leave();
    if (rc < 0)
        warn_stderr("cpprof: cannot serve CPPROF_HTTP=%s: %s (pid %d, %s)\n",
                    held_addr, cpprof_strerror(rc), (int)getpid(),
                    warn_program_name());
    return NULL;
}

/* The waiting thread, made by the C library's pthread_create itself, with
 * every signal blocked: not through cpprof's interposer, whose start
 * wrapper gives a thread its registry entry and labels, allocations that
 * would give it a malloc arena of its own.  glibc's fork handlers lock
 * and unlock every arena, in the parent and in the child, so an arena
 * costs each fork a page copied on either side (bench/fork).  Until the
 * first client the thread allocates nothing; then it takes its label and
 * is cpprof's like any other. */
static int start_waiting_thread(void)
{
    static void *next_create;
    int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                  void *) =
        (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
                 void *))interpose_next(&next_create, "pthread_create");
    if (create == NULL)
        return -ENOSYS;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = create(&t, NULL, wait_for_client, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -rc;
    pthread_detach(t);
    return 0;
}

/* A worker forked before the server loaded, woken (forkwake.c): what the
 * server's part does (http_forks.c), or, asked to take its parent's
 * place, the same wait for a client on the parent's address. */
static void woken(int what)
{
    pid_t parent = worker_of;
    if (what & FORKWAKE_ADOPT) {
        forkwake_disarm(false);
        if (http_zero_listen(held_addr) == 0) {
            char title[128];
            procfile_title(getpid(), warn_program_name(), title,
                           sizeof title);
            forkwake_disarm(true);
            warn_stderr("cpprof: pid %d (%s) was forked by pid %d, which "
                        "has exited, so it serves %s in its place\n",
                        (int)getpid(), title, (int)parent, held_addr);
            what &= ~FORKWAKE_START;
        } else {
            forkwake_rearm();
        }
    }
    if (what & FORKWAKE_START)
        http_forks_woken(parent, held_addr, FORKWAKE_START);
}

/* fork(): the child drops the parent's listener and is a worker of the
 * parent's (only while no server took over: then http.c's handlers, which
 * replace these, do it).  Async-signal-safe: close and stores. */
static void nothing(void) {}

ATFORK_CHILD static void forget_after_fork(void)
{
    if (!in_family)
        return;
    /* Handed to the server, the listener keeps its number (it is high
     * already); a fork before the server's own handlers replace these is
     * still a worker, and its copy is closed as http.c's would.  Unless
     * the number names something else now (a failed start closed it). */
    if (held_fd >= 0 && still_ours(held_fd))
        close(held_fd);
    held_fd = -1;
    worker_of = holder;
    holder = getpid();
    if (cfg_int(CFG_HTTP_FORKS)) {
        forkwake_arm(worker_of, woken);
    } else {
        forkwake_forget_after_fork();
        in_family = false;
    }
}

/* upper.c's, in libcpprof.so only: elsewhere the server is linked in. */
bool upper_present(void) __attribute__((weak));

int http_zero_listen(const char *addr)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (cfg_server_refused() >= 0)
        return CPPROF_EREFUSED;
    if (upper_present != NULL && !upper_present())
        return CPPROF_EUPPER;
    int rc = addr_parse(addr, &ss, &len);
    if (rc == 0)
        rc = cfg_server_address_allowed(&ss);
    if (rc < 0)
        return rc;
    char copy[sizeof held_addr]; /* addr may be held_addr itself */
    snprintf(copy, sizeof copy, "%s", addr);
    int fd = addr_listen(&ss, len);
    if (fd < 0)
        return fd;
    fd = fd_move_high(fd, fd_floor());
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return -errno;
    }
    snprintf(held_addr, sizeof held_addr, "%s", copy);
    held_fd = fd;
    held_dev = st.st_dev;
    held_ino = st.st_ino;
    holder = getpid();
    in_family = true;
    atomic_store(&handed, false);
    const char *why;
    if (cfg_int(CFG_HTTP_FORKS))
        forkwake_prepare(&why); /* the server says why, when it starts */
    static const atfork_handlers on_fork = {nothing, nothing,
                                            forget_after_fork};
    atfork_add(ATFORK_HTTP, &on_fork);
    rc = start_waiting_thread();
    if (rc < 0) {
        close(fd);
        held_fd = -1;
        return rc;
    }
    return 0;
}
