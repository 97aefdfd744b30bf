/*
 * http_forks.c -- pre-fork servers: a forked child that lives on serves
 * too, and every index of its family lists it.
 *
 * nginx, PostgreSQL, Apache's prefork and php-fpm do their work in forked
 * children.  Served from the process that was started alone, a 5 s CPU
 * profile of PostgreSQL's postmaster under load held 0 samples, and nginx
 * with `daemon on` served nothing at all (the started process exits).
 *
 * A child that execs or exits soon must cost no more than the fork (a
 * backend of `pgbench -C` lives a few ms; a shell's child execs at once),
 * so a child does not serve at once: a thread of cpprof's own, created as
 * fork returns in the child, waits http_fork_delay_ms and then starts the
 * server.  An exec or an exit before then ends that thread with the
 * process, having done nothing.  Only children of a process that serves,
 * or whose own such thread is waiting to: forks of a program that does
 * not serve (a test framework's, a shell's) start nothing, nor do they
 * with http_forks=0.
 *
 * Where it serves: its parent still serves its address, so the child
 * takes a port the kernel picks, on the same host, and writes it in a
 * table that every process forked below the first server shares (one
 * MAP_SHARED page, made when that server starts, so before its forks);
 * each process's index lists the table's live entries, so `go tool pprof`
 * reaches any worker from the address the user knows.  A child whose
 * parent has exited meanwhile (a daemon's fork: nginx's `daemon on`,
 * `setsid -f`) takes the parent's address instead, since nobody serves it
 * any longer: the daemon serves where the user looks.  A child serving a
 * port of its own watches a while for its parent to exit, since a
 * daemon's first process may outlive the delay.  Both are said on
 * stderr, the workers once per family.
 *
 * An entry names a port that its process holds: one whose port may be
 * anyone's is a door to whoever binds it next, the token sent along by
 * the clients that follow the list.  So a worker leaves the table when
 * its server stops, before the listener closes, and at exit; one that
 * leaves no word (_exit, a kill, an exec) is dropped by the readers as
 * soon as it has exited, whether or not its parent has reaped it yet
 * (a zombie's sockets are closed), which they ask without waiting for it:
 * cpprof never reaps the program's children.
 */
#define _GNU_SOURCE /* dladdr */
#include "http_server.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "config.h"
#include "cpprof.h"
#include "procfile.h"
#include "warn.h"

#define WORKERS_MAX 100
#define HOST_TEXT_MAX 64

/* A forked process serving.  `pid` is claimed (0 to -1) before the other
 * fields are written and set last, so a reader that sees a pid sees them. */
typedef struct {
    _Atomic pid_t pid; /* 0: free; -1: being written */
    pid_t parent;
    int port;
    bool tls;
    char host[HOST_TEXT_MAX]; /* as in the address served, for a URL */
    char name[16];            /* the process's name (comm) */
} worker_slot;

typedef struct {
    atomic_bool workers_said; /* the family's first worker said where */
    atomic_bool declined_said; /* or why forks do not serve */
    worker_slot slot[WORKERS_MAX];
} worker_table;

static worker_table *table;    /* shared by the family, or NULL */
static char served_addr[HOST_TEXT_MAX + 8]; /* this process's address */
static bool will_serve;        /* its thread waits to serve (a child) */
static pid_t forked_from;      /* the parent at the fork, in a child */
/* This process's pid, recorded when it serves or will: its children read
 * it as their parent's.  getppid() in a child's fork handler names the
 * parent only if the parent has not exited yet, and a daemon's first
 * process exits at once after the fork (nginx's does), which a loaded
 * machine may run before the child: taking init for the parent, the
 * child would wait for it to exit and never serve the parent's place. */
static pid_t serving_pid;
static int my_slot = -1;       /* this process's entry, once it serves */

/* The host part of "HOST:PORT" ("[::1]" with its brackets; "" for
 * ":PORT"). */
static void host_of(const char *addr, char *host, size_t size)
{
    const char *colon = strrchr(addr, ':');
    size_t n = colon != NULL ? (size_t)(colon - addr) : strlen(addr);
    snprintf(host, size, "%.*s", (int)n, addr);
}

/* Why this process's forks cannot serve, or NULL.  A fork's child starts
 * its waiting thread from its fork handler, and starting a thread
 * allocates (the thread's record, glibc's TLS vector).  glibc makes its
 * own malloc usable in the child before the handlers run; another
 * allocator may still be locked by a thread left in the parent (ASan's
 * was, and the soak's fork hung for ever), or by the forking thread
 * itself until its own handler runs.  So forks serve only where the
 * program's malloc is glibc's. */
static const char *forks_declined;
static char forks_declined_text[PATH_MAX + 160];

static void check_allocator(void)
{
    /* The malloc cpprof's forwards to, found by libcpprof.so, whose
     * lookups are the program's (this object's find its own tree first,
     * upper.c). */
    const struct allocator *next = alloc_next_slow();
    void *m = next != NULL ? (void *)next->malloc : NULL;
    Dl_info info;
    if (m == NULL || !dladdr(m, &info) || info.dli_fname == NULL) {
        forks_declined = "forks do not serve: the program's malloc could "
                         "not be found";
        return;
    }
    const char *base = strrchr(info.dli_fname, '/');
    base = base != NULL ? base + 1 : info.dli_fname;
    if (strncmp(base, "libc.so", 7) == 0)
        return;
    snprintf(forks_declined_text, sizeof forks_declined_text,
             "forks do not serve: the program's malloc is %s's, which a "
             "fork's child may not be able to use where cpprof would start "
             "the thread that serves", info.dli_fname);
    forks_declined = forks_declined_text;
}

void http_forks_serving(const char *addr)
{
    snprintf(served_addr, sizeof served_addr, "%s", addr);
    serving_pid = getpid();
    if (table != NULL)
        return;
    check_allocator();
    void *page = mmap(NULL, sizeof *table, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page != MAP_FAILED)
        table = page;
}

/* Writes this process into the family's table (a stale entry with its pid,
 * of a process that exited without saying, is dropped first). */
static void list_self(int port)
{
    if (table == NULL)
        return;
    pid_t self = getpid(), free_pid = 0;
    for (int i = 0; i < WORKERS_MAX; i++) {
        pid_t mine = self;
        atomic_compare_exchange_strong(&table->slot[i].pid, &mine, 0);
    }
    for (int i = 0; i < WORKERS_MAX; i++) {
        worker_slot *w = &table->slot[i];
        free_pid = 0;
        if (!atomic_compare_exchange_strong(&w->pid, &free_pid, -1))
            continue;
        w->parent = forked_from;
        w->port = port;
        w->tls = http_srv.tls.cert != NULL;
        host_of(served_addr, w->host, sizeof w->host);
        if (w->host[0] == '\0')
            snprintf(w->host, sizeof w->host, "127.0.0.1");
        if (prctl(PR_GET_NAME, w->name) != 0)
            w->name[0] = '\0';
        atomic_store(&w->pid, self);
        my_slot = i;
        return;
    }
    warn_stderr("cpprof: pid %d (%s) serves on port %d, but the family's "
            "%d forked processes that serve fill its list, so no index "
            "lists it\n", (int)self, warn_program_name(), port,
            WORKERS_MAX);
}

static void unlist_self(void)
{
    if (table != NULL && my_slot >= 0) {
        pid_t self = getpid();
        atomic_compare_exchange_strong(&table->slot[my_slot].pid, &self, 0);
        my_slot = -1;
    }
}

/* An exiting worker leaves the table (one killed is dropped by readers). */
__attribute__((destructor)) static void unlist_at_exit(void) { unlist_self(); }

void http_forks_stopping(void) { unlist_self(); }

static void say_daemon(const char *addr)
{
    warn_stderr("cpprof: pid %d (%s) was forked by pid %d, which has "
            "exited, so it serves %s in its place\n", (int)getpid(),
            warn_program_name(), (int)forked_from, addr);
}

static void say_workers(int port)
{
    if (table != NULL && atomic_exchange(&table->workers_said, true))
        return;
    char host[HOST_TEXT_MAX];
    host_of(served_addr, host, sizeof host);
    warn_stderr("cpprof: forked processes that live on serve too, each on "
            "a port of its own (the first: pid %d (%s), %s:%d); every "
            "index of the family lists them, under \"Forked processes\" "
            "(CPPROF_HTTP_FORKS=0: they do not serve)\n", (int)getpid(),
            warn_program_name(), host[0] ? host : "127.0.0.1",
            port);
}

/* The address of the parent, which this process inherited, and the one
 * it derives: the same host, a port the kernel picks. */
static char parent_addr[sizeof served_addr];

/* Serves the parent's address in the parent's place, if it is free. */
static bool serve_in_parents_place(void)
{
    if (http_start(parent_addr, false) != 0)
        return false;
    say_daemon(parent_addr);
    return true;
}

static void serve_on_own_port(void)
{
    char own[sizeof served_addr];
    host_of(parent_addr, own, sizeof own);
    strcat(own, ":0");
    int rc = http_start(own, false);
    int port = rc == 0 ? http_port() : rc;
    if (port > 0) {
        list_self(port);
        say_workers(port);
    } else {
        warn_stderr("cpprof: pid %d (%s), forked by pid %d, cannot serve "
                "%s: %s\n", (int)getpid(), warn_program_name(),
                (int)forked_from, own, cpprof_strerror(port));
    }
}

static void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) == EINTR)
        ;
}

/* How long a worker watches for its parent's exit, and how often: a
 * daemon's first process exits soon after its fork, but not always
 * before the delay (under a sanitizer, 2 s later). */
#define ADOPT_WATCH_MS 10000
#define ADOPT_POLL_MS 100

/* Moves from the own port to the parent's address once the parent has
 * exited, within the watch. */
static void adopt_if_orphaned(void)
{
    for (int waited = 0; waited < ADOPT_WATCH_MS; waited += ADOPT_POLL_MS) {
        if (getppid() != forked_from) {
            cpprof_http_stop();
            if (!serve_in_parents_place())
                serve_on_own_port();
            return;
        }
        sleep_ms(ADOPT_POLL_MS);
    }
}

/* After the delay: the parent's address if the parent has gone (a
 * daemon), else a port of its own on the same host, watching a while
 * for the parent to go. */
static void *wait_then_serve(void *unused)
{
    (void)unused;
    snprintf(parent_addr, sizeof parent_addr, "%s", served_addr);
    sleep_ms((long)cfg_int(CFG_HTTP_FORK_DELAY_MS));
    if (getppid() != forked_from && serve_in_parents_place())
        return NULL;
    serve_on_own_port();
    adopt_if_orphaned();
    return NULL;
}

static int create_waiter(void *unused)
{
    (void)unused;
    pthread_t t;
    int rc = pthread_create(&t, NULL, wait_then_serve, NULL);
    if (rc == 0)
        pthread_detach(t);
    return -rc;
}

void http_forks_after_fork(bool was_serving)
{
    bool wanted = was_serving || will_serve;
    will_serve = false;
    my_slot = -1; /* the parent's entry, not this process's */
    if (!wanted || !cfg_int(CFG_HTTP_FORKS))
        return;
    if (forks_declined != NULL) {
        if (table == NULL || !atomic_exchange(&table->declined_said, true))
            warn_stderr("cpprof: %s\n", forks_declined);
        return;
    }
    forked_from = serving_pid;
    serving_pid = getpid();
    int rc = http_as_internal(create_waiter, NULL);
    will_serve = rc == 0;
    if (rc < 0)
        warn_stderr("cpprof: pid %d (%s), forked by serving pid %d, will not "
                "serve: no thread to wait with (%s)\n", (int)getpid(),
                warn_program_name(), (int)forked_from,
                strerror(-rc));
}

/* ---- The index's list ------------------------------------------------- */

/* Whether /proc says process pid is a zombie (or dying: 'X').  A
 * thread-group leader that called pthread_exit while its other threads
 * run shows 'Z' too, and is taken for exited: unlisted, the safe side. */
static bool proc_says_exited(pid_t pid)
{
    char path[32], stat[128];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (procfile_read(AT_FDCWD, path, stat, sizeof stat) <= 0)
        return kill(pid, 0) < 0 && errno == ESRCH; /* no /proc here */
    const char *state = strrchr(stat, ')'); /* "pid (comm) S ..." */
    return state != NULL && state[1] == ' ' &&
           (state[2] == 'Z' || state[2] == 'X');
}

/* Whether process pid has exited, unreaped (a zombie) or gone, asked
 * without waiting for it: a pidfd polls readable once the whole process
 * has exited (Linux 5.3); without one, /proc says. */
static bool has_exited(pid_t pid)
{
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd >= 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int ready = poll(&p, 1, 0);
        close(fd);
        return ready == 1;
    }
    if (errno == ESRCH)
        return true;
#endif
    return proc_says_exited(pid);
}

/* Whether the entry's process still runs the image that wrote it: not
 * exited, and (where /proc says) still of the name it had, since an exec,
 * which ends the server without a word, renames a process as a rule. */
static bool still_serving(const worker_slot *w, pid_t pid)
{
    if (has_exited(pid))
        return false;
    char path[32], name[sizeof w->name + 2];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    ssize_t n = procfile_read(AT_FDCWD, path, name, sizeof name);
    if (n <= 0)
        return true;
    if (name[n - 1] == '\n')
        name[n - 1] = '\0';
    return strcmp(name, w->name) == 0;
}

/* Calls fn for each live entry but this process's, dropping those of
 * processes that have exited or exec'd. */
static void each_worker(void (*fn)(const worker_slot *, void *), void *arg)
{
    if (table == NULL)
        return;
    pid_t self = getpid();
    for (int i = 0; i < WORKERS_MAX; i++) {
        worker_slot *w = &table->slot[i];
        pid_t pid = atomic_load(&w->pid);
        if (pid <= 0 || pid == self)
            continue;
        if (!still_serving(w, pid)) {
            atomic_compare_exchange_strong(&w->pid, &pid, 0);
            continue;
        }
        fn(w, arg);
    }
}

static void url_of(const worker_slot *w, char *url, size_t size)
{
    snprintf(url, size, "%s://%s:%d/debug/pprof/", w->tls ? "https" : "http",
             w->host, w->port);
}

static void append_json(const worker_slot *w, void *list)
{
    char url[HOST_TEXT_MAX + 48];
    url_of(w, url, sizeof url);
    json_array_append_new(list, json_pack("{s:i, s:i, s:s, s:s}", "pid",
                                          (int)w->pid, "parent",
                                          (int)w->parent, "name", w->name,
                                          "url", url));
}

json_t *http_forks_json(void)
{
    json_t *list = json_array();
    each_worker(append_json, list);
    return list;
}

const char *http_forks_declined(void)
{
    return cfg_int(CFG_HTTP_FORKS) ? forks_declined : NULL;
}

/* A process's name is the program's to choose (prctl, argv[0]): only
 * letters, digits and a few signs are written as they are. */
static void put_name(FILE *f, const char *name)
{
    for (; *name; name++)
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789-_.:/ ", *name) != NULL)
            fputc(*name, f);
        else
            fprintf(f, "&#%d;", (unsigned char)*name);
}

/* The host in a URL is the family's own setting (an address addr.c
 * parsed: digits, dots, colons, brackets, "localhost"). */
static void put_row(const worker_slot *w, void *f)
{
    char url[HOST_TEXT_MAX + 48];
    url_of(w, url, sizeof url);
    fprintf(f, "<tr><td class=\"num\">%d</td><td class=\"num\">%d</td><td>",
            (int)w->pid, (int)w->parent);
    put_name(f, w->name);
    fprintf(f, "</td><td><a href=\"%s\">%s</a></td></tr>\n", url, url);
}

static void count_one(const worker_slot *w, void *n)
{
    (void)w;
    ++*(int *)n;
}

void http_forks_put_html(FILE *f)
{
    const char *declined = http_forks_declined();
    if (declined != NULL) {
        fputs("<section id=\"workers\">\n<h2>Forked processes</h2>\n"
              "<p class=\"note\">If this process forks, its children do "
              "not serve: ", f);
        put_name(f, declined + strlen("forks do not serve: "));
        fputs(".</p>\n</section>\n", f);
        return;
    }
    int n = 0;
    each_worker(count_one, &n);
    if (n == 0 && !will_serve)
        return;
    fputs("<section id=\"workers\">\n<h2>Forked processes</h2>\n", f);
    if (will_serve && forked_from > 0)
        fprintf(f, "<p class=\"note\">This process (pid %d) was forked by "
                   "pid %d.</p>\n", (int)getpid(), (int)forked_from);
    fprintf(f, "<p class=\"note\">%d other process%s of this family serve%s "
               "%s own profiles (forked children that live on, as a "
               "pre-forking server's workers; CPPROF_HTTP_FORKS=0 keeps "
               "them from serving):</p>\n", n, n == 1 ? "" : "es",
            n == 1 ? "s" : "", n == 1 ? "its" : "their");
    if (n > 0) {
        fputs("<table class=\"workers\"><thead><tr><th class=\"num\">pid"
              "</th><th class=\"num\">parent</th><th>name</th><th>profiles"
              "</th></tr></thead>\n<tbody>\n", f);
        each_worker(put_row, f);
        fputs("</tbody></table>\n", f);
    }
    fputs("</section>\n", f);
}
