/*
 * timeline_perfetto.c -- the timeline (timeline_model.h) as Perfetto's
 * protobuf trace (perfetto_trace.proto), which ui.perfetto.dev and
 * trace_processor open.
 *
 * A Trace is nothing but its repeated field 1, so packets are packed one
 * at a time, each behind its tag and length, and written to the caller's
 * sink: one packet's protobuf-c messages serve the next, and the trace is
 * never held whole, as messages or as bytes.
 *
 * One packet sequence (trusted_packet_sequence_id: the pid, so that the
 * traces of several processes, concatenated, keep their interning apart):
 *   1. a ClockSnapshot: CLOCK_MONOTONIC and CLOCK_REALTIME at the window's
 *      start, CLOCK_MONOTONIC the trace's clock (primary_trace_clock), so
 *      that the times shown are the recorder's own;
 *   2. the process's track, clearing the sequence's incremental state and
 *      giving its defaults (timestamps on CLOCK_MONOTONIC);
 *   3. the tracks: per thread, its own (regions, lock waits, instants) and,
 *      when it had label spans, a "labels" track beside it: a slice's end
 *      ends the innermost open slice of its track, and label spans do not
 *      nest with regions; per task, a track in the process;
 *   4. an instant "cpprof" on the process's track: records dropped, whether
 *      CPU samples were taken, whether a flight recording;
 *   5. the items, a slice as its begin and end, in time order, ties broken
 *      so that slices of one track nest.
 * Event names, categories, annotation names and stacks (the "stack"
 * annotation's text, by the stack's number in the snapshot) are interned:
 * the packet that first uses one carries its entry, as Perfetto's SDK
 * does, and every packet that uses interned data says it needs it.  A
 * stack's text is most of a sample's bytes, and samples share stacks.
 */
#define _GNU_SOURCE /* qsort_r */
#include "timeline_model.h"
#include "perfetto_trace.pb-c.h"

#include <errno.h>
#include <stdlib.h>

typedef Perfetto__Protos__TracePacket Packet;
typedef Perfetto__Protos__TrackEvent TrackEvent;
typedef Perfetto__Protos__TrackDescriptor TrackDescriptor;
typedef Perfetto__Protos__DebugAnnotation Annotation;
typedef Perfetto__Protos__DebugAnnotationName AnnotationName;
typedef Perfetto__Protos__EventName EventName;
typedef Perfetto__Protos__EventCategory EventCategory;
typedef Perfetto__Protos__InternedData InternedData;
typedef Perfetto__Protos__InternedString InternedString;

#define CLOCK_ID_REALTIME PERFETTO__PROTOS__BUILTIN_CLOCK__BUILTIN_CLOCK_REALTIME
#define CLOCK_ID_MONOTONIC PERFETTO__PROTOS__BUILTIN_CLOCK__BUILTIN_CLOCK_MONOTONIC
#define SEQ_CLEARED \
    PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED
#define SEQ_NEEDS \
    PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_NEEDS_INCREMENTAL_STATE

/* Track uuids, global to a trace: made of the pid, so that processes'
 * traces merge without clashes. */
enum { TRACK_PROCESS, TRACK_THREAD, TRACK_LABELS, TRACK_TASK };

/* ---- Interning --------------------------------------------------------- */

typedef struct {
    const char **strs; /* iid = index + 1 */
    size_t n, cap;
    struct hashindex index;
} strtab;

static bool same_str(const void *ctx, size_t item, const void *key)
{
    return strcmp(((const strtab *)ctx)->strs[item], key) == 0;
}

/* s's iid; *fresh when s is new (its entry still to be written). */
static int intern(strtab *tab, const char *s, uint64_t *iid, bool *fresh)
{
    uint64_t hash = hash_string(s);
    struct hashindex_slot *slot =
        hashindex_find(&tab->index, hash, same_str, tab, s);
    if (!slot)
        return -ENOMEM;
    *fresh = !slot->item;
    if (*fresh) {
        if (ARRAY_RESERVE(tab->strs, tab->n, tab->cap, 1))
            return -ENOMEM;
        tab->strs[tab->n] = s;
        hashindex_set(&tab->index, slot, hash, tab->n++);
    }
    *iid = slot->item;
    return 0;
}

static void strtab_free(strtab *tab)
{
    free(tab->strs);
    hashindex_free(&tab->index);
}

/* ---- The writer ---------------------------------------------------------- */

typedef struct {
    const timeline *t;
    uint32_t seq;
    tl_out out;
    uint8_t *buf; /* one packet, packed */
    size_t len, cap;
    strtab names, cats, annot_names;
    /* The packet being made, its annotations and its new interned
     * entries; each array holds as many as one packet can need. */
    Packet pkt;
    TrackEvent ev;
    uint64_t cat_iid;
    Annotation *ann, **ann_p, *dict, **dict_p;
    size_t n_ann, n_dict, max_ann;
    InternedData interned;
    EventName name_entry, *name_entry_p;
    EventCategory cat_entry, *cat_entry_p;
    AnnotationName *annot_entries, **annot_entries_p;
    InternedString stack_entry, *stack_entry_p;
    bool *stack_sent; /* per stack of the snapshot */
} writer;

static void put_varint(writer *w, uint64_t v)
{
    do {
        w->buf[w->len++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

/* Writes p as one Trace.packet (field 1, length-delimited). */
static int put_packet(writer *w, const Packet *p)
{
    size_t size = protobuf_c_message_get_packed_size(&p->base);
    w->len = 0;
    if (ARRAY_RESERVE(w->buf, w->len, w->cap, size + 11))
        return -ENOMEM;
    w->buf[w->len++] = 0x0a;
    put_varint(w, size);
    w->len += protobuf_c_message_pack(&p->base, w->buf + w->len);
    return tl_out_put(&w->out, w->buf, w->len);
}

static uint64_t ts_of(int64_t ns)
{
    return ns > 0 ? (uint64_t)ns : 0;
}

/* A packet of the sequence at ts, carrying nothing yet. */
static Packet *new_packet(writer *w, int64_t ts)
{
    w->pkt = (Packet)PERFETTO__PROTOS__TRACE_PACKET__INIT;
    w->pkt.has_timestamp = true;
    w->pkt.timestamp = ts_of(ts);
    w->pkt.optional_trusted_packet_sequence_id_case =
        PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
    w->pkt.trusted_packet_sequence_id = w->seq;
    return &w->pkt;
}

static uint64_t track_uuid(const writer *w, int kind, uint64_t id)
{
    uint64_t u = hash_mix(hash_mix((uint64_t)w->t->s->pid, kind), id);
    return u ? u : 1;
}

static int put_clock_snapshot(writer *w)
{
    const trace_snapshot *s = w->t->s;
    Perfetto__Protos__ClockSnapshot__Clock mono =
        PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT;
    Perfetto__Protos__ClockSnapshot__Clock real = mono;
    Perfetto__Protos__ClockSnapshot__Clock *clocks[] = {&mono, &real};
    mono.has_clock_id = mono.has_timestamp = true;
    mono.clock_id = CLOCK_ID_MONOTONIC;
    mono.timestamp = ts_of(s->start_ns);
    real.has_clock_id = real.has_timestamp = true;
    real.clock_id = CLOCK_ID_REALTIME;
    real.timestamp = ts_of(s->realtime_ns);
    Perfetto__Protos__ClockSnapshot snap =
        PERFETTO__PROTOS__CLOCK_SNAPSHOT__INIT;
    snap.n_clocks = 2;
    snap.clocks = clocks;
    snap.has_primary_trace_clock = true;
    snap.primary_trace_clock = CLOCK_ID_MONOTONIC;
    Packet *p = new_packet(w, s->start_ns);
    p->has_timestamp_clock_id = true;
    p->timestamp_clock_id = CLOCK_ID_MONOTONIC;
    p->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT;
    p->clock_snapshot = &snap;
    return put_packet(w, p);
}

/* The process's track, which clears the sequence's state. */
static int put_process_track(writer *w)
{
    const trace_snapshot *s = w->t->s;
    Perfetto__Protos__ProcessDescriptor proc =
        PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
    proc.has_pid = true;
    proc.pid = s->pid;
    proc.process_name = (char *)w->t->process_name;
    TrackDescriptor track = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
    track.has_uuid = true;
    track.uuid = track_uuid(w, TRACK_PROCESS, 0);
    track.process = &proc;
    Perfetto__Protos__TracePacketDefaults defaults =
        PERFETTO__PROTOS__TRACE_PACKET_DEFAULTS__INIT;
    defaults.has_timestamp_clock_id = true;
    defaults.timestamp_clock_id = CLOCK_ID_MONOTONIC;
    Packet *p = new_packet(w, s->start_ns);
    p->has_sequence_flags = true;
    p->sequence_flags = SEQ_CLEARED;
    p->trace_packet_defaults = &defaults;
    p->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
    p->track_descriptor = &track;
    return put_packet(w, p);
}

static int put_track(writer *w, TrackDescriptor *track)
{
    Packet *p = new_packet(w, w->t->s->start_ns);
    p->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
    p->track_descriptor = track;
    return put_packet(w, p);
}

static int put_thread_tracks(writer *w, const tl_lane *lane)
{
    Perfetto__Protos__ThreadDescriptor th =
        PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
    th.has_pid = th.has_tid = true;
    th.pid = w->t->s->pid;
    th.tid = lane->tid;
    th.thread_name = (char *)lane->name;
    TrackDescriptor track = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
    track.has_uuid = true;
    track.uuid = track_uuid(w, TRACK_THREAD, (uint64_t)lane->tid);
    track.thread = &th;
    int rc = put_track(w, &track);
    if (rc || !lane->has_labels)
        return rc;
    TrackDescriptor labels = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
    labels.has_uuid = labels.has_parent_uuid = true;
    labels.uuid = track_uuid(w, TRACK_LABELS, (uint64_t)lane->tid);
    labels.parent_uuid = track.uuid;
    labels.static_or_dynamic_name_case =
        PERFETTO__PROTOS__TRACK_DESCRIPTOR__STATIC_OR_DYNAMIC_NAME_NAME;
    labels.name = "labels";
    return put_track(w, &labels);
}

static int put_task_track(writer *w, const tl_lane *lane)
{
    TrackDescriptor track = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
    track.has_uuid = track.has_parent_uuid = true;
    track.uuid = track_uuid(w, TRACK_TASK, lane->number);
    track.parent_uuid = track_uuid(w, TRACK_PROCESS, 0);
    track.static_or_dynamic_name_case =
        PERFETTO__PROTOS__TRACK_DESCRIPTOR__STATIC_OR_DYNAMIC_NAME_NAME;
    track.name = (char *)lane->name;
    return put_track(w, &track);
}

static int put_tracks(writer *w)
{
    int rc = put_process_track(w);
    for (size_t i = 0; i < w->t->n_lanes && !rc; i++) {
        const tl_lane *lane = &w->t->lanes[i];
        rc = lane->task ? put_task_track(w, lane) : put_thread_tracks(w, lane);
    }
    return rc;
}

/* ---- Track events -------------------------------------------------------- */

/* A TrackEvent of the sequence at ts on `track`, named and categorized
 * (interned), without annotations yet. */
static int new_event(writer *w, int64_t ts, uint64_t track, int type,
                     const char *name, const char *cat)
{
    Packet *p = new_packet(w, ts);
    p->has_sequence_flags = true;
    p->sequence_flags = SEQ_NEEDS;
    p->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
    p->track_event = &w->ev;
    w->ev = (TrackEvent)PERFETTO__PROTOS__TRACK_EVENT__INIT;
    w->ev.has_type = w->ev.has_track_uuid = true;
    w->ev.type = type;
    w->ev.track_uuid = track;
    w->ev.debug_annotations = w->ann_p;
    w->interned = (InternedData)PERFETTO__PROTOS__INTERNED_DATA__INIT;
    w->interned.event_names = &w->name_entry_p;
    w->interned.event_categories = &w->cat_entry_p;
    w->interned.debug_annotation_names = w->annot_entries_p;
    w->interned.debug_annotation_string_values = &w->stack_entry_p;
    w->n_ann = w->n_dict = 0;
    if (!name)
        return 0;
    bool fresh;
    int rc = intern(&w->names, name, &w->ev.name_iid, &fresh);
    w->ev.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID;
    if (!rc && fresh) {
        w->name_entry = (EventName)PERFETTO__PROTOS__EVENT_NAME__INIT;
        w->name_entry.has_iid = true;
        w->name_entry.iid = w->ev.name_iid;
        w->name_entry.name = (char *)name;
        w->interned.n_event_names = 1;
    }
    if (!rc)
        rc = intern(&w->cats, cat, &w->cat_iid, &fresh);
    w->ev.n_category_iids = 1;
    w->ev.category_iids = &w->cat_iid;
    if (!rc && fresh) {
        w->cat_entry = (EventCategory)PERFETTO__PROTOS__EVENT_CATEGORY__INIT;
        w->cat_entry.has_iid = true;
        w->cat_entry.iid = w->cat_iid;
        w->cat_entry.name = (char *)cat;
        w->interned.n_event_categories = 1;
    }
    return rc;
}

/* A new top-level annotation named `name` (interned), its value unset;
 * NULL when out of memory. */
static Annotation *annotate(writer *w, const char *name)
{
    Annotation *a = &w->ann[w->n_ann];
    *a = (Annotation)PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT;
    bool fresh;
    if (intern(&w->annot_names, name, &a->name_iid, &fresh))
        return NULL;
    a->name_field_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME_IID;
    if (fresh) {
        size_t i = w->interned.n_debug_annotation_names++;
        AnnotationName *e = &w->annot_entries[i];
        *e = (AnnotationName)PERFETTO__PROTOS__DEBUG_ANNOTATION_NAME__INIT;
        e->has_iid = true;
        e->iid = a->name_iid;
        e->name = (char *)name;
    }
    w->ev.n_debug_annotations = ++w->n_ann;
    return a;
}

static void set_string(Annotation *a, const char *value)
{
    a->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE;
    a->string_value = (char *)value;
}

static int annotate_string(writer *w, const char *name, const char *value)
{
    Annotation *a = annotate(w, name);
    if (!a)
        return -ENOMEM;
    set_string(a, value);
    return 0;
}

/* "stack": the frames, one a line, interned by the stack's number. */
static int annotate_stack(writer *w, uint32_t stack)
{
    const tl_stack *st = timeline_stack(w->t, stack);
    Annotation *a = annotate(w, "stack");
    if (!a)
        return -ENOMEM;
    if (!st->n) {
        set_string(a, "");
        return 0;
    }
    a->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE_IID;
    a->string_value_iid = stack;
    if (!w->stack_sent[stack - 1]) {
        w->stack_sent[stack - 1] = true;
        w->stack_entry = (InternedString)PERFETTO__PROTOS__INTERNED_STRING__INIT;
        w->stack_entry.has_iid = w->stack_entry.has_str = true;
        w->stack_entry.iid = stack;
        w->stack_entry.str.data = (uint8_t *)st->joined;
        w->stack_entry.str.len = strlen(st->joined);
        w->interned.n_debug_annotation_string_values = 1;
    }
    return 0;
}

/* One annotation per label, named by its key. */
static int annotate_labels_flat(writer *w, const tl_set *set)
{
    int rc = 0;
    for (size_t i = 0; i < set->n && !rc; i++)
        rc = annotate_string(w, set->kv[2 * i], set->kv[2 * i + 1]);
    return rc;
}

/* The labels as one dictionary "labels" (beside annotations of cpprof's
 * names, which a label's key could take). */
static int annotate_labels_dict(writer *w, const tl_set *set)
{
    if (!set->n)
        return 0;
    Annotation *a = annotate(w, "labels");
    if (!a)
        return -ENOMEM;
    a->dict_entries = &w->dict_p[w->n_dict];
    for (size_t i = 0; i < set->n; i++) {
        Annotation *e = &w->dict[w->n_dict++];
        *e = (Annotation)PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT;
        e->name_field_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME;
        e->name = (char *)set->kv[2 * i];
        set_string(e, set->kv[2 * i + 1]);
    }
    a->n_dict_entries = set->n;
    return 0;
}

/* What the item says beyond its name and category, on its begin. */
static int annotate_item(writer *w, const tl_item *it)
{
    const timeline *t = w->t;
    switch (it->what) {
    case TL_LABELS: return annotate_labels_flat(w, timeline_set(t, it->set));
    case TL_LOG: return annotate_string(w, "message", it->text);
    case TL_CPU: {
        int rc = annotate_stack(w, it->stack);
        return rc ? rc : annotate_labels_dict(w, timeline_set(t, it->set));
    }
    case TL_LOCK: return annotate_stack(w, it->stack);
    case TL_TASK: {
        Annotation *tid = annotate(w, "tid");
        if (!tid)
            return -ENOMEM;
        tid->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_INT_VALUE;
        tid->int_value = it->tid;
        int rc = annotate_labels_dict(w, timeline_set(t, it->set));
        return rc || !it->text ? rc : annotate_string(w, "reason", it->text);
    }
    default: return 0;
    }
}

static uint64_t item_track(const writer *w, const tl_item *it)
{
    const tl_lane *lane = &w->t->lanes[it->lane];
    if (it->what == TL_TASK)
        return track_uuid(w, TRACK_TASK, lane->number);
    return track_uuid(w, it->what == TL_LABELS ? TRACK_LABELS : TRACK_THREAD,
                      (uint64_t)lane->tid);
}

/* A packet's InternedData, when it has new entries. */
static void attach_interned(writer *w)
{
    if (w->interned.n_event_names || w->interned.n_event_categories ||
        w->interned.n_debug_annotation_names ||
        w->interned.n_debug_annotation_string_values)
        w->pkt.interned_data = &w->interned;
}

/* ---- Edges: begins, ends and instants in time order ---------------------- */

typedef enum { END, BEGIN, INSTANT, END_EMPTY } edge_rank;

typedef struct {
    int64_t ts;
    edge_rank rank;
    size_t item;
} edge;

/* By time; at one time, ends, then begins (the longest first), instants,
 * then the ends of empty slices; ends of slices begun later first.  So
 * the slices of one track stay nested, even those of one instant. */
static int compare_edges(const void *pa, const void *pb, void *arg)
{
    const edge *a = pa, *b = pb;
    const tl_item *items = arg, *ia = &items[a->item], *ib = &items[b->item];
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->rank == BEGIN && ia->dur != ib->dur)
        return ia->dur > ib->dur ? -1 : 1;
    if (a->rank != BEGIN && a->rank != INSTANT && ia->ts != ib->ts)
        return ia->ts > ib->ts ? -1 : 1;
    if (a->item == b->item)
        return 0;
    bool later = a->item > b->item;
    return (a->rank == BEGIN || a->rank == INSTANT) == later ? 1 : -1;
}

static int sorted_edges(const timeline *t, edge **out, size_t *n)
{
    *n = 0;
    edge *e = malloc((2 * t->n_items + 1) * sizeof *e);
    if (!e)
        return -ENOMEM;
    for (size_t i = 0; i < t->n_items; i++) {
        const tl_item *it = &t->items[i];
        if (it->dur == TL_INSTANT) {
            e[(*n)++] = (edge){it->ts, INSTANT, i};
            continue;
        }
        e[(*n)++] = (edge){it->ts, BEGIN, i};
        e[(*n)++] = (edge){it->ts + it->dur, it->dur ? END : END_EMPTY, i};
    }
    qsort_r(e, *n, sizeof *e, compare_edges, (void *)t->items);
    *out = e;
    return 0;
}

static int put_edge(writer *w, const edge *e)
{
    const tl_item *it = &w->t->items[e->item];
    uint64_t track = item_track(w, it);
    int rc;
    if (e->rank == END || e->rank == END_EMPTY) {
        rc = new_event(w, e->ts, track,
                       PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END,
                       NULL, NULL);
    } else {
        rc = new_event(w, e->ts, track,
                       e->rank == BEGIN
                           ? PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN
                           : PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT,
                       it->name, it->cat);
        if (!rc)
            rc = annotate_item(w, it);
    }
    if (rc)
        return rc;
    attach_interned(w);
    return put_packet(w, &w->pkt);
}

/* The instant that reports the recording itself. */
static int put_recording(writer *w)
{
    const trace_snapshot *s = w->t->s;
    int rc = new_event(w, s->start_ns, track_uuid(w, TRACK_PROCESS, 0),
                       PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT,
                       "cpprof", "cpprof");
    Annotation *dropped = rc ? NULL : annotate(w, "dropped");
    Annotation *cpu = dropped ? annotate(w, "cpu_samples") : NULL;
    Annotation *flight = cpu ? annotate(w, "flight") : NULL;
    if (!flight)
        return -ENOMEM;
    dropped->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_INT_VALUE;
    dropped->int_value = s->dropped;
    cpu->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_BOOL_VALUE;
    cpu->bool_value = s->cpu_samples;
    flight->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_BOOL_VALUE;
    flight->bool_value = s->flight;
    attach_interned(w);
    return put_packet(w, &w->pkt);
}

static int put_items(writer *w)
{
    edge *edges = NULL;
    size_t n;
    int rc = sorted_edges(w->t, &edges, &n);
    for (size_t i = 0; i < n && !rc; i++)
        rc = put_edge(w, &edges[i]);
    free(edges);
    return rc;
}

/* ---- Entry --------------------------------------------------------------- */

/* Room for the annotations of the packet that has the most; the output
 * to `sink`. */
static int writer_init(writer *w, const timeline *t, const timeline_sink *sink)
{
    *w = (writer){.t = t, .seq = t->s->pid > 0 ? (uint32_t)t->s->pid : 1};
    int rc = tl_out_open(&w->out, sink);
    if (rc)
        return rc;
    size_t most = 0;
    for (size_t i = 0; i < t->s->n_sets; i++)
        if (timeline_set(t, (uint32_t)i)->n > most)
            most = timeline_set(t, (uint32_t)i)->n;
    w->max_ann = most + 4;
    w->ann = calloc(w->max_ann, sizeof *w->ann);
    w->ann_p = calloc(w->max_ann, sizeof *w->ann_p);
    w->dict = calloc(most + 1, sizeof *w->dict);
    w->dict_p = calloc(most + 1, sizeof *w->dict_p);
    w->annot_entries = calloc(w->max_ann, sizeof *w->annot_entries);
    w->annot_entries_p = calloc(w->max_ann, sizeof *w->annot_entries_p);
    w->stack_sent = calloc(t->s->n_stacks + 1, sizeof *w->stack_sent);
    if (!w->ann || !w->ann_p || !w->dict || !w->dict_p ||
        !w->annot_entries || !w->annot_entries_p || !w->stack_sent)
        return -ENOMEM;
    for (size_t i = 0; i < w->max_ann; i++) {
        w->ann_p[i] = &w->ann[i];
        w->annot_entries_p[i] = &w->annot_entries[i];
    }
    for (size_t i = 0; i <= most; i++)
        w->dict_p[i] = &w->dict[i];
    w->name_entry_p = &w->name_entry;
    w->cat_entry_p = &w->cat_entry;
    w->stack_entry_p = &w->stack_entry;
    return 0;
}

static void writer_free(writer *w)
{
    free(w->ann);
    free(w->ann_p);
    free(w->dict);
    free(w->dict_p);
    free(w->annot_entries);
    free(w->annot_entries_p);
    free(w->stack_sent);
    free(w->buf);
    strtab_free(&w->names);
    strtab_free(&w->cats);
    strtab_free(&w->annot_names);
}

int timeline_perfetto(const trace_snapshot *s, const timeline_frames *stacks,
                      const timeline_sink *out)
{
    if (!out || !out->write)
        return -EINVAL;
    timeline t;
    int rc = timeline_build(&t, s, stacks);
    if (rc)
        return rc;
    writer w;
    rc = writer_init(&w, &t, out);
    if (!rc)
        rc = put_clock_snapshot(&w);
    if (!rc)
        rc = put_tracks(&w);
    if (!rc)
        rc = put_recording(&w);
    if (!rc)
        rc = put_items(&w);
    int closed = tl_out_close(&w.out);
    writer_free(&w);
    timeline_free(&t);
    return rc ? rc : closed;
}
