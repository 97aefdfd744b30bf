/*
 * http_forks.c -- pre-fork servers: the serving process's forks are its
 * workers, reached through its address and started only when asked; every
 * index lists them by the title the program gives them.
 *
 * nginx, PostgreSQL, Apache's prefork and php-fpm do their work in forked
 * children.  Served from the process that was started alone, a 5 s CPU
 * profile of PostgreSQL's postmaster under load held 0 samples, and nginx
 * with `daemon on` served nothing at all (the started process exits).  A
 * server in every worker cost each 10 threads, 3 MB and a port the kernel
 * picked, and made every fork of the serving process 5 times dearer.
 *
 * So a fork of a serving process (or of a worker: nginx's master forks its
 * workers before it takes the address of the process that started it) is
 * armed (forkwake.c) and nothing more: its fork handler lists it in the
 * family's table.  A request for it (/debug/pprof/pid/PID/..., served by
 * its parent) wakes it; at its next wait it starts a thread of cpprof's
 * that starts its part: a server with no listener, whose connections the parent hands it one per relayed
 * request (http_relay.c), which stops again after http_worker_idle_ms
 * without one.  A child that execs or exits starts nothing.  With
 * http_forks=0, forks are not armed.
 *
 * A daemon's fork, whose parent exits soon after the fork (nginx's
 * `daemon on`, `setsid -f`), takes the parent's address instead, since
 * nobody serves it any longer: the daemon serves where the user looks.
 */
#define _GNU_SOURCE
#include "http_server.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "cpprof.h"
#include "forkwake.h"
#include "own.h"
#include "procfile.h"
#include "warn.h"

enum { HOST_TEXT_MAX = 64, TITLE_MAX = 128, CHAIN_MAX = 8 };

static char served_addr[HOST_TEXT_MAX + 8]; /* the address the family serves */
/* This process's pid while it serves or is armed: its children read it as
 * their parent's.  getppid() in a child's fork handler names the parent
 * only if the parent has not exited yet, and a daemon's first process
 * exits at once after the fork (nginx's does). */
static pid_t serving_pid;
static bool in_family;    /* it serves or is armed: its forks are workers */
static pid_t forked_from; /* the parent at the fork, in a worker */
/* Why this process's forks are not workers, or NULL. */
static const char *forks_declined;

void http_forks_serving(const char *addr)
{
    snprintf(served_addr, sizeof served_addr, "%s", addr);
    serving_pid = getpid();
    in_family = true;
    forks_declined = NULL;
    if (!cfg_int(CFG_HTTP_FORKS))
        return;
    const char *why = NULL;
    if (forkwake_prepare(&why) < 0 || http_relay_listen(&why) < 0)
        forks_declined = why;
}

void http_forks_stopping(void) { http_relay_close(); }

/* A worker's own title, for the lines it writes on stderr. */
static const char *own_title(char *buf, size_t size)
{
    procfile_title(getpid(), warn_program_name(), buf, size);
    return buf;
}

/* The parent's address, which this process inherited: it serves there in
 * the parent's place, if it is free. */
static bool serve_in_parents_place(void)
{
    char addr[sizeof served_addr], title[TITLE_MAX];
    snprintf(addr, sizeof addr, "%s", served_addr);
    if (http_start(addr, false) != 0)
        return false;
    warn_stderr("cpprof: pid %d (%s) was forked by pid %d, which has "
                "exited, so it serves %s in its place\n", (int)getpid(),
                own_title(title, sizeof title), (int)forked_from, addr);
    return true;
}

/* What a woken worker was asked to do, on a thread of cpprof's: the
 * program's thread that met the wake goes back to its wait at once
 * rather than wait for a server to start, on whatever stack it has. */
static void *start_as_asked(void *arg)
{
    int what = (int)(intptr_t)arg;
    own_work_enter();
    if (what & FORKWAKE_ADOPT) {
        forkwake_disarm(false);
        if (serve_in_parents_place()) {
            forkwake_disarm(true);
            own_work_leave();
            return NULL;
        }
        forkwake_rearm();
    }
    if (what & FORKWAKE_START) {
        int rc = http_start_worker(forked_from);
        static bool said;
        char title[TITLE_MAX];
        if (rc < 0 && rc != CPPROF_ERUNNING)
            forkwake_mark_serving(false); /* not starting any longer */
        if (rc < 0 && rc != CPPROF_ERUNNING && !said) {
            said = true;
            warn_stderr("cpprof: pid %d (%s), a worker of pid %d, cannot "
                        "start its part: %s\n", (int)getpid(),
                        own_title(title, sizeof title), (int)forked_from,
                        cpprof_strerror(rc));
        }
    }
    own_work_leave();
    return NULL;
}

static int create_starter(void *what)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, start_as_asked, what);
    if (rc == 0)
        pthread_detach(t);
    return -rc;
}

/* The wake's work, from the program's wait (forkwake.c). */
static void act_on_wake(int what)
{
    own_work_enter();
    int rc = http_as_internal(create_starter, (void *)(intptr_t)what);
    own_work_leave();
    if (rc < 0) {
        forkwake_mark_serving(false); /* not starting any longer */
        static bool said;
        char title[TITLE_MAX];
        if (!said) {
            said = true;
            warn_stderr("cpprof: pid %d (%s), a worker of pid %d, has no "
                        "thread to start its part on: %s\n", (int)getpid(),
                        own_title(title, sizeof title), (int)forked_from,
                        strerror(-rc));
        }
    }
}

void http_forks_woken(pid_t parent, const char *addr, int what)
{
    snprintf(served_addr, sizeof served_addr, "%s", addr);
    forked_from = parent;
    serving_pid = getpid();
    in_family = true;
    act_on_wake(what);
}

void http_forks_after_fork(bool was_serving)
{
    bool wanted = (was_serving || in_family) && cfg_int(CFG_HTTP_FORKS) &&
                  forks_declined == NULL;
    if (!wanted) {
        forkwake_forget_after_fork();
        in_family = false;
        return;
    }
    forked_from = serving_pid;
    serving_pid = getpid();
    forkwake_arm(forked_from, act_on_wake);
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

/* Whether the entry's process still runs the image that forked it: not
 * exited, and (where /proc says) still of the name it had, since an exec
 * that went around execinterpose.c renames a process as a rule. */
static bool still_worker(const forkwake_slot *w, pid_t pid)
{
    if (has_exited(pid))
        return false;
    char path[32], name[sizeof w->comm + 2];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    ssize_t n = procfile_read(AT_FDCWD, path, name, sizeof name);
    if (n <= 0)
        return true;
    if (name[n - 1] == '\n')
        name[n - 1] = '\0';
    return strcmp(name, w->comm) == 0;
}

/* A worker as the index shows it. */
typedef struct {
    const forkwake_slot *slot;
    pid_t pid;
    char title[TITLE_MAX];
    char path[CHAIN_MAX * 20]; /* "pid/B/pid/C/": from this process */
} worker_row;

/* The path from this process to the table's process of slot i, through
 * its parents, or false when it is not below this process. */
static bool path_to(forkwake_slot *table, pid_t pid, char *path, size_t size)
{
    pid_t chain[CHAIN_MAX];
    int depth = 0;
    pid_t self = getpid();
    while (pid != self) {
        if (depth == CHAIN_MAX)
            return false;
        chain[depth++] = pid;
        pid_t parent = 0;
        for (unsigned i = 0; i < FORKWAKE_SLOTS && parent == 0; i++)
            if (atomic_load(&table[i].pid) == pid)
                parent = table[i].parent;
        if (parent == 0)
            return false;
        pid = parent;
    }
    size_t used = 0;
    path[0] = '\0';
    while (depth > 0 && used < size)
        used += (size_t)snprintf(path + used, size - used, "pid/%d/",
                                 (int)chain[--depth]);
    return used < size;
}

/* Calls fn for each live worker below this process, dropping the entries
 * of processes that have exited or exec'd. */
static void each_worker(void (*fn)(const worker_row *, void *), void *arg)
{
    forkwake_slot *table = forkwake_table();
    if (table == NULL || !in_family)
        return;
    pid_t self = getpid();
    for (unsigned i = 0; i < FORKWAKE_SLOTS; i++) {
        forkwake_slot *w = &table[i];
        pid_t pid = atomic_load(&w->pid);
        if (pid <= 0 || pid == self)
            continue;
        if (!still_worker(w, pid)) {
            atomic_compare_exchange_strong(&w->pid, &pid, 0);
            continue;
        }
        worker_row row = {.slot = w, .pid = pid};
        if (!path_to(table, pid, row.path, sizeof row.path))
            continue;
        procfile_title(pid, w->comm, row.title, sizeof row.title);
        fn(&row, arg);
    }
}

static void url_of(const worker_row *w, char *url, size_t size)
{
    char host[HOST_TEXT_MAX];
    const char *colon = strrchr(served_addr, ':');
    snprintf(host, sizeof host, "%.*s",
             (int)(colon ? colon - served_addr : 0), served_addr);
    snprintf(url, size, "%s://%s:%d/debug/pprof/%s",
             http_srv.tls.cert != NULL ? "https" : "http",
             host[0] ? host : "127.0.0.1", http_srv.port, w->path);
}

/* What the index says of a worker's part. */
static const char *state_name(const forkwake_slot *s)
{
    switch (atomic_load(&s->serving)) {
    case FORKWAKE_STARTING:
        return "starting";
    case FORKWAKE_SERVING:
        return "serving";
    default:
        return "armed";
    }
}

static void append_json(const worker_row *w, void *list)
{
    char url[HOST_TEXT_MAX + sizeof w->path + 48];
    url_of(w, url, sizeof url);
    json_array_append_new(
        list, json_pack("{s:i, s:i, s:s, s:s, s:s, s:s}", "pid", (int)w->pid,
                        "parent", (int)w->slot->parent, "name", w->slot->comm,
                        "title", w->title, "state", state_name(w->slot),
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

/* A title is the program's to choose: only letters, digits and a few
 * signs are written as they are. */
static void put_text(FILE *f, const char *text)
{
    for (; *text; text++)
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                   "0123456789-_.:/ []()", *text) != NULL)
            fputc(*text, f);
        else
            fprintf(f, "&#%d;", (unsigned char)*text);
}

/* The path is digits and "pid/". */
static void put_row(const worker_row *w, void *f)
{
    fprintf(f, "<tr><td class=\"num\">%d</td><td class=\"num\">%d</td><td>",
            (int)w->pid, (int)w->slot->parent);
    put_text(f, w->title);
    fprintf(f, "</td><td>%s</td><td><a href=\"%s\">%s</a></td></tr>\n",
            state_name(w->slot), w->path, w->path);
}

static void count_one(const worker_row *w, void *n)
{
    (void)w;
    ++*(int *)n;
}

void http_forks_put_html(FILE *f)
{
    const char *declined = http_forks_declined();
    if (declined != NULL) {
        fputs("<section id=\"workers\">\n<h2>Forked processes</h2>\n"
              "<p class=\"note\">If this process forks, its children are "
              "not workers: ", f);
        put_text(f, declined);
        fputs(".</p>\n</section>\n", f);
        return;
    }
    int n = 0;
    each_worker(count_one, &n);
    if (n == 0 && forked_from == 0)
        return;
    fputs("<section id=\"workers\">\n<h2>Forked processes</h2>\n", f);
    if (forked_from > 0)
        fprintf(f, "<p class=\"note\">This process (pid %d) was forked by "
                   "pid %d.</p>\n", (int)getpid(), (int)forked_from);
    fprintf(f, "<p class=\"note\">%d worker%s of this process (forked "
               "children that live on, as a pre-forking server's): each "
               "costs nothing until asked here, serves while in use, and "
               "stops again after %ld ms without a request "
               "(CPPROF_HTTP_WORKER_IDLE_MS; CPPROF_HTTP_FORKS=0: forks are "
               "not workers):</p>\n", n, n == 1 ? "" : "s",
            cfg_int(CFG_HTTP_WORKER_IDLE_MS));
    if (n > 0) {
        fputs("<table class=\"workers\"><thead><tr><th class=\"num\">pid"
              "</th><th class=\"num\">parent</th><th>title</th><th>state"
              "</th><th>profiles</th></tr></thead>\n<tbody>\n", f);
        each_worker(put_row, f);
        fputs("</tbody></table>\n", f);
    }
    fputs("</section>\n", f);
}
