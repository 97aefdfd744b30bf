/*
 * goheader.h -- Go's goroutine header, the line that opens each block of
 * a goroutine dump, written by one function (goheader.c) for both places
 * cpprof prints one: the goroutine profile's debug=2 (every thread and
 * parked task) and the crash report (the crashing thread), so that the
 * same thread gets the same header in both.
 *
 *   goroutine 4242 [sleeping, futex_do_wait, thread "worker", labels:{"k": "v"}]:
 *   goroutine 7 [waiting for a row, 3 minutes, labels:{"pprof_task": "parked", ...}]:
 *
 * A thread's number is its tid, a task's its task number; a thread's
 * bracket names it (thread "NAME"), which a task's never does.
 */
#ifndef CPPROF_GOHEADER_H
#define CPPROF_GOHEADER_H

#include "cpprof.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t id;      /* a thread's tid, a task's number */
    const char *state; /* "running", "sleeping"..., a task's reason */
    const char *wait;  /* after it: a kernel wait channel, how long a task
                          has been parked; "" for none */
    bool leaked;       /* " (leaked)" after the wait, as Go marks one */
    const char *thread; /* a thread's name; NULL for a task */
    const char *missing; /* why its stack is missing, or "" */
    const cpprof_labelset *labels; /* shown unless tracebacklabels=0 */
} goheader;

/* "goroutine ID [STATE, WAIT (leaked), thread \"NAME\", stack unavailable:
 * WHY, labels:{\"k\": \"v\", ...}]:" into buf (NUL-terminated, no newline),
 * each part only when it has one; the labels in Go 1.27's traceback form
 * (golang/go#76349: each key and value quoted as %q, ": " between them),
 * unless the "tracebacklabels" setting is 0, as GODEBUG=tracebacklabels=0.
 * Returns the length the whole header needs, as snprintf: a header longer
 * than len is cut short.  SIGNAL-SAFE. */
size_t goheader_format(char *buf, size_t len, const goheader *h);

#endif
