/*
 * http_cmdline.c -- /debug/pprof/cmdline: the program's arguments joined by
 * NUL bytes, as Go serves os.Args.
 *
 * Read from /proc/self/cmdline (the kernel's copy, which needs nothing from
 * main()), whose trailing NUL Go's join does not have.  A command line can
 * hold secrets (a password passed as an argument), so the setting
 * "http_cmdline" can turn the endpoint off: 403, and nothing read.
 */
#include "config.h"
#include "http.h"

#include <stdio.h>
#include <stdlib.h>

/* The whole of /proc/self/cmdline (it has no size to stat) in a malloc'd
 * buffer, or NULL. */
static char *read_cmdline(size_t *len)
{
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (f == NULL)
        return NULL;
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap);
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *grown = realloc(buf, cap *= 2);
            if (grown == NULL)
                free(buf);
            buf = grown;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

int http_cmdline(http_req *r)
{
    if (!cfg_int(CFG_HTTP_CMDLINE))
        return http_error(r, 403,
                          "cmdline is turned off by the http_cmdline setting");
    size_t len;
    char *args = read_cmdline(&len);
    if (args == NULL)
        return http_error(r, 500, "Could not read /proc/self/cmdline");
    if (len > 0 && args[len - 1] == '\0')
        len--;
    int rc = http_reply(r, "text/plain; charset=utf-8", NULL, args, len);
    free(args);
    return rc;
}
