/*
 * timeline_json.c -- the timeline (timeline_model.h) as Chrome's
 * trace-event JSON (?format=json of /debug/pprof/trace), which
 * chrome://tracing, Perfetto's UI and cpprof's own page read:
 *
 *   {"traceEvents":[...],"displayTimeUnit":"ns",
 *    "otherData":{"dropped":N,"cpu_samples":B,"flight":B,
 *                 "start_ns":S,"end_ns":E,"realtime_ns":R}}
 *
 * Times are microseconds of CLOCK_MONOTONIC as numbers (ns / 1000.0); a
 * slice is one "X" event with its dur, an instant an "i" of the thread
 * ("s":"t").  Threads are tid lanes of pid; a task's lane is tid
 * 1000000000 + its number.  Every lane is named by a "thread_name"
 * metadata event, the process by "process_name".
 *
 * The events are written one at a time, each dumped by jansson to the
 * caller's sink, so the document is never held whole, as jansson values
 * or as text.
 */
#include "timeline_model.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

/* Where a task's lane is among the threads' tids. */
#define TASK_TID_BASE 1000000000ull
/* Microseconds with ns kept: up to 10^13 us (115 days) and three
 * decimals. */
#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(16))

typedef struct {
    const timeline *t;
    tl_out out;
    bool first; /* no event written yet */
} writer;

static int append(const char *s, size_t n, void *arg)
{
    writer *w = arg;
    return tl_out_put(&w->out, s, n) ? -1 : 0;
}

/* The error that ended the writing: the sink's, or else -ENOMEM. */
static int failure(const writer *w)
{
    return w->out.rc ? w->out.rc : -ENOMEM;
}

/* Appends v (taking it, NULL for out of memory) to traceEvents. */
static int put_event(writer *w, json_t *v)
{
    int rc = 0;
    if (!v || append(",", !w->first, w) ||
        json_dump_callback(v, append, w, DUMP_FLAGS))
        rc = failure(w);
    w->first = false;
    json_decref(v);
    return rc;
}

static json_int_t lane_tid(const tl_lane *lane)
{
    return lane->task ? (json_int_t)(TASK_TID_BASE + lane->number)
                      : (json_int_t)lane->tid;
}

static int put_names(writer *w)
{
    const timeline *t = w->t;
    json_int_t pid = t->s->pid;
    int rc = put_event(w, json_pack("{s:s, s:s, s:I, s:{s:s}}", "ph", "M",
                                    "name", "process_name", "pid", pid,
                                    "args", "name", t->process_name));
    for (size_t i = 0; i < t->n_lanes && !rc; i++)
        rc = put_event(w, json_pack("{s:s, s:s, s:I, s:I, s:{s:s}}", "ph",
                                    "M", "name", "thread_name", "pid", pid,
                                    "tid", lane_tid(&t->lanes[i]), "args",
                                    "name", t->lanes[i].name));
    return rc;
}

static json_t *labels_json(const tl_set *set)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < set->n; i++) {
        if (json_object_set_new(o, set->kv[2 * i],
                                json_string(set->kv[2 * i + 1]))) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *stack_json(const tl_stack *st)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < st->n; i++) {
        if (json_array_append_new(a, json_string(st->frames[i]))) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* The item's args: NULL for none, *failed when out of memory. */
static json_t *args_json(const timeline *t, const tl_item *it, bool *failed)
{
    json_t *args;
    switch (it->what) {
    case TL_LABELS:
        args = json_pack("{s:o}", "labels",
                         labels_json(timeline_set(t, it->set)));
        break;
    case TL_LOG: args = json_pack("{s:s}", "message", it->text); break;
    case TL_CPU:
        args = json_pack("{s:o, s:o}", "labels",
                         labels_json(timeline_set(t, it->set)), "stack",
                         stack_json(timeline_stack(t, it->stack)));
        break;
    case TL_LOCK:
        args = json_pack("{s:o}", "stack",
                         stack_json(timeline_stack(t, it->stack)));
        break;
    case TL_TASK:
        args = json_pack("{s:o, s:I}", "labels",
                         labels_json(timeline_set(t, it->set)), "tid",
                         (json_int_t)it->tid);
        if (args && it->text &&
            json_object_set_new(args, "reason", json_string(it->text)))
            json_decref(args), args = NULL;
        break;
    default: return NULL;
    }
    *failed = !args;
    return args;
}

static json_t *item_json(const timeline *t, const tl_item *it)
{
    json_int_t pid = t->s->pid, tid = lane_tid(&t->lanes[it->lane]);
    double ts = it->ts / 1000.0;
    json_t *v =
        it->dur == TL_INSTANT
            ? json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:f}", "ph", "i", "s",
                        "t", "cat", it->cat, "name", it->name, "pid", pid,
                        "tid", tid, "ts", ts)
            : json_pack("{s:s, s:s, s:s, s:I, s:I, s:f, s:f}", "ph", "X",
                        "cat", it->cat, "name", it->name, "pid", pid, "tid",
                        tid, "ts", ts, "dur", it->dur / 1000.0);
    bool failed = false;
    json_t *args = v ? args_json(t, it, &failed) : NULL;
    if (failed || (args && json_object_set_new(v, "args", args))) {
        json_decref(v);
        return NULL;
    }
    return v;
}

static int put_other_data(writer *w)
{
    const trace_snapshot *s = w->t->s;
    json_t *v = json_pack("{s:I, s:b, s:b, s:I, s:I, s:I}", "dropped",
                          (json_int_t)s->dropped, "cpu_samples",
                          s->cpu_samples, "flight", s->flight, "start_ns",
                          (json_int_t)s->start_ns, "end_ns",
                          (json_int_t)s->end_ns, "realtime_ns",
                          (json_int_t)s->realtime_ns);
    int rc = v && !json_dump_callback(v, append, w, DUMP_FLAGS) ? 0
                                                                : failure(w);
    json_decref(v);
    return rc;
}

static int put_document(writer *w)
{
    const char *head = "{\"traceEvents\":[";
    const char *middle = "],\"displayTimeUnit\":\"ns\",\"otherData\":";
    int rc = append(head, strlen(head), w) ? failure(w) : put_names(w);
    for (size_t i = 0; i < w->t->n_items && !rc; i++)
        rc = put_event(w, item_json(w->t, &w->t->items[i]));
    if (!rc && append(middle, strlen(middle), w))
        rc = failure(w);
    if (!rc)
        rc = put_other_data(w);
    if (!rc && append("}", 1, w))
        rc = failure(w);
    return rc;
}

int timeline_json(const trace_snapshot *s, const timeline_frames *stacks,
                  const timeline_sink *out)
{
    writer w = {.first = true};
    int rc = tl_out_open(&w.out, out);
    if (rc)
        return rc;
    timeline t;
    rc = timeline_build(&t, s, stacks);
    if (rc) {
        tl_out_close(&w.out);
        return rc;
    }
    w.t = &t;
    rc = put_document(&w);
    timeline_free(&t);
    int closed = tl_out_close(&w.out);
    return rc ? rc : closed;
}
