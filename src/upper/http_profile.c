/*
 * http_profile.c -- GET /debug/pprof/profile?seconds=N, as Go serves it.
 *
 * Starts a CPU profile, waits out the window on a window thread (http_window.c
 * runs every window request on one, its connection put aside) and answers
 * the gzip-compressed profile.proto.  The wait (http_wait_window, shared
 * with every ?seconds= window) wakes every 100 ms to see whether the client
 * has gone: a profile nobody will read is stopped at once, so that the
 * next request is not refused as "already in use" for the rest of the
 * window, and dropped without being built (symbolizing it would cost the
 * host CPU for nobody).
 *
 * With format=json the same profile is answered in its JSON form
 * (http_json.c), for the index page's flame graph.
 *
 * Unlike Go, a bad `seconds` is a 400 naming the parameter, not a silent
 * 30 s profile: a typo should not cost the user half a minute.
 */
#include <errno.h>
#include <stdlib.h>

#include "config.h"
#include "cpprof.h"
#include "http_named.h"
#include "http.h"
#include "sampler.h"

#define DEFAULT_SECONDS 30

/* Parses `seconds`: absent means the default; otherwise decimal digits only,
 * 1..max.  Returns the value or -EINVAL. */
static long parse_seconds(const char *s, long max)
{
    long v = 0;
    if (s == NULL)
        return DEFAULT_SECONDS;
    if (*s == '\0')
        return -EINVAL;
    for (; *s; s++) {
        int digit = *s - '0';
        if (digit < 0 || digit > 9 || v > (max - digit) / 10)
            return -EINVAL;
        v = v * 10 + digit;
    }
    return v >= 1 ? v : -EINVAL;
}

int http_cpu_profile_refused(http_req *r, int rc)
{
    if (rc == CPPROF_ESIGTAKEN)
        return http_error(r, 500,
                          "Could not enable CPU profiling: signal %ld "
                          "(setting cpu_signal) has a handler that is not "
                          "cpprof's: the program handles it itself; set "
                          "CPPROF_CPU_SIGNAL to a signal it leaves alone",
                          cfg_int(CFG_CPU_SIGNAL));
    return http_error(r, 500, "Could not enable CPU profiling: %s",
                      cpprof_strerror(rc));
}

int http_profile(http_req *r)
{
    long max = cfg_int(CFG_PROFILE_MAX_SECONDS);
    long seconds = parse_seconds(http_query(r, "seconds"), max);
    unsigned char *buf;
    size_t len;
    int rc;

    if (seconds < 0)
        return http_error(r, 400,
                          "invalid value for \"seconds\" - must be an integer "
                          "from 1 to %ld",
                          max);
    const char *format_error = http_profile_format_error(r);
    if (format_error != NULL)
        return http_error(r, 400, "%s", format_error);
    rc = cpprof_cpu_profile_start();
    if (rc < 0)
        return http_cpu_profile_refused(r, rc);
    http_end end = http_wait_window(r, seconds);
    if (end != HTTP_GOING_ON) {
        cpu_profile_discard(); /* not built: http_error_window_ended */
        return http_error_window_ended(
            r, end, "client went away before the profile ended");
    }
    rc = cpprof_cpu_profile_stop(&buf, &len);
    if (rc < 0)
        return http_error(r, 500, "Could not finish CPU profile: %s",
                          cpprof_strerror(rc));
    rc = http_reply_profile(r, "profile", true, buf, len);
    free(buf);
    return rc;
}
