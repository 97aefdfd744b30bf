/*
 * procmaps.c -- see procmaps.h.  The parser is written out by hand rather
 * than with sscanf: the crash handler parses in a signal handler, where
 * stdio is not allowed, and one parser for every reader keeps them from
 * drifting apart (they had: three formats, one of which skipped the
 * device, one that took any perms string up to seven characters).
 */
#define _GNU_SOURCE
#include "procmaps.h"
#include "cpprof.h"
#include "upper_calls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- The parser: everything in this section is SIGNAL-SAFE ------------- */

/* A cursor over one line. */
struct cursor {
    const char *at, *end;
};

static int digit_value(char c, unsigned base)
{
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : 99;
    return v < (int)base ? v : -1;
}

/* A number in `base`, at least one digit, into *out. */
static bool take_number(struct cursor *c, unsigned base, uint64_t *out)
{
    uint64_t v = 0;
    const char *from = c->at;
    int d;
    while (c->at < c->end && (d = digit_value(*c->at, base)) >= 0) {
        if (v > (UINT64_MAX - (uint64_t)d) / base)
            return false;
        v = v * base + (uint64_t)d;
        c->at++;
    }
    *out = v;
    return c->at > from;
}

static bool take_char(struct cursor *c, char ch)
{
    if (c->at == c->end || *c->at != ch)
        return false;
    c->at++;
    return true;
}

bool procmaps_parse(const char *text, size_t len, procmaps_line *out)
{
    const char *nl = memchr(text, '\n', len);
    struct cursor c = {text, nl ? nl : text + len};
    uint64_t lo, hi, major, minor;
    if (!take_number(&c, 16, &lo) || !take_char(&c, '-') ||
        !take_number(&c, 16, &hi) || !take_char(&c, ' ') ||
        c.end - c.at < 5 || c.at[4] != ' ')
        return false;
    memcpy(out->perms, c.at, sizeof out->perms);
    c.at += 5;
    if (!take_number(&c, 16, &out->offset) || !take_char(&c, ' ') ||
        !take_number(&c, 16, &major) || !take_char(&c, ':') ||
        !take_number(&c, 16, &minor) || !take_char(&c, ' ') ||
        !take_number(&c, 10, &out->inode) ||
        (c.at < c.end && *c.at != ' '))
        return false;
    while (c.at < c.end && *c.at == ' ')
        c.at++;
    out->lo = (uintptr_t)lo;
    out->hi = (uintptr_t)hi;
    out->dev_major = (unsigned)major;
    out->dev_minor = (unsigned)minor;
    out->path = c.at;
    out->path_len = (size_t)(c.end - c.at);
    return true;
}

bool procmaps_path_is(const procmaps_line *m, const char *name)
{
    size_t n = strlen(name);
    return m->path_len == n && memcmp(m->path, name, n) == 0;
}

/* ---- The reader --------------------------------------------------------- */

int procmaps_foreach(procmaps_fn fn, void *arg)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -errno;
    /* stdio reads /proc in blocks of its st_blksize, 1 KB: a process with
     * 1,000 threads has 2,000 lines of their stacks, 150 read calls.  The
     * block is ours: glibc ignores a size given without one. */
    enum { MAPS_READ = 64 * 1024 };
    char *block = malloc(MAPS_READ);
    if (block)
        setvbuf(f, block, _IOFBF, MAPS_READ);
    char *text = NULL;
    size_t cap = 0;
    ssize_t len;
    int rc = 0;
    while (rc == 0 && (len = getline(&text, &cap, f)) > 0) {
        if (text[len - 1] == '\n')
            text[--len] = '\0';
        procmaps_line m;
        if (procmaps_parse(text, (size_t)len, &m))
            rc = fn(&m, text, (size_t)len, arg);
    }
    free(text);
    fclose(f);
    free(block);
    return rc;
}

int procmaps_check(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? CPPROF_ENOPROC : -errno;
    close(fd);
    return 0;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(procmaps_check);
UPPER_CALLS(procmaps_foreach);
UPPER_CALLS(procmaps_path_is);
