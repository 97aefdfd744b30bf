/* proctasks.c -- see proctasks.h.  Plain system calls on the caller's
 * descriptor: the callers run on cpprof's own threads or the thread
 * taking a census, never in a signal handler. */
#define _GNU_SOURCE /* getdents64 */
#include "proctasks.h"
#include "cpprof.h"
#include "upper_calls.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

int proctasks_open(void)
{
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    return errno == ENOENT ? CPPROF_ENOPROC : -errno;
}

size_t proctasks_count(int dirfd)
{
    struct stat st;
    return fstat(dirfd, &st) == 0 && st.st_nlink > 2
               ? (size_t)(st.st_nlink - 2)
               : 0;
}

int proctasks_next(int dirfd, pid_t *tids)
{
    _Alignas(8) char buf[PROCTASKS_BATCH_BYTES];
    ssize_t got = getdents64(dirfd, buf, sizeof buf);
    if (got < 0)
        return -errno;
    int n = 0;
    for (ssize_t off = 0; off < got;) {
        const struct dirent64 *d = (const struct dirent64 *)(buf + off);
        off += d->d_reclen;
        pid_t tid = (pid_t)atoi(d->d_name);
        if (tid > 0 && n < PROCTASKS_BATCH_MAX)
            tids[n++] = tid;
    }
    /* A batch of "." and ".." alone is not the end. */
    return n == 0 && got > 0 ? proctasks_next(dirfd, tids) : n;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(proctasks_next);
UPPER_CALLS(proctasks_open);
