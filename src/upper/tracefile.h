/*
 * tracefile.h -- a trace snapshot encoded as a file (tracefile.c), its
 * stacks named: what /debug/pprof/trace sends and
 * cpprof_trace_flight_write writes.
 */
#ifndef CPPROF_TRACEFILE_H
#define CPPROF_TRACEFILE_H

#include "timeline.h"
#include "trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* s as Perfetto's protobuf trace, or with `json` Chrome's trace-event
 * JSON, written to `out` as it is encoded.  0, or -ENOMEM, or the sink's
 * error. */
int tracefile_encode(const trace_snapshot *s, bool json,
                     const timeline_sink *out);

/* cpprof_trace_flight_write: the flight recorder's last
 * trace_flight_seconds up to `until` (CLOCK_MONOTONIC ns: when the
 * program asked, not when libcpprof-upper.so was loaded to answer),
 * written to fd in Perfetto's format. */
int tracefile_flight_write(int fd, int64_t until);

#endif
