/*
 * timeline_model.c -- a trace snapshot resolved into what both encoders
 * write (timeline_model.h): one lane per thread and per task, label spans,
 * regions and task runs paired from their events, thread by thread, and
 * every text escaped once, into a pool freed in one go.
 *
 * Pairing keeps the items of a thread nested, as Perfetto's slices must
 * be: a region's end closes the innermost open region of its name and
 * every region opened inside it; an end with no begin (the region began
 * before the window) closes them all and becomes a region from the
 * window's start.  A thread's exit, and the window's end, close what the
 * thread still had open.
 */
#include "timeline_model.h"
#include "labels.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#define POOL_BLOCK 65536
#define NONE SIZE_MAX

/* ---- Texts --------------------------------------------------------------- */

/* n bytes from the pool, aligned for a pointer; NULL when out of memory. */
static void *pool_alloc(tl_pool *p, size_t n)
{
    n = (n + sizeof(void *) - 1) & ~(sizeof(void *) - 1);
    if (n > p->left) {
        size_t size = n > POOL_BLOCK ? n : POOL_BLOCK;
        char *block = NULL;
        if (ARRAY_RESERVE(p->blocks, p->n, p->cap, 1) ||
            !(block = malloc(size)))
            return NULL;
        p->blocks[p->n++] = block;
        p->at = block;
        p->left = size;
    }
    char *r = p->at;
    p->at += n;
    p->left -= n;
    return r;
}

/* s (NULL: "") escaped as bare text (labels.h), or NULL. */
static const char *text(timeline *t, const char *s)
{
    if (!s)
        s = "";
    size_t need = text_escape(NULL, 0, 0, s, false);
    char *r = pool_alloc(&t->pool, need + 1);
    if (r)
        text_escape(r, need + 1, 0, s, false);
    return r;
}

/* A text made from a format whose %s arguments are escaped already. */
static const char *textf(timeline *t, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int need = vsnprintf(NULL, 0, fmt, ap);
    char *r = need < 0 ? NULL : pool_alloc(&t->pool, (size_t)need + 1);
    if (r)
        vsnprintf(r, (size_t)need + 1, fmt, ap2);
    va_end(ap2);
    va_end(ap);
    return r;
}

/* parts[0..n) joined, the separator before parts[i] being
 * seps[(i - 1) % strlen(seps)]: "=," joins key=value,key=value. */
static const char *join(timeline *t, const char *const *parts, size_t n,
                        const char *seps)
{
    size_t len = 1, nseps = strlen(seps);
    for (size_t i = 0; i < n; i++)
        len += strlen(parts[i]) + 1;
    char *r = pool_alloc(&t->pool, len), *at = r;
    if (!r)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (i)
            *at++ = seps[(i - 1) % nseps];
        size_t l = strlen(parts[i]);
        memcpy(at, parts[i], l);
        at += l;
    }
    *at = '\0';
    return r;
}

static int build_set(timeline *t, tl_set *out, const trace_labels *set)
{
    size_t n = set->n;
    const char **kv = pool_alloc(&t->pool, 2 * n * sizeof *kv + 1);
    if (!kv)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        kv[2 * i] = text(t, set->kv[2 * i]);
        kv[2 * i + 1] = text(t, set->kv[2 * i + 1]);
        if (!kv[2 * i] || !kv[2 * i + 1])
            return -ENOMEM;
    }
    *out = (tl_set){join(t, kv, 2 * n, "=,"), n, kv};
    return out->text ? 0 : -ENOMEM;
}

/* The caller's names of stack i's frames, or its PCs in hex. */
static int build_stack(timeline *t, tl_stack *out, const trace_stack *st,
                       const timeline_frames *names)
{
    size_t n = names ? (names->frames ? names->n : 0)
                     : (st->pcs ? st->depth : 0);
    const char **f = pool_alloc(&t->pool, n * sizeof *f + 1);
    if (!f)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        f[i] = names ? text(t, names->frames[i])
                     : textf(t, "%#" PRIxPTR, st->pcs[i]);
        if (!f[i])
            return -ENOMEM;
    }
    *out = (tl_stack){f, n, join(t, f, n, "\n")};
    return out->joined ? 0 : -ENOMEM;
}

static int build_texts(timeline *t, const timeline_frames *stacks)
{
    const trace_snapshot *s = t->s;
    char name[sizeof s->process_name + 1] = {0};
    memcpy(name, s->process_name, sizeof s->process_name);
    t->process_name = text(t, name);
    t->sets = calloc(s->n_sets + 1, sizeof *t->sets);
    t->stacks = calloc(s->n_stacks + 1, sizeof *t->stacks);
    if (!t->process_name || !t->sets || !t->stacks)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < s->n_sets && !rc; i++)
        rc = build_set(t, &t->sets[i], &s->sets[i]);
    for (size_t i = 0; i < s->n_stacks && !rc; i++)
        rc = build_stack(t, &t->stacks[i], &s->stacks[i],
                         stacks ? &stacks[i] : NULL);
    return rc;
}

const tl_set *timeline_set(const timeline *t, uint32_t set)
{
    static const tl_set empty = {"", 0, NULL};
    return set < t->s->n_sets ? &t->sets[set] : &empty;
}

const tl_stack *timeline_stack(const timeline *t, uint32_t stack)
{
    static const tl_stack empty = {NULL, 0, ""};
    return stack && stack <= t->s->n_stacks ? &t->stacks[stack - 1] : &empty;
}

/* ---- Lanes ----------------------------------------------------------------- */

/* What a lane has open while the events are read. */
typedef struct {
    size_t labels, task; /* items, or NONE */
    size_t *regions;     /* items, innermost last */
    size_t n_regions, cap_regions;
} open_items;

typedef struct {
    timeline *t;
    open_items *open; /* per lane */
    size_t cap_open;
} build;

static bool same_lane(const void *ctx, size_t item, const void *key)
{
    const tl_lane *l = &((const timeline *)ctx)->lanes[item];
    const tl_lane *k = key;
    return l->task == k->task &&
           (l->task ? l->number == k->number : l->tid == k->tid);
}

/* The lane of a thread or a task (key->task says which; key->tid or
 * key->number which one), made as *key on first sight; *at is its index,
 * *made whether it is new. */
static int lane_of(build *b, const tl_lane *key, size_t *at, bool *made)
{
    timeline *t = b->t;
    struct hashindex *x = key->task ? &t->by_task : &t->by_tid;
    uint64_t hash = hash_mix(key->task, key->task ? key->number
                                                  : (uint64_t)key->tid);
    struct hashindex_slot *slot = hashindex_find(x, hash, same_lane, t, key);
    if (!slot)
        return -ENOMEM;
    *made = !slot->item;
    if (!*made) {
        *at = slot->item - 1;
        return 0;
    }
    if (ARRAY_RESERVE(t->lanes, t->n_lanes, t->cap_lanes, 1) ||
        ARRAY_RESERVE(b->open, t->n_lanes, b->cap_open, 1))
        return -ENOMEM;
    *at = t->n_lanes++;
    t->lanes[*at] = *key;
    b->open[*at] = (open_items){.labels = NONE, .task = NONE};
    hashindex_set(x, slot, hash, *at);
    return 0;
}

/* A thread's lane, named `name` when new. */
static int thread_lane(build *b, pid_t tid, const char *name, size_t *at)
{
    bool made;
    return lane_of(b, &(tl_lane){.tid = tid, .name = name}, at, &made);
}

/* A task's lane, with the labels `set` when new. */
static int task_lane(build *b, uint64_t number, uint32_t set, size_t *at)
{
    bool made;
    int rc = lane_of(b, &(tl_lane){.task = true, .number = number, .set = set},
                     at, &made);
    if (rc || !made)
        return rc;
    timeline *t = b->t;
    tl_lane *l = &t->lanes[*at];
    const tl_set *labels = timeline_set(t, set);
    l->span = textf(t, "task %" PRIu64, number);
    l->name = l->span && *labels->text
                  ? textf(t, "%s %s", l->span, labels->text)
                  : l->span;
    return l->name ? 0 : -ENOMEM;
}

/* Every thread and task of the snapshot's tables, in their order. */
static int known_lanes(build *b)
{
    const trace_snapshot *s = b->t->s;
    size_t at;
    int rc = 0;
    for (size_t i = 0; i < s->n_threads && !rc; i++) {
        const trace_thread *th = &s->threads[i];
        char raw[sizeof th->name + 1] = {0};
        memcpy(raw, th->name, sizeof th->name);
        const char *name = text(b->t, raw);
        if (name && th->own)
            name = textf(b->t, "%s (cpprof)", name);
        rc = name ? thread_lane(b, th->tid, name, &at) : -ENOMEM;
    }
    for (size_t i = 0; i < s->n_tasks && !rc; i++)
        rc = task_lane(b, s->tasks[i].number, s->tasks[i].labels, &at);
    return rc;
}

/* ---- Items ------------------------------------------------------------------ */

static int add_item(build *b, const tl_item *it, size_t *at)
{
    timeline *t = b->t;
    if (ARRAY_RESERVE(t->items, t->n_items, t->cap_items, 1))
        return -ENOMEM;
    if (at)
        *at = t->n_items;
    t->items[t->n_items++] = *it;
    return 0;
}

static void close_item(timeline *t, size_t *item, int64_t ts)
{
    if (*item == NONE)
        return;
    tl_item *it = &t->items[*item];
    it->dur = ts > it->ts ? ts - it->ts : 0;
    *item = NONE;
}

/* Closes the lane's regions from the n-th open one on. */
static void close_regions(build *b, open_items *o, size_t n, int64_t ts)
{
    while (o->n_regions > n)
        close_item(b->t, &o->regions[--o->n_regions], ts);
}

static void close_lane(build *b, size_t lane, int64_t ts)
{
    open_items *o = &b->open[lane];
    close_item(b->t, &o->labels, ts);
    close_item(b->t, &o->task, ts);
    close_regions(b, o, 0, ts);
}

/* When a slice that began before the window and ended at ts starts. */
static int64_t window_start(const build *b, int64_t ts)
{
    return ts < b->t->s->start_ns ? ts : b->t->s->start_ns;
}

/* An item of event e on the thread's lane. */
static tl_item item_of(const trace_event *e, size_t lane, tl_what what,
                       const char *name, const char *cat)
{
    return (tl_item){.ts = e->ts, .dur = TL_INSTANT, .lane = lane,
                     .what = what, .tid = e->tid, .name = name, .cat = cat};
}

static int on_labels(build *b, size_t lane, const trace_event *e)
{
    open_items *o = &b->open[lane];
    close_item(b->t, &o->labels, e->ts);
    const tl_set *set = timeline_set(b->t, e->labels);
    if (!set->n)
        return 0;
    b->t->lanes[lane].has_labels = true;
    tl_item it = item_of(e, lane, TL_LABELS, set->text, "labels");
    it.dur = 0;
    it.set = e->labels;
    return add_item(b, &it, &o->labels);
}

static int on_region_begin(build *b, size_t lane, const trace_event *e)
{
    open_items *o = &b->open[lane];
    tl_item it = item_of(e, lane, TL_REGION, text(b->t, e->text), "region");
    it.dur = 0;
    if (!it.name ||
        ARRAY_RESERVE(o->regions, o->n_regions, o->cap_regions, 1))
        return -ENOMEM;
    return add_item(b, &it, &o->regions[o->n_regions++]);
}

static int on_region_end(build *b, size_t lane, const trace_event *e)
{
    open_items *o = &b->open[lane];
    const char *name = text(b->t, e->text);
    if (!name)
        return -ENOMEM;
    for (size_t i = o->n_regions; i-- > 0;) {
        if (strcmp(b->t->items[o->regions[i]].name, name) == 0) {
            close_regions(b, o, i, e->ts);
            return 0;
        }
    }
    close_regions(b, o, 0, e->ts);
    tl_item it = item_of(e, lane, TL_REGION, name, "region");
    it.ts = window_start(b, e->ts);
    it.dur = e->ts - it.ts;
    return add_item(b, &it, NULL);
}

static int on_log(build *b, size_t lane, const trace_event *e)
{
    tl_item it = item_of(e, lane, TL_LOG, text(b->t, e->text), "log");
    it.text = text(b->t, e->text2);
    return it.name && it.text ? add_item(b, &it, NULL) : -ENOMEM;
}

static int on_cpu_sample(build *b, size_t lane, const trace_event *e)
{
    tl_item it = item_of(e, lane, TL_CPU, "cpu", "cpu");
    it.set = e->labels;
    it.stack = e->stack;
    return add_item(b, &it, NULL);
}

static int on_lock_wait(build *b, size_t lane, const trace_event *e)
{
    tl_item it = item_of(e, lane, TL_LOCK, "lock wait",
                         e->text ? text(b->t, e->text) : "lock");
    int64_t wait = e->dur_ns > 0 ? e->dur_ns : 0;
    it.ts = e->ts - wait;
    if (it.ts < b->t->s->start_ns)
        it.ts = window_start(b, e->ts);
    it.dur = e->ts - it.ts;
    it.stack = e->stack;
    return it.cat ? add_item(b, &it, NULL) : -ENOMEM;
}

static int on_thread(build *b, size_t lane, const trace_event *e)
{
    bool exit = e->kind == TRACE_THREAD_EXIT;
    if (exit)
        close_lane(b, lane, e->ts);
    tl_item it = item_of(e, lane, TL_THREAD,
                         exit ? "thread exit" : "thread start", "thread");
    return add_item(b, &it, NULL);
}

/* The item of a run of the task of e on its lane, from ts. */
static int task_run(build *b, const trace_event *e, int64_t ts, size_t *at)
{
    size_t lane;
    int rc = task_lane(b, e->task, 0, &lane);
    if (rc)
        return rc;
    const tl_lane *l = &b->t->lanes[lane];
    tl_item it = item_of(e, lane, TL_TASK, l->span, "task");
    it.ts = ts;
    it.dur = e->ts - ts;
    it.set = l->set;
    return add_item(b, &it, at);
}

static int on_task_enter(build *b, size_t lane, const trace_event *e)
{
    close_item(b->t, &b->open[lane].task, e->ts);
    if (!e->task)
        return 0;
    size_t at;
    int rc = task_run(b, e, e->ts, &at);
    b->open[lane].task = at; /* b->open may have moved */
    return rc;
}

static int on_task_leave(build *b, size_t lane, const trace_event *e)
{
    open_items *o = &b->open[lane];
    const char *reason = e->text ? text(b->t, e->text) : "ended";
    if (!reason)
        return -ENOMEM;
    size_t at = o->task;
    if (at != NONE && b->t->lanes[b->t->items[at].lane].number == e->task) {
        close_item(b->t, &o->task, e->ts);
        b->t->items[at].text = reason;
        return 0;
    }
    close_item(b->t, &o->task, e->ts);
    if (!e->task)
        return 0;
    int rc = task_run(b, e, window_start(b, e->ts), &at);
    if (!rc)
        b->t->items[at].text = reason;
    return rc;
}

static int on_event(build *b, const trace_event *e)
{
    size_t lane;
    int rc = thread_lane(b, e->tid, "", &lane);
    if (rc)
        return rc;
    switch (e->kind) {
    case TRACE_LABELS: return on_labels(b, lane, e);
    case TRACE_REGION_BEGIN: return on_region_begin(b, lane, e);
    case TRACE_REGION_END: return on_region_end(b, lane, e);
    case TRACE_LOG: return on_log(b, lane, e);
    case TRACE_CPU_SAMPLE: return on_cpu_sample(b, lane, e);
    case TRACE_LOCK_WAIT: return on_lock_wait(b, lane, e);
    case TRACE_THREAD_START:
    case TRACE_THREAD_EXIT: return on_thread(b, lane, e);
    case TRACE_TASK_ENTER: return on_task_enter(b, lane, e);
    case TRACE_TASK_LEAVE: return on_task_leave(b, lane, e);
    default: return 0; /* a kind newer than this encoder */
    }
}

/* ---- The model ------------------------------------------------------------- */

static bool snapshot_ok(const trace_snapshot *s)
{
    return s && (s->events || !s->n_events) &&
           (s->threads || !s->n_threads) && (s->tasks || !s->n_tasks) &&
           (s->sets || !s->n_sets) && (s->stacks || !s->n_stacks);
}

int timeline_build(timeline *t, const trace_snapshot *s,
                   const timeline_frames *stacks)
{
    *t = (timeline){.s = s};
    if (!snapshot_ok(s))
        return -EINVAL;
    build b = {.t = t};
    int rc = build_texts(t, stacks);
    if (!rc)
        rc = known_lanes(&b);
    for (size_t i = 0; i < s->n_events && !rc; i++)
        rc = on_event(&b, &s->events[i]);
    for (size_t lane = 0; lane < t->n_lanes; lane++) {
        if (!rc)
            close_lane(&b, lane, s->end_ns);
        free(b.open[lane].regions);
    }
    free(b.open);
    if (rc)
        timeline_free(t);
    return rc;
}

void timeline_free(timeline *t)
{
    for (size_t i = 0; i < t->pool.n; i++)
        free(t->pool.blocks[i]);
    free(t->pool.blocks);
    free(t->lanes);
    free(t->items);
    free(t->sets);
    free(t->stacks);
    hashindex_free(&t->by_tid);
    hashindex_free(&t->by_task);
    *t = (timeline){.s = t->s};
}

/* ---- Output ------------------------------------------------------------- */

int tl_out_open(tl_out *o, const timeline_sink *sink)
{
    *o = (tl_out){.sink = sink};
    if (!sink || !sink->write)
        return o->rc = -EINVAL;
    if (!(o->buf = malloc(TL_OUT_BYTES)))
        return o->rc = -ENOMEM;
    return 0;
}

/* Hands the gathered bytes to the sink. */
static int flush(tl_out *o)
{
    if (!o->rc && o->len)
        o->rc = o->sink->write(o->sink->arg, o->buf, o->len);
    o->len = 0;
    return o->rc;
}

int tl_out_put(tl_out *o, const void *data, size_t len)
{
    const char *p = data;
    while (!o->rc && len) {
        size_t n = TL_OUT_BYTES - o->len < len ? TL_OUT_BYTES - o->len : len;
        memcpy(o->buf + o->len, p, n);
        o->len += n, p += n, len -= n;
        if (o->len == TL_OUT_BYTES)
            flush(o);
    }
    return o->rc;
}

int tl_out_close(tl_out *o)
{
    int rc = o->buf ? flush(o) : o->rc;
    free(o->buf);
    o->buf = NULL;
    return rc;
}
