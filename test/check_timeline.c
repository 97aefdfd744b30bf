/*
 * check_timeline.c -- the trace encoders (timeline.h) on a snapshot made
 * here by hand: two threads with events and one of cpprof's own without,
 * a task, label sets as the recorder copies them, a region, a log line with
 * a byte that is not UTF-8, CPU samples, a lock wait, a label span still
 * open at the window's end.
 *
 * The JSON is parsed back with jansson and the protobuf unpacked with the
 * code protoc-c generated from src/upper/perfetto_trace.proto: in the protobuf,
 * every interned name and stack is defined once, before use (the two CPU
 * samples share a stack), every slice's begin has its
 * end on its track, every packet is on one sequence and in time order.
 * Both are then reduced to the same list of (category, name, lane, ts,
 * dur) and must be equal, and the expected items are looked up in it.
 *
 * With --write DIR it writes both forms (DIR/trace.pb, DIR/trace.json)
 * for test/timeline_protoc.sh instead.
 */
#define _GNU_SOURCE
#include "timeline.h"
#include "perfetto_trace.pb-c.h"

#include <check.h>
#include <cpprof.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T0 1000000000000ll /* the window's start, ns */
#define US 1000ll
#define TASK_TID 1000000007ll

/* ---- The snapshot ---------------------------------------------------------- */

static const char *const frames_cpu[] = {"leaf (a.c:1)", "main (a.c:9)"};
static const char *const frames_lock[] = {"lock (b.c:2)", "worker (b.c:5)"};
static const timeline_frames frames[] = {{frames_cpu, 2}, {frames_lock, 2}};
static const uintptr_t pcs_cpu[] = {0x1000, 0x2000};
static const uintptr_t pcs_lock[] = {0x3000, 0x4000};

static const char *const kv_acme[] = {"job", "7", "tenant", "acme"};
static const char *const kv_globex[] = {"tenant", "globex"};
static const char *const kv_task[] = {"job", "task7"};

typedef struct {
    trace_snapshot s;
    trace_labels sets[4];
    trace_event events[16];
    trace_thread threads[3];
    trace_task tasks[1];
    trace_stack stacks[2];
} fixture;

static void add(fixture *f, int64_t at_us, trace_kind kind, pid_t tid,
                uint64_t task, uint32_t set, uint32_t stack, const char *text,
                const char *text2)
{
    f->events[f->s.n_events++] =
        (trace_event){.ts = T0 + at_us * US, .kind = kind, .tid = tid,
                      .task = task, .labels = set, .stack = stack,
                      .text = text, .text2 = text2};
}

static void make_fixture(fixture *f)
{
    memset(f, 0, sizeof *f);
    f->sets[1] = (trace_labels){2, kv_acme};
    f->sets[2] = (trace_labels){1, kv_globex};
    f->sets[3] = (trace_labels){1, kv_task};
    f->threads[0] = (trace_thread){.tid = 101, .name = "main", .alive = true};
    f->threads[1] = (trace_thread){.tid = 102, .name = "worker",
                                   .alive = true};
    f->threads[2] = (trace_thread){.tid = 103, .name = "cpprof-sampler",
                                   .own = true, .alive = true};
    f->tasks[0] = (trace_task){.number = 7, .labels = 3};
    f->stacks[0] = (trace_stack){pcs_cpu, 2};
    f->stacks[1] = (trace_stack){pcs_lock, 2};
    add(f, 0, TRACE_THREAD_START, 101, 0, 0, 0, "main", NULL);
    add(f, 0, TRACE_LABELS, 101, 0, 1, 0, NULL, NULL);
    add(f, 500, TRACE_REGION_BEGIN, 101, 0, 1, 0, "load", NULL);
    add(f, 1000, TRACE_CPU_SAMPLE, 101, 0, 1, 1, NULL, NULL);
    add(f, 1500, TRACE_LOG, 101, 0, 1, 0, "db", "bad \xff byte");
    add(f, 2000, TRACE_REGION_END, 101, 0, 1, 0, "load", NULL);
    add(f, 2500, TRACE_LOCK_WAIT, 102, 0, 0, 2, "mutex", NULL);
    f->events[f->s.n_events - 1].dur_ns = 1000 * US;
    add(f, 3000, TRACE_TASK_ENTER, 102, 7, 3, 0, NULL, NULL);
    add(f, 3500, TRACE_CPU_SAMPLE, 102, 7, 3, 1, NULL, NULL);
    add(f, 4000, TRACE_LABELS, 101, 0, 0, 0, NULL, NULL);
    add(f, 5000, TRACE_TASK_LEAVE, 102, 7, 3, 0, "chan receive", NULL);
    add(f, 6000, TRACE_LABELS, 102, 0, 2, 0, NULL, NULL);
    add(f, 8000, TRACE_THREAD_EXIT, 101, 0, 0, 0, NULL, NULL);
    f->s = (trace_snapshot){
        .start_ns = T0, .end_ns = T0 + 10000 * US,
        .realtime_ns = 1700000000000000000ll, .pid = 4242,
        .process_name = "demo", .events = f->events,
        .n_events = f->s.n_events, .threads = f->threads, .n_threads = 3,
        .tasks = f->tasks, .n_tasks = 1, .sets = f->sets, .n_sets = 4,
        .stacks = f->stacks, .n_stacks = 2, .dropped = 3,
        .cpu_samples = true, .flight = false};
}

/* ---- Encoding into memory ----------------------------------------------------- */

typedef int (*encoder)(const trace_snapshot *, const timeline_frames *,
                       const timeline_sink *);

static int to_memory(void *arg, const void *data, size_t len)
{
    return fwrite(data, 1, len, arg) == len ? 0 : -EIO;
}

/* What encoder fn writes for s, in a malloc'd *out (NUL-terminated) of
 * *len bytes; fn's result.  No ck_assert: --write runs it outside a
 * test. */
static int encode(encoder fn, const trace_snapshot *s,
                  const timeline_frames *names, void *out, size_t *len)
{
    char **text = out;
    FILE *f = open_memstream(text, len);
    if (f == NULL)
        return -ENOMEM;
    timeline_sink sink = {to_memory, f};
    int rc = fn(s, names, &sink);
    return fclose(f) != 0 && rc == 0 ? -ENOMEM : rc;
}

/* A sink that fails at its second piece: the encoder stops with its
 * error. */
static int fail_second(void *arg, const void *data, size_t len)
{
    (void)data, (void)len;
    return ++*(int *)arg > 1 ? -EPIPE : 0;
}

/* ---- Both forms as one list ------------------------------------------------- */

typedef struct {
    char cat[32], name[64];
    long long tid;
    int64_t ts, dur; /* ns; dur -1: an instant */
} item;

typedef struct {
    item v[64];
    size_t n;
} items;

static void push(items *l, const char *cat, const char *name, long long tid,
                 int64_t ts, int64_t dur)
{
    ck_assert_uint_lt(l->n, 64);
    item *it = &l->v[l->n++];
    memset(it, 0, sizeof *it);
    snprintf(it->cat, sizeof it->cat, "%s", cat);
    snprintf(it->name, sizeof it->name, "%s", name);
    it->tid = tid, it->ts = ts, it->dur = dur;
}

static int compare_items(const void *pa, const void *pb)
{
    const item *a = pa, *b = pb;
    int c = strcmp(a->cat, b->cat);
    if (!c)
        c = strcmp(a->name, b->name);
    if (!c)
        c = (a->tid > b->tid) - (a->tid < b->tid);
    if (!c)
        c = (a->ts > b->ts) - (a->ts < b->ts);
    if (!c)
        c = (a->dur > b->dur) - (a->dur < b->dur);
    return c;
}

static const item *find(const items *l, const char *cat, long long tid,
                        int64_t ts)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].cat, cat) && l->v[i].tid == tid &&
            l->v[i].ts == ts)
            return &l->v[i];
    return NULL;
}

static size_t count(const items *l, const char *cat)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n; i++)
        n += !strcmp(l->v[i].cat, cat);
    return n;
}

/* ---- JSON ----------------------------------------------------------------------- */

static int64_t ns_of(json_t *us)
{
    ck_assert(json_is_real(us));
    return llround(json_real_value(us) * 1000);
}

static json_t *json_of(const fixture *f)
{
    char *out;
    size_t len;
    ck_assert_int_eq(encode(timeline_json, &f->s, frames, &out, &len), 0);
    ck_assert_uint_eq(strlen(out), len);
    json_error_t err;
    json_t *doc = json_loadb(out, len, 0, &err);
    ck_assert_msg(doc, "JSON: %s at %d", err.text, err.position);
    free(out);
    return doc;
}

/* The non-metadata events; `names` gets the metadata's thread names. */
static void json_items(json_t *doc, items *l, json_t *names)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "traceEvents"), i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        ck_assert_ptr_nonnull(ph);
        ck_assert_int_eq(json_integer_value(json_object_get(e, "pid")), 4242);
        long long tid = json_integer_value(json_object_get(e, "tid"));
        if (!strcmp(ph, "M")) {
            char key[24] = "process";
            if (strcmp(json_string_value(json_object_get(e, "name")),
                       "process_name"))
                snprintf(key, sizeof key, "%lld", tid);
            json_object_set(names, key,
                            json_object_get(json_object_get(e, "args"), "name"));
            continue;
        }
        ck_assert(!strcmp(ph, "X") || !strcmp(ph, "i"));
        if (!strcmp(ph, "i"))
            ck_assert_str_eq(json_string_value(json_object_get(e, "s")), "t");
        push(l, json_string_value(json_object_get(e, "cat")),
             json_string_value(json_object_get(e, "name")), tid,
             ns_of(json_object_get(e, "ts")),
             !strcmp(ph, "X") ? ns_of(json_object_get(e, "dur")) : -1);
    }
}

static json_t *json_event(json_t *doc, const char *cat, long long tid,
                          int64_t ts)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(doc, "traceEvents"), i, e) {
        json_t *c = json_object_get(e, "cat");
        if (c && !strcmp(json_string_value(c), cat) &&
            json_integer_value(json_object_get(e, "tid")) == tid &&
            ns_of(json_object_get(e, "ts")) == ts)
            return e;
    }
    return NULL;
}

static const char *arg(json_t *e, const char *path1, const char *path2)
{
    json_t *v = json_object_get(json_object_get(e, "args"), path1);
    if (path2)
        v = json_object_get(v, path2);
    return json_string_value(v);
}

/* ---- Protobuf ------------------------------------------------------------------- */

typedef Perfetto__Protos__TracePacket Packet;
typedef Perfetto__Protos__TrackEvent TrackEvent;
typedef Perfetto__Protos__TrackDescriptor TrackDescriptor;

#define MAX_IID 64

typedef struct {
    const char *names[MAX_IID], *cats[MAX_IID], *annots[MAX_IID];
    char *values[MAX_IID]; /* interned annotation strings */
    const TrackDescriptor *tracks[16];
    size_t n_tracks;
    struct open {
        uint64_t track;
        const TrackEvent *begin;
        int64_t ts;
    } open[16];
    size_t n_open;
} reader;

static void learn(const char **table, uint64_t iid, const char *name)
{
    ck_assert_uint_gt(iid, 0);
    ck_assert_uint_lt(iid, MAX_IID);
    ck_assert_ptr_null(table[iid]);
    table[iid] = name;
}

static void learn_interned(reader *r, const Perfetto__Protos__InternedData *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_event_names; i++)
        learn(r->names, d->event_names[i]->iid, d->event_names[i]->name);
    for (size_t i = 0; i < d->n_event_categories; i++)
        learn(r->cats, d->event_categories[i]->iid,
              d->event_categories[i]->name);
    for (size_t i = 0; i < d->n_debug_annotation_names; i++)
        learn(r->annots, d->debug_annotation_names[i]->iid,
              d->debug_annotation_names[i]->name);
    for (size_t i = 0; i < d->n_debug_annotation_string_values; i++) {
        const Perfetto__Protos__InternedString *v =
            d->debug_annotation_string_values[i];
        char *text = strndup((const char *)v->str.data, v->str.len);
        learn((const char **)r->values, v->iid, text);
    }
}

static void reader_free(reader *r)
{
    for (size_t i = 0; i < MAX_IID; i++)
        free(r->values[i]);
}

static const char *lookup(const char *const *table, uint64_t iid)
{
    ck_assert_uint_lt(iid, MAX_IID);
    ck_assert_msg(table[iid], "iid %" PRIu64 " used before defined", iid);
    return table[iid];
}

static const TrackDescriptor *track(const reader *r, uint64_t uuid)
{
    for (size_t i = 0; i < r->n_tracks; i++)
        if (r->tracks[i]->uuid == uuid)
            return r->tracks[i];
    ck_abort_msg("no track %" PRIu64, uuid);
    return NULL;
}

/* The JSON's lane of a track: a thread's tid (its labels track's too), a
 * task's 1000000000 + number. */
static long long lane_of(const reader *r, uint64_t uuid)
{
    const TrackDescriptor *t = track(r, uuid);
    if (!t->thread && t->has_parent_uuid && !strcmp(t->name, "labels"))
        t = track(r, t->parent_uuid);
    if (t->thread)
        return t->thread->tid;
    unsigned long long n;
    ck_assert_int_eq(sscanf(t->name, "task %llu", &n), 1);
    return 1000000000ll + (long long)n;
}

static const char *annotation(const reader *r, const TrackEvent *e,
                              const char *name)
{
    for (size_t i = 0; i < e->n_debug_annotations; i++) {
        const Perfetto__Protos__DebugAnnotation *a = e->debug_annotations[i];
        if (strcmp(lookup(r->annots, a->name_iid), name))
            continue;
        if (a->value_case ==
            PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE_IID)
            return lookup((const char *const *)r->values, a->string_value_iid);
        return a->value_case ==
                       PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE
                   ? a->string_value
                   : "(not a string)";
    }
    return NULL;
}

static void on_track_event(reader *r, const Packet *p, items *l)
{
    const TrackEvent *e = p->track_event;
    ck_assert(e->has_track_uuid);
    if (e->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN) {
        ck_assert_uint_lt(r->n_open, 16);
        r->open[r->n_open++] = (struct open){e->track_uuid, e,
                                             (int64_t)p->timestamp};
        return;
    }
    if (e->type == PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END) {
        size_t i = r->n_open;
        while (i-- > 0 && r->open[i].track != e->track_uuid)
            ;
        ck_assert_msg(i < r->n_open, "slice end with no begin");
        struct open o = r->open[i];
        memmove(&r->open[i], &r->open[i + 1],
                (r->n_open - i - 1) * sizeof *r->open);
        r->n_open--;
        push(l, lookup(r->cats, o.begin->category_iids[0]),
             lookup(r->names, o.begin->name_iid), lane_of(r, o.track), o.ts,
             (int64_t)p->timestamp - o.ts);
        return;
    }
    ck_assert_int_eq(e->type, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT);
    const char *name = lookup(r->names, e->name_iid);
    if (strcmp(name, "cpprof"))
        push(l, lookup(r->cats, e->category_iids[0]), name,
             lane_of(r, e->track_uuid), (int64_t)p->timestamp, -1);
}

static Perfetto__Protos__Trace *perfetto_of(const fixture *f)
{
    uint8_t *out;
    size_t len;
    ck_assert_int_eq(encode(timeline_perfetto, &f->s, frames, &out, &len), 0);
    Perfetto__Protos__Trace *t =
        perfetto__protos__trace__unpack(NULL, len, out);
    ck_assert_ptr_nonnull(t);
    free(out);
    return t;
}

/* The trace's slices and instants; checks the sequence on the way. */
static void perfetto_items(const Perfetto__Protos__Trace *t, reader *r,
                           items *l)
{
    ck_assert_uint_gt(t->n_packet, 3);
    ck_assert_int_eq(t->packet[0]->data_case,
                     PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT);
    bool cleared = false;
    uint64_t last = 0;
    for (size_t i = 0; i < t->n_packet; i++) {
        const Packet *p = t->packet[i];
        ck_assert_uint_eq(p->trusted_packet_sequence_id, 4242);
        ck_assert(p->has_timestamp);
        ck_assert_uint_ge(p->timestamp, last);
        last = p->timestamp;
        if (p->has_sequence_flags && (p->sequence_flags & 1))
            cleared = true;
        learn_interned(r, p->interned_data);
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR)
            r->tracks[r->n_tracks++] = p->track_descriptor;
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT)
            continue;
        ck_assert_msg(cleared, "a track event before the state is cleared");
        ck_assert(p->sequence_flags & 2);
        on_track_event(r, p, l);
    }
    ck_assert_uint_eq(r->n_open, 0);
}

/* ---- Tests ---------------------------------------------------------------------- */

START_TEST(json_holds_the_expected_events)
{
    fixture f;
    make_fixture(&f);
    json_t *doc = json_of(&f);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "displayTimeUnit")),
                     "ns");
    json_t *other = json_object_get(doc, "otherData");
    ck_assert_int_eq(json_integer_value(json_object_get(other, "dropped")), 3);
    ck_assert(json_is_true(json_object_get(other, "cpu_samples")));
    ck_assert(json_is_false(json_object_get(other, "flight")));
    ck_assert_int_eq(json_integer_value(json_object_get(other, "start_ns")), T0);
    ck_assert_int_eq(json_integer_value(json_object_get(other, "end_ns")),
                     T0 + 10000 * US);
    items l = {0};
    json_t *names = json_object();
    json_items(doc, &l, names);
    ck_assert_str_eq(json_string_value(json_object_get(names, "process")), "demo");
    ck_assert_str_eq(json_string_value(json_object_get(names, "101")), "main");
    ck_assert_str_eq(json_string_value(json_object_get(names, "103")),
                     "cpprof-sampler (cpprof)");
    ck_assert_str_eq(json_string_value(json_object_get(names, "1000000007")),
                     "task 7 job=task7");

    ck_assert_uint_eq(count(&l, "labels"), 2);
    ck_assert_uint_eq(count(&l, "region"), 1);
    ck_assert_uint_eq(count(&l, "log"), 1);
    ck_assert_uint_eq(count(&l, "cpu"), 2);
    ck_assert_uint_eq(count(&l, "mutex"), 1);
    ck_assert_uint_eq(count(&l, "thread"), 2);
    ck_assert_uint_eq(count(&l, "task"), 1);

    json_t *span = json_event(doc, "labels", 101, T0);
    ck_assert_ptr_nonnull(span);
    ck_assert_str_eq(json_string_value(json_object_get(span, "name")),
                     "job=7,tenant=acme");
    ck_assert_int_eq(ns_of(json_object_get(span, "dur")), 4000 * US);
    ck_assert_str_eq(arg(span, "labels", "tenant"), "acme");
    ck_assert_str_eq(arg(span, "labels", "job"), "7");
    json_t *open = json_event(doc, "labels", 102, T0 + 6000 * US);
    ck_assert_ptr_nonnull(open);
    ck_assert_int_eq(ns_of(json_object_get(open, "dur")), 4000 * US);

    const item *region = find(&l, "region", 101, T0 + 500 * US);
    ck_assert_ptr_nonnull(region);
    ck_assert_str_eq(region->name, "load");
    ck_assert_int_eq(region->dur, 1500 * US);

    json_t *log = json_event(doc, "log", 101, T0 + 1500 * US);
    ck_assert_ptr_nonnull(log);
    ck_assert_str_eq(json_string_value(json_object_get(log, "name")), "db");
    ck_assert_str_eq(arg(log, "message", NULL), "bad \\xff byte");

    json_t *cpu = json_event(doc, "cpu", 101, T0 + 1000 * US);
    ck_assert_ptr_nonnull(cpu);
    json_t *stack = json_object_get(json_object_get(cpu, "args"), "stack");
    ck_assert_uint_eq(json_array_size(stack), 2);
    ck_assert_str_eq(json_string_value(json_array_get(stack, 0)), "leaf (a.c:1)");
    ck_assert_str_eq(arg(cpu, "labels", "tenant"), "acme");

    json_t *wait = json_event(doc, "mutex", 102, T0 + 1500 * US);
    ck_assert_ptr_nonnull(wait);
    ck_assert_str_eq(json_string_value(json_object_get(wait, "name")),
                     "lock wait");
    ck_assert_int_eq(ns_of(json_object_get(wait, "dur")), 1000 * US);
    ck_assert_str_eq(json_string_value(json_array_get(
                         json_object_get(json_object_get(wait, "args"), "stack"),
                         0)),
                     "lock (b.c:2)");

    json_t *task = json_event(doc, "task", TASK_TID, T0 + 3000 * US);
    ck_assert_ptr_nonnull(task);
    ck_assert_str_eq(json_string_value(json_object_get(task, "name")), "task 7");
    ck_assert_int_eq(ns_of(json_object_get(task, "dur")), 2000 * US);
    ck_assert_str_eq(arg(task, "reason", NULL), "chan receive");
    ck_assert_str_eq(arg(task, "labels", "job"), "task7");

    ck_assert_ptr_nonnull(find(&l, "thread", 101, T0 + 8000 * US));
    json_decref(names);
    json_decref(doc);
}
END_TEST

START_TEST(protobuf_holds_what_the_json_holds)
{
    fixture f;
    make_fixture(&f);
    json_t *doc = json_of(&f);
    json_t *names = json_object();
    items from_json = {0}, from_pb = {0};
    json_items(doc, &from_json, names);
    Perfetto__Protos__Trace *t = perfetto_of(&f);
    reader r = {0};
    perfetto_items(t, &r, &from_pb);
    qsort(from_json.v, from_json.n, sizeof *from_json.v, compare_items);
    qsort(from_pb.v, from_pb.n, sizeof *from_pb.v, compare_items);
    ck_assert_uint_eq(from_pb.n, from_json.n);
    for (size_t i = 0; i < from_pb.n; i++)
        ck_assert_msg(!compare_items(&from_pb.v[i], &from_json.v[i]),
                      "protobuf %s/%s lane %lld at %" PRId64 " for %" PRId64
                      ", JSON %s/%s lane %lld at %" PRId64 " for %" PRId64,
                      from_pb.v[i].cat, from_pb.v[i].name, from_pb.v[i].tid,
                      from_pb.v[i].ts, from_pb.v[i].dur, from_json.v[i].cat,
                      from_json.v[i].name, from_json.v[i].tid,
                      from_json.v[i].ts, from_json.v[i].dur);
    perfetto__protos__trace__free_unpacked(t, NULL);
    reader_free(&r);
    json_decref(names);
    json_decref(doc);
}
END_TEST

START_TEST(protobuf_tracks_clock_and_annotations)
{
    fixture f;
    make_fixture(&f);
    Perfetto__Protos__Trace *t = perfetto_of(&f);
    reader r = {0};
    items l = {0};
    perfetto_items(t, &r, &l);

    const Perfetto__Protos__ClockSnapshot *clock = t->packet[0]->clock_snapshot;
    ck_assert_uint_eq(clock->n_clocks, 2);
    ck_assert_uint_eq(clock->clocks[0]->clock_id, 3);
    ck_assert_uint_eq(clock->clocks[0]->timestamp, T0);
    ck_assert_uint_eq(clock->clocks[1]->clock_id, 1);
    ck_assert_uint_eq(clock->clocks[1]->timestamp, f.s.realtime_ns);
    ck_assert_int_eq(clock->primary_trace_clock, 3);
    const Packet *first = t->packet[1];
    ck_assert_uint_eq(first->sequence_flags, 1);
    ck_assert_uint_eq(first->trace_packet_defaults->timestamp_clock_id, 3);
    ck_assert_int_eq(first->track_descriptor->process->pid, 4242);
    ck_assert_str_eq(first->track_descriptor->process->process_name, "demo");

    /* Threads, cpprof's own named so, a task under the process. */
    size_t threads = 0, tasks = 0;
    for (size_t i = 0; i < r.n_tracks; i++) {
        const TrackDescriptor *d = r.tracks[i];
        if (d->thread) {
            threads++;
            ck_assert_int_eq(d->thread->pid, 4242);
            if (d->thread->tid == 103)
                ck_assert_str_eq(d->thread->thread_name,
                                 "cpprof-sampler (cpprof)");
        } else if (d->name && !strncmp(d->name, "task ", 5)) {
            tasks++;
            ck_assert_str_eq(d->name, "task 7 job=task7");
            ck_assert_uint_eq(d->parent_uuid, first->track_descriptor->uuid);
        }
    }
    ck_assert_uint_eq(threads, 3);
    ck_assert_uint_eq(tasks, 1);

    /* Annotations: the labels one by one on a span, the stack and labels on
     * a CPU sample, the recording's own on "cpprof". */
    bool span = false, sample = false, recording = false;
    for (size_t i = 0; i < t->n_packet; i++) {
        const Packet *p = t->packet[i];
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT ||
            p->track_event->type ==
                PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END)
            continue;
        const TrackEvent *e = p->track_event;
        const char *cat = r.cats[e->category_iids[0]];
        if (!strcmp(cat, "labels") && p->timestamp == T0) {
            span = true;
            ck_assert_str_eq(annotation(&r, e, "tenant"), "acme");
            ck_assert_str_eq(annotation(&r, e, "job"), "7");
        } else if (!strcmp(cat, "cpu") && p->timestamp == T0 + 1000 * US) {
            sample = true;
            ck_assert_str_eq(annotation(&r, e, "stack"),
                             "leaf (a.c:1)\nmain (a.c:9)");
            const Perfetto__Protos__DebugAnnotation *labels = NULL;
            for (size_t j = 0; j < e->n_debug_annotations; j++)
                if (!strcmp(r.annots[e->debug_annotations[j]->name_iid],
                            "labels"))
                    labels = e->debug_annotations[j];
            ck_assert_ptr_nonnull(labels);
            ck_assert_uint_eq(labels->n_dict_entries, 2);
            ck_assert_str_eq(labels->dict_entries[1]->name, "tenant");
            ck_assert_str_eq(labels->dict_entries[1]->string_value, "acme");
        } else if (!strcmp(cat, "mutex")) {
            ck_assert_str_eq(annotation(&r, e, "stack"),
                             "lock (b.c:2)\nworker (b.c:5)");
        } else if (!strcmp(cat, "cpprof")) {
            recording = true;
            ck_assert_int_eq(e->debug_annotations[0]->int_value, 3);
            ck_assert(e->debug_annotations[1]->bool_value);
            ck_assert(!e->debug_annotations[2]->bool_value);
        }
    }
    ck_assert(span && sample && recording);
    perfetto__protos__trace__free_unpacked(t, NULL);
    reader_free(&r);
}
END_TEST

START_TEST(bad_input_is_refused_or_survived)
{
    uint8_t *pb;
    char *js;
    size_t len;
    ck_assert_int_eq(encode(timeline_perfetto, NULL, NULL, &pb, &len),
                     -EINVAL);
    free(pb);
    ck_assert_int_eq(encode(timeline_json, NULL, NULL, &js, &len), -EINVAL);
    free(js);
    fixture f;
    make_fixture(&f);
    ck_assert_int_eq(timeline_json(&f.s, NULL, NULL), -EINVAL);
    ck_assert_int_eq(timeline_perfetto(&f.s, NULL, NULL), -EINVAL);
    trace_snapshot broken = f.s;
    broken.events = NULL;
    ck_assert_int_eq(encode(timeline_perfetto, &broken, NULL, &pb, &len),
                     -EINVAL);
    free(pb);
    /* A large fixture (every event 2,000 times over) fills more than one
     * of the encoders' blocks: a sink's error ends the encoding with it. */
    enum { TIMES = 2000 };
    fixture big = f;
    trace_event *many = malloc(TIMES * f.s.n_events * sizeof *many);
    ck_assert_ptr_nonnull(many);
    for (size_t i = 0; i < TIMES * f.s.n_events; i++)
        many[i] = f.events[i % f.s.n_events],
        many[i].ts += (int64_t)(i / f.s.n_events) * 10000 * US;
    big.s.events = many;
    big.s.n_events = TIMES * f.s.n_events;
    big.s.end_ns = T0 + TIMES * 10000 * US;
    encoder forms[] = {timeline_json, timeline_perfetto};
    for (int i = 0; i < 2; i++) {
        int pieces = 0;
        timeline_sink failing = {fail_second, &pieces};
        ck_assert_int_eq(forms[i](&big.s, frames, &failing), -EPIPE);
        ck_assert_int_eq(pieces, 2);
    }
    free(many);
    /* Indexes out of range, an end with no begin, a leave with no enter,
     * unknown threads and kinds, time going backwards: no crash, both
     * forms still parse, no frames named (PCs in hex). */
    f.events[1].labels = 99;
    f.events[3].stack = 99;
    f.events[2].kind = TRACE_NKINDS + 5;
    f.events[7].kind = TRACE_THREAD_START;
    f.events[7].tid = 999;
    f.events[12].ts = 0;
    ck_assert_int_eq(encode(timeline_perfetto, &f.s, NULL, &pb, &len), 0);
    Perfetto__Protos__Trace *t = perfetto__protos__trace__unpack(NULL, len, pb);
    ck_assert_ptr_nonnull(t);
    perfetto__protos__trace__free_unpacked(t, NULL);
    free(pb);
    ck_assert_int_eq(encode(timeline_json, &f.s, NULL, &js, &len), 0);
    json_t *doc = json_loadb(js, len, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    json_decref(doc);
    free(js);
}
END_TEST

/* --write DIR: both forms of the fixture, for test/timeline_protoc.sh. */
static int write_forms(const char *dir)
{
    fixture f;
    make_fixture(&f);
    uint8_t *pb;
    char *js, path[4096];
    size_t pb_len, js_len;
    if (encode(timeline_perfetto, &f.s, frames, &pb, &pb_len) ||
        encode(timeline_json, &f.s, frames, &js, &js_len))
        return 1;
    snprintf(path, sizeof path, "%s/trace.pb", dir);
    FILE *out = fopen(path, "wb");
    int rc = !out || fwrite(pb, 1, pb_len, out) != pb_len;
    if (out)
        rc |= fclose(out) != 0;
    snprintf(path, sizeof path, "%s/trace.json", dir);
    out = fopen(path, "wb");
    rc |= !out || fwrite(js, 1, js_len, out) != js_len;
    if (out)
        rc |= fclose(out) != 0;
    free(pb);
    free(js);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write"))
        return write_forms(argv[2]);
    Suite *s = suite_create("timeline");
    TCase *tc = tcase_create("timeline");
    tcase_add_test(tc, json_holds_the_expected_events);
    tcase_add_test(tc, protobuf_holds_what_the_json_holds);
    tcase_add_test(tc, protobuf_tracks_clock_and_annotations);
    tcase_add_test(tc, bad_input_is_refused_or_survived);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
