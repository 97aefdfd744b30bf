/*
 * timeline.h -- the encoders of /debug/pprof/trace: a trace recorder's
 * snapshot (trace.h) into Perfetto's protobuf trace (timeline_perfetto.c)
 * or Chrome's trace-event JSON (timeline_json.c), the forms Perfetto's UI,
 * chrome://tracing and cpprof's own page open.
 *
 * Both forms are written from one model of the window (timeline_model.c),
 * so they hold the same slices and instants:
 *   - a label span from one TRACE_LABELS of a thread to its next, its exit
 *     or the window's end; the empty set's spans are left out;
 *   - a region, a task's run on a thread, a lock wait: slices; what began
 *     before the window (an end without its begin, a wait longer than the
 *     window so far) starts at the window's start, what is still open ends
 *     at the thread's exit or the window's end;
 *   - a log line, a CPU sample, a thread's start and exit: instants.
 * Events stay on the thread they happened on; a task's runs are slices on
 * a lane of the task's own, named "task N" with its labels.
 *
 * Every text (names, labels, frames) is written with labels.h's bare
 * escape, so that no byte of a program's strings can break either form's
 * encoding (jansson takes only valid UTF-8).  Neither encoder calls the
 * recorder or the symbolizer: the caller names the stacks' frames.
 */
#ifndef CPPROF_TIMELINE_H
#define CPPROF_TIMELINE_H

#include "trace.h"

#include <stddef.h>
#include <stdint.h>

/* A stack's frames as text ("function (file:line)" or whatever the caller
 * made), innermost first; stacks[i] names trace_snapshot.stacks[i].  With
 * no array (NULL), frames are the PCs in hex. */
typedef struct {
    const char *const *frames;
    size_t n;
} timeline_frames;

/* Where an encoder writes its form, piece by piece in order (64 KiB at
 * most a call), so that the whole is never held in memory: the caller's
 * file, a reply compressed as it comes (http.h's http_out).  `write`
 * returns 0, or an error that ends the encoding with it. */
typedef struct {
    int (*write)(void *arg, const void *data, size_t len);
    void *arg;
} timeline_sink;

/* Perfetto's Trace (perfetto_trace.proto): one packet sequence, clock
 * CLOCK_MONOTONIC, names, categories and annotation names interned.
 * 0, or -EINVAL, -ENOMEM, or the sink's error. */
int timeline_perfetto(const trace_snapshot *s, const timeline_frames *stacks,
                      const timeline_sink *out);

/* Chrome's trace-event JSON: {"traceEvents":[...],"displayTimeUnit":"ns",
 * "otherData":{...}}, times in microseconds of CLOCK_MONOTONIC.  0, or
 * -EINVAL, -ENOMEM, or the sink's error. */
int timeline_json(const trace_snapshot *s, const timeline_frames *stacks,
                  const timeline_sink *out);

#endif
