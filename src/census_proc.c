/*
 * census_proc.c -- what the census reads of a thread in its files under
 * /proc/self/task, each opened relative to that directory, kept open for
 * one census: name, state and start time from stat (a third of status's
 * size), state and blocked-signal mask from status just before a running
 * thread is signalled, the kernel wait channel from wchan.  Apart from
 * census.c so that the kernel's formats are parsed in one place.
 */
#define _GNU_SOURCE
#include "census_int.h"
#include "procfile.h"
#include "proctasks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int census_open_task_dir(struct task_dir *td)
{
    td->pid = getpid();
    td->fd = proctasks_open();
    return td->fd >= 0 ? 0 : td->fd;
}

/* Reads a small file of /proc/self/task/TID into buf (NUL-terminated).
 * Returns its length or -errno. */
static ssize_t read_task_file(const struct task_dir *td, pid_t tid,
                              const char *file, char *buf, size_t len)
{
    char path[48];
    snprintf(path, sizeof path, "%d/%s", (int)tid, file);
    return procfile_read(td->fd, path, buf, len);
}

static void copy_field(char *dst, size_t cap, const char *v, size_t len)
{
    if (len >= cap)
        len = cap - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

/* The word the kernel's status file gives each state letter. */
static const char *state_word(char state)
{
    switch (state) {
    case 'R': return "running";
    case 'S': return "sleeping";
    case 'D': return "disk sleep";
    case 'T': return "stopped";
    case 't': return "tracing stop";
    case 'X': return "dead";
    case 'Z': return "zombie";
    case 'P': return "parked";
    case 'I': return "idle";
    default: return "";
    }
}

/* Sets the state and, for a thread that cannot give a stack at all, the
 * reason. */
void census_set_state(census_thread *t, char state)
{
    t->state = state;
    copy_field(t->state_name, sizeof t->state_name, state_word(state),
               strlen(state_word(state)));
    if (t->state == 'T' || t->state == 't')
        strcpy(t->missing, "thread stopped");
    else if (t->state == 'Z' || t->state == 'X')
        strcpy(t->missing, "thread exited");
}

/* Fills name and state from the thread's stat file ("TID (comm) S ..."),
 * a third the size of its status file.  Returns -ENOENT/-ESRCH when the
 * thread is gone. */
int census_read_stat(const struct task_dir *td, census_thread *t)
{
    char buf[512];
    ssize_t n = read_task_file(td, t->tid, "stat", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    /* comm may hold ')' itself: the last one closes it. */
    const char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
    if (!open_paren || !close_paren || close_paren < open_paren ||
        close_paren[1] != ' ' || !close_paren[2])
        return -ESRCH;
    copy_field(t->name, sizeof t->name, open_paren + 1,
               (size_t)(close_paren - open_paren - 1));
    census_set_state(t, close_paren[2]);
    /* starttime is the 22nd field, the state the 3rd. */
    const char *field = close_paren + 2;
    for (int k = 3; k < 22 && field; k++) {
        field = strchr(field, ' ');
        if (field)
            field++;
    }
    t->start_ticks = field ? strtoull(field, NULL, 10) : 0;
    return 0;
}

/* Re-reads the state, and whether the thread blocks signo (*blocked;
 * only the status file has the whole mask), just before a running thread
 * is signalled.  Returns -ENOENT/-ESRCH when the thread is gone. */
int census_recheck_before_signal(const struct task_dir *td, census_thread *t,
                                 int signo, bool *blocked)
{
    char buf[4096];
    ssize_t n = read_task_file(td, t->tid, "status", buf, sizeof buf);
    if (n < 0)
        return (int)n;
    size_t len;
    const char *v = procfile_status_field(buf, "State", &len);
    if (!v || len < 1)
        return -ESRCH;
    census_set_state(t, v[0]);
    *blocked = procfile_blocks_signal(buf, signo);
    return 0;
}

/* The kernel function a sleeping thread waits in; "" when running or when
 * the kernel will not say ("0"). */
void census_read_wchan(const struct task_dir *td, census_thread *t)
{
    char buf[sizeof t->wchan];
    if (t->state == 'R' ||
        read_task_file(td, t->tid, "wchan", buf, sizeof buf) <= 0 ||
        strcmp(buf, "0") == 0)
        return;
    copy_field(t->wchan, sizeof t->wchan, buf, strcspn(buf, "\n"));
}
