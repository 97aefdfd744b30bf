/*
 * godump.h -- the lines of Go's goroutine dumps, written by one set of
 * functions (godump.c) for both places cpprof prints a dump: the
 * goroutine profile's debug=2 (every thread and parked task, symbolized,
 * gotext.c) and the crash report (the crashing thread, raw, crash.c), so
 * that Go's dump parsers (panicparse 2.3.0) read both, and the same
 * thread gets the same header in both.
 *
 *   goroutine 4242 [sleeping, futex_do_wait, thread "worker", labels:{"k": "v"}]:
 *   worker_loop(...)
 *   	/src/app/worker.c:88 +0x2b
 *   created by main in goroutine 4241
 *   	/src/app/main.c:12 +0x57
 *
 * A thread's number is its tid, a task's its task number; a thread's
 * bracket names it (thread "NAME"), which a task's never does.  Each
 * writes one line into the caller's buffer, NUL-terminated, without its
 * newline, and returns the length the whole line needs, as snprintf: a
 * line longer than len is cut short.  All SIGNAL-SAFE (the crash handler
 * writes with them).
 */
#ifndef CPPROF_GODUMP_H
#define CPPROF_GODUMP_H

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
} godump_goroutine;

/* "goroutine ID [STATE, WAIT (leaked), thread \"NAME\", stack unavailable:
 * WHY, labels:{\"k\": \"v\", ...}]:", each part only when it has one; the
 * labels in Go 1.27's traceback form (golang/go#76349: each key and value
 * quoted as %q, ": " between them), unless the "tracebacklabels" setting
 * is 0, as GODEBUG=tracebacklabels=0. */
size_t godump_header(char *buf, size_t len, const godump_goroutine *g);

/* A frame's first line, "FUNC(...)" (Go's arguments elided). */
size_t godump_function(char *buf, size_t len, const char *function);

/* A frame's second line, "\tFILE:LINE +0xOFF" (offset in the function),
 * or "\tFILE:LINE" when the offset is not known (has_offset false).  A
 * file the parsers do not take (only names ending .c, .go or .s: a
 * header's, C++'s, preprocessed assembly's), or none (""), is written
 * "??", the cgo form of an unknown file, its line kept. */
size_t godump_file(char *buf, size_t len, const char *file, int64_t line,
                   bool has_offset, uintptr_t offset);

/* "created by FUNC in goroutine N": N the creator's number. */
size_t godump_created_by(char *buf, size_t len, const char *function,
                         uint64_t creator);

#endif
