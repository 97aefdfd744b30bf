/*
 * warn.c -- cpprof's messages to the program's stderr; see warn.h for why
 * they are written this way.
 *
 * Which descriptor 2 is the stderr found at load: its device and inode are
 * recorded then, and fstat tells before each write whether descriptor 2
 * still is that file.  A duplicate made at load and kept instead would be
 * one descriptor more of the program's (in /proc/self/fd, against its
 * limit), closed all the same by a daemon that closes every descriptor
 * (its number then reused by the daemon's files, so it would need this
 * check too), and, while held, it would keep a stderr pipe open that the
 * program closed: a parent that waits for EOF on the stderr of a child
 * that detaches (closing 0-2) would wait for ever.  Between the check and
 * the write another thread could still close and reuse descriptor 2; no
 * descriptor of cpprof's own closes that window of two system calls,
 * since the program can close and reuse any number the same way.
 */
#define _GNU_SOURCE
#include "warn.h"
#include "upper_calls.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { LINE_MAX_BYTES = 2048 };

/* Descriptor 2 at load.  Until it is remembered it is load time still
 * (heap.c may have to say something before), and descriptor 2 is taken
 * as it is. */
enum { STDERR_UNKNOWN, STDERR_OPEN, STDERR_CLOSED };
static atomic_int stderr_state = STDERR_UNKNOWN;
static dev_t stderr_dev;
static ino_t stderr_ino;

void warn_remember_stderr(void)
{
    struct stat st;
    if (fstat(STDERR_FILENO, &st) != 0) {
        atomic_store(&stderr_state, STDERR_CLOSED);
        return;
    }
    stderr_dev = st.st_dev;
    stderr_ino = st.st_ino;
    atomic_store(&stderr_state, STDERR_OPEN);
}

/* SIGNAL-SAFE: whether descriptor 2 is the file it was at load. */
static bool stderr_unchanged(void)
{
    struct stat st;
    switch (atomic_load(&stderr_state)) {
    case STDERR_UNKNOWN: return true;
    case STDERR_OPEN:
        return fstat(STDERR_FILENO, &st) == 0 && st.st_dev == stderr_dev &&
               st.st_ino == stderr_ino;
    default: return false;
    }
}

/* SIGNAL-SAFE: writes all of buf to descriptor 2; false when the reader
 * is gone. */
static bool write_whole(const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return errno != EPIPE;
        buf += n, len -= (size_t)n;
    }
    return true;
}

/* SIGNAL-SAFE: see warn.h. */
bool warn_write(const char *buf, size_t len)
{
    int saved_errno = errno;
    bool ok = !stderr_unchanged() || write_whole(buf, len);
    errno = saved_errno;
    return ok;
}

void warn_stderr(const char *fmt, ...)
{
    char buf[LINE_MAX_BYTES];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n;
    if (len >= sizeof buf) {
        len = sizeof buf - 1;
        if (fmt[0] && fmt[strlen(fmt) - 1] == '\n')
            buf[len - 1] = '\n';
    }
    int saved_errno = errno;
    sigset_t pipe_only, old, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    bool was_pending = sigpending(&pending) == 0 &&
                       sigismember(&pending, SIGPIPE) == 1;
    if (!warn_write(buf, len) && !was_pending) {
        struct timespec now = {0, 0};
        sigtimedwait(&pipe_only, NULL, &now); /* the one our write raised */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved_errno;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(warn_stderr);

const char *warn_program_name(void)
{
    return program_invocation_short_name;
}
UPPER_CALLS(warn_program_name);
