/*
 * warn.c -- cpprof's messages to the program's stderr; see warn.h for why
 * they are written this way.
 */
#define _GNU_SOURCE
#include "warn.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { LINE_MAX_BYTES = 2048 };

/* Writes all of buf to descriptor 2; false when the reader is gone. */
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
    if (!write_whole(buf, len) && !was_pending) {
        struct timespec now = {0, 0};
        sigtimedwait(&pipe_only, NULL, &now); /* the one our write raised */
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved_errno;
}
