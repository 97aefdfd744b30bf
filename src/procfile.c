/* procfile.c -- see procfile.h.  Plain open/read/close: the callers run on
 * cpprof's own threads (the collector, the HTTP server), never in a signal
 * handler. */
#define _GNU_SOURCE
#include "procfile.h"
#include "upper_calls.h"

#include <errno.h>
#include <fcntl.h>
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

bool procfile_blocks_signal(const char *status, int signo)
{
    size_t len;
    const char *v = procfile_status_field(status, "SigBlk", &len);
    return v && (strtoull(v, NULL, 16) >> (signo - 1)) & 1;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(procfile_read);
