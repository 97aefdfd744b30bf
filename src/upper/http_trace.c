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
 *
 * Memory: a trace's snapshot and its model (timeline.h) take some four
 * to five times the events' bytes while it is encoded, up to 150 MB for
 * a full recorder (trace_kb, 32 MiB); so traces are snapshot and encoded
 * one at a time (a request waits its turn), and the encoding goes into a
 * reply compressed as it comes (http_out), not into a whole text that the
 * server then copies.  4 window threads encoding at once, each reply held
 * whole for a client that did not read it, took a host from 39 to 795 MB.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* ---- One trace at a time ------------------------------------------------- */

/* The process whose thread snapshots and encodes a trace now (0: none): a
 * fork's child finds its parent there, whose thread it does not have, and
 * takes the turn over. */
static _Atomic pid_t turn;

#define TURN_POLL_NS 10000000LL

/* Waits for the turn to snapshot and encode a trace, polling, for as long
 * as the request goes on: HTTP_GOING_ON once it has it, else what ended
 * the wait. */
static http_end take_turn(http_req *r)
{
    pid_t me = getpid();
    for (;;) {
        pid_t holder = 0;
        if (atomic_compare_exchange_strong(&turn, &holder, me) ||
            (holder != me &&
             atomic_compare_exchange_strong(&turn, &holder, me)))
            return HTTP_GOING_ON;
        http_end end = http_wait_window_ns(r, TURN_POLL_NS);
        if (end != HTTP_GOING_ON)
            return end;
    }
}

static void give_turn(void)
{
    atomic_store(&turn, 0);
}

/* ---- Answering ------------------------------------------------------------ */

static int to_reply(void *body, const void *data, size_t len)
{
    return http_out_write(body, data, len);
}

/* Answers with snapshot s (freeing it), encoded into a reply body as it
 * is made: the encoding of a full flight recorder (32 MiB of events) is
 * some 70 MB of JSON, which made whole, then copied for the server, cost
 * the host four times that for each request; compressed as it comes it
 * is a twentieth, and the snapshot is let go before the reply waits for
 * its client. */
static int reply(http_req *r, trace_snapshot *s, bool json)
{
    http_out *b;
    int rc = http_out_open(&b);
    timeline_sink sink = {to_reply, b};
    if (rc == 0)
        rc = tracefile_encode(s, json, &sink);
    trace_snapshot_free(s);
    if (rc) {
        http_out_free(b);
        return http_error(r, 500, "Could not finish trace: %s",
                          cpprof_strerror(rc));
    }
    return json ? http_reply_out(r, "application/json", NULL, b)
                : http_reply_out(r, "application/octet-stream", "trace", b);
}

static int serve_flight(http_req *r, bool json)
{
    if (!trace_flight_on())
        return http_error(r, 404,
                          "the flight recorder is off: start the program "
                          "with CPPROF_TRACE_FLIGHT_SECONDS=N to keep the "
                          "last N seconds");
    http_end end = take_turn(r);
    if (end != HTTP_GOING_ON)
        return http_error_window_ended(
            r, end, "client went away before its turn to read the flight "
                    "recorder");
    int64_t now = clock_mono_ns();
    trace_snapshot *s;
    int rc = trace_snapshot_take(
        now - (int64_t)cfg_int(CFG_TRACE_FLIGHT_SECONDS) * NS_PER_S, now,
        true, &s);
    if (rc == 0) {
        s->cpu_samples = sampler_running();
        rc = reply(r, s, json);
    } else {
        rc = http_error(r, 500, "Could not read the flight recorder: %s",
                        cpprof_strerror(rc));
    }
    give_turn();
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
    int64_t stop = clock_mono_ns();
    if (end == HTTP_GOING_ON)
        end = take_turn(r);
    trace_snapshot *s = NULL;
    if (end == HTTP_GOING_ON)
        rc = trace_snapshot_take(start, stop, false, &s);
    if (s)
        s->cpu_samples = sampler_running();
    if (sampling)
        cpu_profile_discard();
    trace_window_end();
    if (end != HTTP_GOING_ON)
        return http_error_window_ended(
            r, end, "client went away before the trace ended");
    rc = rc ? http_error(r, 500, "Could not finish trace: %s",
                         cpprof_strerror(rc))
            : reply(r, s, json);
    give_turn();
    return rc;
}
