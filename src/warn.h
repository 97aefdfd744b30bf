/*
 * warn.h -- cpprof's messages to the program's stderr (warn.c).
 *
 * cpprof says on stderr, once, what it declined and why.  Those few lines
 * must not cost the program anything: a program whose stderr is a pipe
 * nobody reads any more (its logger exited) would be killed by SIGPIPE at
 * cpprof's first line, a line the program itself never wrote (it was, at
 * load, for a mistyped CPPROF_* variable).  So the line is written with
 * SIGPIPE blocked in the calling thread, and a SIGPIPE the write raised is
 * taken back; and it is written with write(2), whole, not through the
 * program's stdio stream, whose buffering and lock are the program's.
 *
 * Nor may a line land in the program's data: a daemon that closes
 * descriptors 0-2 and opens its files gets 0, 1 and 2 for them, and a
 * line written to descriptor 2 then went into its third file.
 * So every line goes only to the file descriptor 2 was when the library
 * was loaded, known by its device and inode (warn_write); once descriptor
 * 2 is closed or another file, cpprof's lines are dropped.
 */
#ifndef CPPROF_WARN_H
#define CPPROF_WARN_H

#include <stdbool.h>
#include <stddef.h>

/* Formats like printf and writes the result with warn_write (cut at 2 KiB,
 * still ending in a newline when the format did).  Not async-signal-safe:
 * never from a signal handler. */
void warn_stderr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Records which file descriptor 2 is: called once, at load, by the first
 * constructor (config.c's), before anything could warn. */
void warn_remember_stderr(void);

/* The program's name (glibc's program_invocation_short_name), for the
 * upper layers' messages: read here, in libcpprof.so, whose lookups are
 * the program's.  libcpprof-upper.so's find libc's own variable first
 * (upper.c), which glibc never sets in a program that has a copy of it
 * (a copy relocation: redis-server, sort). */
const char *warn_program_name(void);

/* SIGNAL-SAFE: writes all of buf[0..len) to descriptor 2 when it is still
 * the file it was at load, else nothing.  False when the write failed with
 * EPIPE (the reader is gone), true otherwise.  errno is kept. */
bool warn_write(const char *buf, size_t len);

#endif
