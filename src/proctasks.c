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
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
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

/* An entry: the inode and offset (8 bytes each), the record's length (2),
 * the type (1), then the name and its NUL, rounded up to 8 bytes: 24 at
 * least, 32 for a tid of 7 digits (pid_max is 2^22 at most). */
enum { ENTRY_MAX = 32 };

_Static_assert(PROCTASKS_MIN_TIDS * sizeof(pid_t) >= ENTRY_MAX,
               "the smallest array holds the longest entry");

int proctasks_next(int dirfd, pid_t *tids, size_t cap)
{
    if (cap < PROCTASKS_MIN_TIDS)
        return -EINVAL;
    char *buf = (char *)tids;
    ssize_t got = getdents64(dirfd, buf, cap * sizeof *tids);
    if (got < 0)
        return -errno;
    /* Tid n is written at byte 4n, where entries before the n-th lay
     * (each takes 24 bytes at least), once the n-th was read: every
     * entry is read before its bytes are written over. */
    size_t n = 0;
    for (ssize_t off = 0; off < got;) {
        const char *entry = buf + off;
        unsigned short reclen;
        memcpy(&reclen, entry + offsetof(struct dirent64, d_reclen),
               sizeof reclen);
        pid_t tid = (pid_t)atoi(entry + offsetof(struct dirent64, d_name));
        off += reclen;
        if (tid > 0)
            tids[n++] = tid;
    }
    /* A batch of "." and ".." alone is not the end. */
    return n == 0 && got > 0 ? proctasks_next(dirfd, tids, cap) : (int)n;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(proctasks_next);
UPPER_CALLS(proctasks_open);
