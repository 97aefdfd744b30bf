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
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A line is formatted on the caller's stack when it fits SHORT_LINE, else
 * again in pages of its own (mmap: no allocator, the program's or
 * cpprof's), up to LINE_MAX_BYTES: warnings come from public calls and
 * interposed functions, on the program's threads, whose stacks may be
 * 16 KiB (2 KiB here was a third of what such a thread has left). */
enum { SHORT_LINE = 256, LINE_MAX_BYTES = 2048 };

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

/* The length of a line vsnprintf made into buf[size], n long uncut: cut
 * to size - 1, still ending in a newline when the format does. */
static size_t cut_line(char *buf, size_t size, int n, const char *fmt)
{
    if (n < 0)
        return 0;
    if ((size_t)n < size)
        return (size_t)n;
    if (fmt[0] && fmt[strlen(fmt) - 1] == '\n')
        buf[size - 2] = '\n';
    return size - 1;
}

/* Writes the line with SIGPIPE blocked, and takes back a SIGPIPE the
 * write raised (warn.h). */
static void write_line(const char *buf, size_t len)
{
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
}

void warn_stderr(const char *fmt, ...)
{
    int saved_errno = errno;
    char line[SHORT_LINE];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof line) {
        write_line(line, (size_t)n);
    } else if (n >= 0) {
        void *page = mmap(NULL, LINE_MAX_BYTES, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        char *buf = page != MAP_FAILED ? page : line;
        size_t size = page != MAP_FAILED ? LINE_MAX_BYTES : sizeof line;
        va_start(ap, fmt);
        n = vsnprintf(buf, size, fmt, ap);
        va_end(ap);
        write_line(buf, cut_line(buf, size, n, fmt));
        if (page != MAP_FAILED)
            munmap(page, LINE_MAX_BYTES);
    }
    errno = saved_errno;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(warn_stderr);

const char *warn_program_name(void)
{
    return program_invocation_short_name;
}
UPPER_CALLS(warn_program_name);
