/*
 * http_trace.c -- GET /debug/pprof/trace?seconds=F: a timeline of the
 * window (trace.h), per thread and per task, as Go's net/http/pprof
 * serves its execution trace: `seconds` a float, default 1; 200
 * application/octet-stream, attachment "trace"; a second trace while one
 * runs gets Go's 500 "Could not enable tracing: tracing is already
 * enabled".
 *
 * Differences, each for a reason:
 *  - The file is Perfetto's protobuf (ui.perfetto.dev opens it), not Go's
 *    format, which only Go's runtime writes; `format=json` gives Chrome's
 *    trace-event JSON (the index page's timeline reads it).
 *  - A bad `seconds` (not a number, 0 or less, over profile_max_seconds)
 *    is a 400 naming the parameter, as the CPU profile's is here, not a
 *    silent 1 s.
 *  - CPU samples: the window turns the CPU sampler on when it is off
 *    (`cpu=0` leaves it off), so the trace shows where each span's CPU
 *    went; a CPU profile asked for meanwhile is refused as busy.
 *  - `flight=1` answers at once with the flight recorder's last
 *    trace_flight_seconds (404 saying so when it is off).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "cpprof.h"
#include "http.h"
#include "http_named.h"
#include "sampler.h"
#include "trace.h"
#include "tracefile.h"
#include "util.h"

#define NS_PER_S 1000000000LL

/* `seconds` in ns: 1 s when absent; -1 when bad. */
static int64_t window_ns(http_req *r)
{
    const char *text = http_query(r, "seconds");
    if (!text)
        return NS_PER_S;
    char *end;
    double s = strtod(text, &end);
    if (end == text || *end || !isfinite(s) || s <= 0 ||
        s > (double)cfg_int(CFG_PROFILE_MAX_SECONDS))
        return -1;
    int64_t ns = (int64_t)(s * NS_PER_S);
    return ns > 0 ? ns : 1;
}

/* Whether `format` asks for JSON; -1 when it is neither form. */
static int wants_json(http_req *r)
{
    const char *format = http_query(r, "format");
    if (!format || strcmp(format, "proto") == 0)
        return 0;
    return strcmp(format, "json") == 0 ? 1 : -1;
}

static int reply(http_req *r, const trace_snapshot *s, bool json)
{
    void *buf;
    size_t len;
    int rc = tracefile_encode(s, json, &buf, &len);
    if (rc)
        return http_error(r, 500, "Could not finish trace: %s",
                          cpprof_strerror(rc));
    /* Gzip'd by the reply when large, as the client accepts it. */
    rc = json ? http_reply(r, "application/json", NULL, buf, len)
              : http_reply(r, "application/octet-stream", "trace", buf, len);
    free(buf);
    return rc;
}

static int serve_flight(http_req *r, bool json)
{
    if (!trace_flight_on())
        return http_error(r, 404,
                          "the flight recorder is off: start the program "
                          "with CPPROF_TRACE_FLIGHT_SECONDS=N to keep the "
                          "last N seconds");
    int64_t now = clock_mono_ns();
    trace_snapshot *s;
    int rc = trace_snapshot_take(
        now - (int64_t)cfg_int(CFG_TRACE_FLIGHT_SECONDS) * NS_PER_S, now,
        true, &s);
    if (rc)
        return http_error(r, 500, "Could not read the flight recorder: %s",
                          cpprof_strerror(rc));
    s->cpu_samples = sampler_running();
    rc = reply(r, s, json);
    trace_snapshot_free(s);
    return rc;
}

/* The CPU sampler for the window: true when this request started it. */
static bool start_sampler(http_req *r)
{
    const char *cpu = http_query(r, "cpu");
    if (cpu && strcmp(cpu, "0") == 0)
        return false;
    return cpprof_cpu_profile_start() == 0;
}

int http_trace(http_req *r)
{
    int json = wants_json(r);
    if (json < 0)
        return http_error(r, 400, "invalid value for \"format\" - must be "
                                  "proto or json");
    const char *flight = http_query(r, "flight");
    if (flight && strcmp(flight, "1") == 0)
        return serve_flight(r, json);
    int64_t ns = window_ns(r);
    if (ns < 0)
        return http_error(r, 400,
                          "invalid value for \"seconds\" - must be a number "
                          "above 0 and at most %ld",
                          cfg_int(CFG_PROFILE_MAX_SECONDS));
    /* The sampler first: its start (timers for every thread) is not in
     * the window. */
    bool sampling = start_sampler(r);
    int64_t start;
    int rc = trace_window_begin(&start);
    if (rc && sampling)
        cpu_profile_discard();
    if (rc == -EBUSY)
        return http_error(r, 500, "Could not enable tracing: tracing is "
                                  "already enabled");
    if (rc)
        return http_error(r, 500, "Could not enable tracing: %s",
                          cpprof_strerror(rc));
    http_end end = http_wait_window_ns(r, ns);
    trace_snapshot *s = NULL;
    if (end == HTTP_GOING_ON)
        rc = trace_snapshot_take(start, clock_mono_ns(), false, &s);
    if (s)
        s->cpu_samples = sampler_running();
    if (sampling)
        cpu_profile_discard();
    trace_window_end();
    if (end != HTTP_GOING_ON)
        return http_error_window_ended(
            r, end, "client went away before the trace ended");
    if (rc)
        return http_error(r, 500, "Could not finish trace: %s",
                          cpprof_strerror(rc));
    rc = reply(r, s, json);
    trace_snapshot_free(s);
    return rc;
}
