/*
 * http_watch.c -- the HTTP server's descriptors, which the host cannot
 * take, and the watch thread that checks them and accepts the server's
 * connections.
 *
 * The server's descriptors live in the host's table.  A daemon that closes
 * every inherited descriptor and opens its own files would get their
 * numbers, and libmicrohttpd, still polling them, would accept on and read
 * from the daemon's files (its wake-up read of eight bytes moved the
 * file's offset: records written were never read back).  So:
 *   - the listener is moved to a high number (fd_floor()), and in zero-code
 *     mode, where the process has one thread at start, every lower free
 *     number is held while libmicrohttpd starts so that its own
 *     descriptors land high too: a program meets them only after opening
 *     about a thousand files of its own;
 *   - a watch thread checks every WATCH_MS that each descriptor is still
 *     the object it was (the listener also before each accept: the watch
 *     thread is the one that accepts, see http_conns.c).  When one was
 *     closed, it puts a harmless eventfd back at that exact number
 *     (F_DUPFD at a free number returns that number, so nothing the host
 *     opened is ever replaced) and stops the
 *     server, saying so once on stderr.  libmicrohttpd's threads are then
 *     asleep in poll() on the objects that were closed, which poll keeps
 *     alive and which nothing can wake: MHD_stop_daemon() would
 *     wait for it for ever.  So it is left asleep, and should it ever wake
 *     it finds only our placeholders at its numbers.  The old listener
 *     keeps its port until the process exits.  When the number already names
 *     something of the host's, stopping would close it; the server is then
 *     left as it is and stderr says that too.
 */

#define _GNU_SOURCE /* pthread_setname_np */
#include "http_server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "cpprof.h"
#include "symbolize.h"
#include "warn.h"

enum { WATCH_MS = 100 };

/* The server's descriptors (listener first, then libmicrohttpd's), each
 * with the identity it had at start, and the thread that checks them. */
enum { OWN_FDS_MAX = 2 * 64 + 8 }; /* an eventfd a thread, and room */
static struct own_fd {
    int fd;
    dev_t dev;
    ino_t ino;
} own_fds[OWN_FDS_MAX];
static size_t n_own_fds;
static struct MHD_Daemon *watch_daemon; /* accepted for, on watch_fd */
static int watch_fd = -1;
static pthread_t watch_thread;
static bool watching;
static atomic_bool watch_stop;
static atomic_bool server_lost; /* the watch thread stopped the server */
/* A worker's part that is done: idle for http_worker_idle_ms, or its
 * parent closed the control connection.  The watch thread stops it. */
static atomic_bool retiring;

/* Holds every free number below `floor` (with duplicates of `fd`), so that
 * descriptors opened meanwhile land at or above it.  Only while the
 * process has one thread: another thread opening a file would get a high
 * number, or none.  Returns how many are held, in held[] (malloc'd). */
size_t http_fds_hold_low(int fd, int floor, int **held)
{
    size_t n = 0;
    *held = malloc((size_t)floor * sizeof **held);
    for (int d; *held != NULL && n < (size_t)floor &&
                (d = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0;) {
        if (d >= floor) {
            close(d);
            break;
        }
        (*held)[n++] = d;
    }
    return n;
}

void http_fds_release(int *held, size_t n)
{
    for (size_t i = 0; i < n; i++)
        close(held[i]);
    free(held);
}

/* Records fd and the object it names now as one of the server's. */
void http_watch_own(int fd)
{
    struct stat st;
    if (n_own_fds < OWN_FDS_MAX && fstat(fd, &st) == 0)
        own_fds[n_own_fds++] = (struct own_fd){fd, st.st_dev, st.st_ino};
}

/* Whether the descriptor `name` of /proc/self/fd (open as dir) is an anonymous
 * inode (eventfd, epoll): what libmicrohttpd opens for itself. */
static bool anon_inode(DIR *dir, const char *name)
{
    char link[64];
    ssize_t n = readlinkat(dirfd(dir), name, link, sizeof link - 1);
    return n > 0 && strncmp(link, "anon_inode:", 11) == 0;
}

/* Records the descriptors libmicrohttpd opened as it started: anonymous
 * inodes not open before (before[] lists those, ending with -1). */
void http_watch_own_new(const int *before)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        bool old = e->d_name[0] == '.' || fd == dirfd(d);
        for (const int *b = before; *b >= 0 && !old; b++)
            old = *b == fd;
        if (!old && anon_inode(d, e->d_name))
            http_watch_own(fd);
    }
    closedir(d);
}

/* The numbers open now, ending with -1 (malloc'd), or NULL. */
int *http_fds_open(void)
{
    size_t n = 0, cap = 16;
    int *fds = malloc(cap * sizeof *fds);
    DIR *d = opendir("/proc/self/fd");
    for (struct dirent *e; fds != NULL && d != NULL && (e = readdir(d)) != NULL;) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd == dirfd(d))
            continue;
        if (n + 1 == cap) {
            int *grown = realloc(fds, (cap *= 2) * sizeof *fds);
            if (grown == NULL) {
                free(fds);
                fds = NULL;
                break;
            }
            fds = grown;
        }
        fds[n++] = fd;
    }
    if (d != NULL)
        closedir(d);
    if (fds != NULL)
        fds[n] = -1;
    return fds;
}

enum fd_fate { FD_KEPT, FD_CLOSED, FD_TAKEN };

static enum fd_fate fate_of(const struct own_fd *o)
{
    struct stat st;
    if (fstat(o->fd, &st) != 0)
        return errno == EBADF ? FD_CLOSED : FD_KEPT;
    return st.st_dev == o->dev && st.st_ino == o->ino ? FD_KEPT : FD_TAKEN;
}

/* Puts a placeholder at o's number if it is still free; whether it did. */
static bool refill(const struct own_fd *o)
{
    int ph = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ph < 0)
        return false;
    int at = ph == o->fd ? ph : fcntl(ph, F_DUPFD_CLOEXEC, o->fd);
    if (at != ph)
        close(ph);
    if (at == o->fd)
        return true;
    if (at >= 0)
        close(at); /* the number was taken meanwhile: the host's now */
    return false;
}

/* Called by the watch thread: a lost descriptor is dealt with as this
 * file's opening comment says.  Returns whether the server was given up. */
static bool stop_if_lost(void)
{
    size_t lost = n_own_fds;
    for (size_t i = 0; i < n_own_fds && lost == n_own_fds; i++)
        if (fate_of(&own_fds[i]) != FD_KEPT)
            lost = i;
    if (lost == n_own_fds)
        return false;
    bool safe = true;
    for (size_t i = 0; i < n_own_fds; i++)
        if (fate_of(&own_fds[i]) == FD_TAKEN ||
            (fate_of(&own_fds[i]) == FD_CLOSED && !refill(&own_fds[i])))
            safe = false;
    /* Handlers waiting out a profile end, as on a stop. */
    atomic_store(&http_stopping, true);
    if (safe)
        warn_stderr("cpprof: the HTTP server's %s (descriptor %d) was "
                "closed by the program; the server has stopped\n",
                lost == 0 ? "listening socket" : "descriptor",
                own_fds[lost].fd);
    else
        warn_stderr("cpprof: the HTTP server's descriptor %d was closed "
                "and its number reused by the program; the server has "
                "stopped, but its thread may still use that number\n",
                own_fds[lost].fd);
    return true;
}

/* Accepts the connection waiting on the listener (http_conns.c); returns
 * whether to leave the listener unpolled until the next tick: accept
 * failed, as at the descriptor limit, where the client stays queued and
 * the listener readable.  Said once on stderr. */
static bool accept_or_back_off(void)
{
    static atomic_bool said;
    int rc = http_conns_accept(watch_daemon, watch_fd);
    if (rc == -EPIPE && http_srv.relayed) { /* the parent let go */
        atomic_store(&retiring, true);
        return true;
    }
    if (rc < 0 && !atomic_exchange(&said, true))
        warn_stderr("cpprof: the HTTP server cannot accept a connection: "
                    "%s; it leaves it queued and tries again every %d ms\n",
                    cpprof_strerror(rc), WATCH_MS);
    return rc < 0;
}

/* The watch thread also accepts the server's connections: it polls the
 * listener while there is room for one more (http_conns_room) and it is
 * not backing off, and every WATCH_MS checks the server's descriptors and
 * the connections' time to be authorized.  The listener is checked before
 * every accept too, so that a number the program took over is never
 * accepted on. */
static void *watch_fds(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "cpprof-watch");
    http_label_thread();
    int64_t next_tick = http_now_ms() + WATCH_MS;
    bool back_off = false;
    while (!atomic_load(&watch_stop)) {
        int64_t wait = next_tick - http_now_ms();
        struct pollfd p = {.fd = watch_fd, .events = POLLIN};
        nfds_t n = !back_off && http_conns_room();
        int ready = poll(&p, n, wait > 0 ? (int)wait : 0);
        back_off = false;
        if (atomic_load(&watch_stop))
            break;
        bool tick = http_now_ms() >= next_tick;
        bool listener_moved = n_own_fds > 0 && fate_of(&own_fds[0]) != FD_KEPT;
        if ((tick || listener_moved) && stop_if_lost()) {
            atomic_store(&server_lost, true);
            break;
        }
        if (tick) {
            http_conns_tick();
            symbolize_release_if_idle();
            next_tick = http_now_ms() + WATCH_MS;
            if (http_srv.relayed && http_windows_open() == 0 &&
                http_conns_idle_ms() >= cfg_int(CFG_HTTP_WORKER_IDLE_MS))
                atomic_store(&retiring, true);
        }
        if (ready == 1)
            back_off = (!(p.revents & POLLIN) && !http_srv.relayed) ||
                       accept_or_back_off();
        if (ready == 1 && http_srv.relayed && (p.revents & (POLLHUP | POLLERR)))
            atomic_store(&retiring, true);
        if (atomic_load(&retiring))
            break;
    }
    if (atomic_load(&retiring) && !atomic_load(&watch_stop))
        http_worker_retire();
    return NULL;
}

static int create_watch_thread(void *arg)
{
    (void)arg;
    return -pthread_create(&watch_thread, NULL, watch_fds, NULL);
}

int http_watch_start(struct MHD_Daemon *daemon, int listen_fd)
{
    watch_daemon = daemon;
    watch_fd = listen_fd;
    atomic_store(&watch_stop, false);
    atomic_store(&server_lost, false);
    atomic_store(&retiring, false);
    int rc = http_as_internal(create_watch_thread, NULL);
    watching = rc == 0;
    return rc;
}

bool http_watch_end(void)
{
    bool lost = false;
    if (watching) {
        atomic_store(&watch_stop, true); /* seen within WATCH_MS */
        pthread_join(watch_thread, NULL);
        watching = false;
        lost = atomic_load(&server_lost);
    }
    n_own_fds = 0;
    return lost;
}

/* The watch thread's own end of the server (a worker's part retiring):
 * nothing joins it, so it lets itself be reaped by the system. */
bool http_watch_leave(void)
{
    if (watching) {
        pthread_detach(watch_thread);
        watching = false;
    }
    n_own_fds = 0;
    return atomic_load(&server_lost);
}

bool http_watch_stopping(void)
{
    return atomic_load(&watch_stop);
}

bool http_watch_lost(void)
{
    return atomic_load(&server_lost);
}

/* In a forked child the watch thread is gone, and what it watched is the
 * parent's business. */
void http_watch_forget_after_fork(void)
{
    /* libmicrohttpd's descriptors (its threads' eventfds) are the
     * parent's business: a worker must hold none of cpprof's.  Unless the
     * program took the server's numbers (then they may be its own), or a
     * number no longer names what it did.  The listener, first, is
     * http.c's to close. */
    for (size_t i = 1; i < n_own_fds && !atomic_load(&server_lost); i++)
        if (fate_of(&own_fds[i]) == FD_KEPT)
            close(own_fds[i].fd);
    watching = false;
    n_own_fds = 0;
    atomic_store(&server_lost, false);
}
