/*
 * procmaps.h -- the lines of /proc/self/maps, parsed once for every module
 * that reads them: the unwinder's tables (the regions a walk may read, the
 * executable mappings it builds rows for), the symbolizer's mappings and
 * the crash handler's report.
 *
 * Two layers.  procmaps_parse takes one line already in memory and is
 * SIGNAL-SAFE (no stdio, no allocation), so the crash handler parses the
 * lines it read with read(2) in a handler.  procmaps_foreach reads the
 * file for ordinary callers, a line at a time of any length.  Core level:
 * includes nothing of cpprof's.
 */
#ifndef CPPROF_PROCMAPS_H
#define CPPROF_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One line: "lo-hi perms offset major:minor inode   path". */
typedef struct {
    uintptr_t lo, hi;
    char perms[4];       /* "rwxp": 'r', 'w', 'x', 'p' or 's', '-' */
    uint64_t offset;     /* in the file */
    unsigned dev_major, dev_minor;
    uint64_t inode;
    const char *path;    /* in the line; not NUL-terminated: path_len */
    size_t path_len;     /* 0: anonymous */
} procmaps_line;

/* SIGNAL-SAFE.  Parses text[0..len) (a line, with or without its
 * newline) into *out, out->path pointing into text.  False when the line
 * is not of that form. */
bool procmaps_parse(const char *text, size_t len, procmaps_line *out);

/* Whether the line's path is `name` exactly (e.g. "[vdso]"). */
bool procmaps_path_is(const procmaps_line *m, const char *name);

/* Called with each parsed line and its text (len bytes, its newline
 * dropped, NUL-terminated: so is m->path); a nonzero return stops the
 * reading and is returned by procmaps_foreach. */
typedef int (*procmaps_fn)(const procmaps_line *m, const char *text,
                           size_t len, void *arg);

/* Reads /proc/self/maps, in address order, calling fn for each line that
 * parses.  Returns 0, fn's nonzero return, or a negative errno.  Never
 * from a signal handler (stdio, malloc). */
int procmaps_foreach(procmaps_fn fn, void *arg);

/* Whether /proc/self/maps can be read: 0, CPPROF_ENOPROC when there is no
 * /proc where the process can see it (a chroot without one), or -errno.
 * Without it no stack can be named, nor walked through code loaded since. */
int procmaps_check(void);

#endif
