/*
 * http_wall.c -- GET /debug/pprof/wall?seconds=N and /debug/fgprof?seconds=N:
 * the wall-clock profile (wall.h), every thread on or off CPU with its
 * labels and state.
 *
 * /debug/fgprof is fgprof's profile, so that scrapers of Go's fgprof
 * (Grafana Alloy's profile.fgprof) and `go tool pprof -diff_base` against
 * a profile of fgprof's read it as one: its parameters, `seconds`
 * (default 30) and `format` ("pprof", its default, or "folded":
 * http_folded.c), and its types, samples/count and time/nanoseconds with
 * period wallclock/nanoseconds and no default type (format.go's toPprof,
 * felixge/fgprof v0.9).  /debug/pprof/wall names its values samples/count
 * and wall/nanoseconds, period wall/nanoseconds, wall the default, and
 * takes the CPU profile's `format` (proto, or json for the index page).
 * Both run on a window thread, as the CPU profile does, and a profile the
 * client left is dropped unbuilt.  Both state in their comments the rate
 * achieved and the censuses' CPU, so a rate lowered to keep the budget is
 * said in the profile itself.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder.h"
#include "census.h"
#include "config.h"
#include "cpprof.h"
#include "http.h"
#include "http_named.h"
#include "symbolize_profile.h"
#include "wall.h"

#define DEFAULT_SECONDS 30

static int build_missing(builder *b, const wall_profile *w)
{
    size_t n;
    const wall_missing *m = wall_missing_samples(w, &n);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char frame[CENSUS_NO_STACK_FRAME_MAX];
        snprintf(frame, sizeof frame, "%s (%s)", CENSUS_NO_STACK,
                 m[i].reason);
        rc = builder_add_labelled_pseudo_sample(b, frame, m[i].values,
                                                m[i].labels);
    }
    return rc;
}

/* The comments that say what the window achieved and cost. */
static int add_comments(builder *b, const wall_stats *s)
{
    char text[256];
    double seconds = s->duration_ns / 1e9;
    snprintf(text, sizeof text,
             "wall profile: %lld censuses of every thread in %.3f s, %.1f a "
             "second (setting wall_hz: %ld)",
             (long long)s->ticks, seconds, s->achieved_hz, s->hz);
    int rc = builder_add_comment(b, text);
    if (rc == 0) {
        snprintf(text, sizeof text,
                 "wall profile cost: %.3f s of CPU, %.2f%% of one CPU "
                 "(setting wall_cpu_percent: %ld)%s",
                 s->cpu_ns / 1e9,
                 seconds > 0 ? s->cpu_ns / 1e7 / seconds : 0.0,
                 cfg_int(CFG_WALL_CPU_PERCENT),
                 s->slowed ? "; censuses spaced out to stay within it" : "");
        rc = builder_add_comment(b, text);
    }
    if (rc == 0 && s->late > 0) {
        snprintf(text, sizeof text,
                 "wall profile: %lld of %lld censuses began over half an "
                 "interval late, held up by busy CPUs: threads that wanted "
                 "a CPU then are under-counted as running",
                 (long long)s->late, (long long)s->ticks);
        rc = builder_add_comment(b, text);
    }
    return rc;
}

/* The forms a wall profile is answered in. */
enum shape { WALL_PROTO, FGPROF_PROTO, FGPROF_FOLDED };

/* The value and period types of shape's profile. */
static int set_types(builder *b, enum shape shape, long long period_ns)
{
    bool fgprof = shape != WALL_PROTO;
    int rc = builder_add_sample_type(b, "samples", "count");
    if (rc == 0)
        rc = builder_add_sample_type(b, fgprof ? "time" : "wall",
                                     "nanoseconds");
    if (rc == 0)
        rc = builder_set_period(b, fgprof ? "wallclock" : "wall",
                                "nanoseconds", period_ns);
    if (rc == 0 && !fgprof)
        rc = builder_set_default_sample_type(b, "wall");
    return rc;
}

static int build_wall(const wall_profile *w, enum shape shape,
                      unsigned char **buf, size_t *len)
{
    builder *b = builder_new();
    if (!b)
        return -ENOMEM;
    wall_stats s;
    wall_get_stats(w, &s);
    int rc = set_types(b, shape, 1000000000LL / s.hz);
    builder_set_time(b, s.start_ns, s.duration_ns);
    if (rc == 0)
        rc = builder_add_stacktab(b, wall_samples(w));
    if (rc == 0)
        rc = build_missing(b, w);
    if (rc == 0)
        rc = add_comments(b, &s);
    if (rc == 0)
        rc = symbolize_and_encode(b, buf, len);
    builder_free(b);
    return rc;
}

static int request_going_on(void *arg)
{
    return (int)http_request_end(arg) != HTTP_GOING_ON;
}

static int refused(http_req *r, int rc)
{
    if (rc == -EBUSY)
        return http_error(r, 500, "Could not enable wall profiling: wall "
                                  "profiling already in use");
    if (rc == CPPROF_ESIGTAKEN)
        return http_error(r, 500,
                          "Could not enable wall profiling: signal %ld "
                          "(setting census_signal) has a handler that is "
                          "not cpprof's: the program handles it itself; set "
                          "CPPROF_CENSUS_SIGNAL to a signal it leaves alone",
                          cfg_int(CFG_CENSUS_SIGNAL));
    return http_error(r, 500, "Could not enable wall profiling: %s",
                      cpprof_strerror(rc));
}

/* The profile in fgprof's folded form. */
static int reply_folded(http_req *r, const unsigned char *gz, size_t len)
{
    char *text;
    size_t text_len;
    int rc = http_profile_folded(gz, len, &text, &text_len);
    if (rc != 0)
        return http_error(r, 500, "Could not write the profile as folded "
                                  "stacks: %s",
                          cpprof_strerror(rc));
    rc = http_reply(r, "text/plain; charset=utf-8", NULL,
                    (const unsigned char *)text, text_len);
    free(text);
    return rc;
}

/* The window, then the profile: as the request asked. */
static int serve(http_req *r, long seconds, enum shape shape)
{
    if (census_signal_is_programs())
        return refused(r, CPPROF_ESIGTAKEN);
    wall_profile *w;
    int rc = wall_start(&w);
    if (rc < 0)
        return refused(r, rc);
    rc = wall_run(w, seconds, request_going_on, r);
    if (rc > 0) {
        wall_end(w); /* not built: nobody will read it */
        return http_error_window_ended(
            r, http_request_end(r),
            "client went away before the profile ended");
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    if (rc == 0)
        rc = build_wall(w, shape, &buf, &len);
    wall_end(w);
    if (rc < 0)
        return http_error(r, 500, "Could not finish wall profile: %s",
                          cpprof_strerror(rc));
    rc = shape == FGPROF_FOLDED ? reply_folded(r, buf, len)
                                : http_reply_profile(r, "wall", true, buf, len);
    free(buf);
    return rc;
}

/* The 400 for a bad `seconds`, which must be 1..profile_max_seconds. */
static int seconds_refused(http_req *r)
{
    return http_error(r, 400,
                      "invalid value for \"seconds\" - must be an integer "
                      "from 1 to %ld",
                      cfg_int(CFG_PROFILE_MAX_SECONDS));
}

/* `seconds`, DEFAULT_SECONDS when absent; false when it is bad. */
static bool get_seconds(http_req *r, long *seconds)
{
    *seconds = DEFAULT_SECONDS;
    return http_query_long(r, "seconds", 1, cfg_int(CFG_PROFILE_MAX_SECONDS),
                           seconds) >= 0;
}

int http_wall(http_req *r)
{
    long seconds;
    if (!get_seconds(r, &seconds))
        return seconds_refused(r);
    const char *format_error = http_profile_format_error(r);
    if (format_error != NULL)
        return http_error(r, 400, "%s", format_error);
    return serve(r, seconds, WALL_PROTO);
}

/* fgprof's `format`: pprof, its default, or folded. */
int http_fgprof(http_req *r)
{
    long seconds;
    if (!get_seconds(r, &seconds))
        return seconds_refused(r);
    const char *format = http_query(r, "format");
    bool folded = format != NULL && strcmp(format, "folded") == 0;
    if (format != NULL && !folded && strcmp(format, "pprof") != 0)
        return http_error(r, 400, "invalid value for \"format\" - must be "
                                  "pprof or folded");
    return serve(r, seconds, folded ? FGPROF_FOLDED : FGPROF_PROTO);
}
