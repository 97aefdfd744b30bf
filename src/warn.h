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
 */
#ifndef CPPROF_WARN_H
#define CPPROF_WARN_H

/* Formats like printf and writes the result to descriptor 2 (cut at 2 KiB,
 * still ending in a newline when the format did).  Not async-signal-safe:
 * never from a signal handler. */
void warn_stderr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
