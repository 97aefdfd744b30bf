/* procfile.c -- see procfile.h.  Plain open/read/close: the callers run on
 * cpprof's own threads (the collector, the HTTP server) or on the thread
 * that starts a profile, never in a signal handler. */
#define _GNU_SOURCE
#include "procfile.h"
#include "upper_calls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t procfile_read(int dirfd, const char *path, char *buf, size_t cap)
{
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, cap - 1);
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    buf[n] = '\0';
    return n;
}

const char *procfile_status_field(const char *status, const char *key,
                                  size_t *len)
{
    size_t klen = strlen(key);
    for (const char *line = status; line && *line;) {
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            const char *v = line + klen + 1;
            v += strspn(v, " \t");
            *len = strcspn(v, "\n");
            return v;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return NULL;
}

/* Whether the line at `line` (`len` bytes, maybe cut short) is the field
 * `key`; if so, its value goes to out as procfile_status_value says, and
 * *got is its length. */
static bool take_if_field(const char *line, size_t len, const char *key,
                          char *out, size_t cap, ssize_t *got)
{
    size_t klen = strlen(key);
    if (len <= klen || memcmp(line, key, klen) != 0 || line[klen] != ':')
        return false;
    size_t at = klen + 1;
    while (at < len && (line[at] == ' ' || line[at] == '\t'))
        at++;
    size_t n = len - at < cap - 1 ? len - at : cap - 1;
    memcpy(out, line + at, n);
    out[n] = '\0';
    *got = (ssize_t)n;
    return true;
}

/* The lines read so far into buf (have bytes), each looked at for the
 * field; returns where the unfinished last line starts.  `skipping`: the
 * first line's start was dropped (it was longer than buf). */
static size_t scan_lines(const char *buf, size_t have, bool *skipping,
                         const char *key, char *out, size_t cap,
                         ssize_t *got)
{
    size_t at = 0;
    const char *nl;
    while (*got < 0 && (nl = memchr(buf + at, '\n', have - at)) != NULL) {
        size_t len = (size_t)(nl - (buf + at));
        if (!*skipping)
            take_if_field(buf + at, len, key, out, cap, got);
        *skipping = false;
        at += len + 1;
    }
    return at;
}

ssize_t procfile_status_value(int dirfd, const char *path, const char *key,
                              char *out, size_t cap)
{
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char buf[256];
    size_t have = 0;
    bool skipping = false;
    ssize_t got = -ENOENT;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0)
                got = -errno;
            else if (have > 0 && !skipping) /* a last line without \n */
                take_if_field(buf, have, key, out, cap, &got);
            break;
        }
        have += (size_t)n;
        size_t done = scan_lines(buf, have, &skipping, key, out, cap, &got);
        if (got >= 0)
            break;
        if (done == 0 && have == sizeof buf) {
            /* A line longer than buf: its start may be the field, cut. */
            if (!skipping && take_if_field(buf, have, key, out, cap, &got))
                break;
            skipping = true;
            done = have;
        }
        memmove(buf, buf + done, have - done);
        have -= done;
    }
    close(fd);
    return got;
}

bool procfile_blocks_signal(const char *status, int signo)
{
    size_t len;
    const char *v = procfile_status_field(status, "SigBlk", &len);
    return v && (strtoull(v, NULL, 16) >> (signo - 1)) & 1;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(procfile_read);
UPPER_CALLS(procfile_status_value);

void procfile_title(pid_t pid, const char *name, char *title, size_t size)
{
    char path[32];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    ssize_t n = procfile_read(AT_FDCWD, path, title, size);
    if (n > 0 && (size_t)n >= size)
        n = (ssize_t)size - 1;
    while (n > 0 && (title[n - 1] == '\0' || title[n - 1] == ' '))
        n--;
    for (ssize_t i = 0; i < n; i++)
        if (title[i] == '\0')
            title[i] = ' ';
    if (n <= 0)
        snprintf(title, size, "%s", name);
    else
        title[n] = '\0';
}
UPPER_CALLS(procfile_title);
