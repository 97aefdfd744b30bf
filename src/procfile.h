/* procfile.h -- small /proc files read whole, and the fields of a status
 * file.  Shared by the census, the sampler and the queued-signal budget,
 * which each read a thread's or the process's status file. */
#ifndef CPPROF_PROCFILE_H
#define CPPROF_PROCFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Reads the file `path` (relative to the directory descriptor dirfd, or
 * AT_FDCWD) into buf, NUL-terminated, in one read: enough for /proc's
 * files, which the kernel fills in one go.  Returns its length or
 * -errno. */
ssize_t procfile_read(int dirfd, const char *path, char *buf, size_t cap);

/* The value of "Key:" in a status file's text, past the blanks after the
 * colon and up to the newline (its length in *len), or NULL. */
const char *procfile_status_field(const char *status, const char *key,
                                  size_t *len);

/* The value of "Key:" in the status file `path` (relative to dirfd, or
 * AT_FDCWD), as procfile_status_field finds it, into out (NUL-terminated,
 * cut to cap - 1 bytes).  The file is read through a buffer of a few
 * lines, not whole: a status file takes 1.5 KiB and more (a Groups line
 * has no bound), and the queued-signal budget is read on the thread that
 * starts a profile, whose stack may be 16 KiB.  Returns the value's
 * length, -ENOENT when the file has no such field, or -errno. */
ssize_t procfile_status_value(int dirfd, const char *path, const char *key,
                              char *out, size_t cap);

/* The title process pid gives itself, as ps shows it: its
 * /proc/PID/cmdline (PostgreSQL's "postgres: user db [local] idle",
 * nginx's "nginx: worker process"), NULs as spaces, cut to size; `name`
 * when it has none. */
void procfile_title(pid_t pid, const char *name, char *title, size_t size);

/* Whether a status file's text says signal signo is blocked (SigBlk). */
bool procfile_blocks_signal(const char *status, int signo);

#endif
