/*
 * trace_snapshot.c -- a trace snapshot: the recorder's chunks (trace_int.h)
 * copied and resolved into plain data (trace.h) for the encoders.
 *
 * Each chunk in use is copied under its sequence number and kept only when
 * the number did not move (a writer reusing it meanwhile), so a snapshot
 * never waits for a writer nor holds one up.  Its records are then read
 * with every bound checked (a writer racing a restart may leave a record
 * cut short): times made nanoseconds, label sets numbered (by their
 * serial: the chunks' copies of one set are one) and copied, stacks and
 * texts kept once.  A thread's set from before the window opens the
 * window; the threads listed are every live one (from /proc) and every
 * one with an event; tasks are those entered or left.
 */
#define _GNU_SOURCE
#include "trace_int.h"
#include "labels.h"
#include "procfile.h"
#include "proctasks.h"
#include "thread.h"
#include "util.h"
#include "upper_calls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What a snapshot is built from: the copied records, then the tables. */
struct reading {
    trace_snapshot *s;
    int64_t from, to;
    double ns_per_tick; /* from the anchor to now */
    size_t cap_events, cap_threads, cap_tasks, cap_sets, cap_serials;
    size_t cap_stacks, cap_kept, cap_before;
    uint64_t *serials; /* of each of s->sets */
    struct hashindex set_index, stack_index;
    /* Each thread's latest set before the window, drawn from its start. */
    struct before {
        pid_t tid;
        int64_t ts;
        struct rec rec;       /* a label switch has no payload: the whole */
        struct rec *set_copy; /* the REC_SET it names, copied, or NULL */
    } *before;
    size_t n_before;
};

static bool same_set(const void *ctx, size_t item, const void *key)
{
    const struct reading *r = ctx;
    return r->serials[item] == *(const uint64_t *)key;
}

/* The REC_SET that `rec`, at offset `at` of a chunk's copy `data`, names;
 * NULL for the empty set (or a copy cut short). */
static const struct rec *set_of(const uint8_t *data, size_t at,
                                const struct rec *rec)
{
    if (!rec->set_at)
        return NULL;
    size_t d = rec->set_at - 1;
    if (d % 8 || d + sizeof *rec > at)
        return NULL;
    const struct rec *def = (const void *)(data + d);
    if (def->kind != REC_SET || def->bytes < sizeof *def ||
        d + def->bytes > at)
        return NULL;
    return def;
}

/* A REC_SET's labels copied into the snapshot's storage as s->sets[n]
 * (as many pairs as its payload holds whole). */
static int copy_set(struct reading *r, const struct rec *def)
{
    const char *text = (const char *)(def + 1);
    size_t len = def->bytes - sizeof *def, strings = 0, at = 0;
    while (strings < 2 * (size_t)def->pairs && at < len) {
        size_t n = strnlen(text + at, len - at);
        if (n == len - at)
            break; /* cut short */
        at += n + 1;
        strings++;
    }
    size_t pairs = strings / 2;
    const char **kv = malloc(2 * pairs * sizeof *kv + len);
    trace_snapshot *s = r->s;
    if (!kv || ARRAY_RESERVE(s->storage, s->n_storage, r->cap_kept, 1)) {
        free(kv);
        return -ENOMEM;
    }
    s->storage[s->n_storage++] = kv;
    char *copy = memcpy(&kv[2 * pairs], text, len);
    for (size_t i = 0, off = 0; i < 2 * pairs; i++) {
        kv[i] = copy + off;
        off += strlen(copy + off) + 1;
    }
    s->sets[s->n_sets] = (trace_labels){pairs, kv};
    return 0;
}

/* The snapshot's index of the set REC_SET `def` copied (0: none), its
 * labels copied when new. */
static int set_number(struct reading *r, const struct rec *def,
                      uint32_t *out)
{
    *out = 0;
    if (!def)
        return 0;
    uint64_t hash = hash_mix(0, def->a);
    struct hashindex_slot *slot =
        hashindex_find(&r->set_index, hash, same_set, r, &def->a);
    if (!slot)
        return -ENOMEM;
    if (!slot->item) {
        trace_snapshot *s = r->s;
        int rc = ARRAY_RESERVE(s->sets, s->n_sets, r->cap_sets, 1) ||
                         ARRAY_RESERVE(r->serials, s->n_sets,
                                       r->cap_serials, 1)
                     ? -ENOMEM
                     : copy_set(r, def);
        if (rc)
            return rc;
        r->serials[s->n_sets] = def->a;
        hashindex_set(&r->set_index, slot, hash, s->n_sets++);
    }
    *out = (uint32_t)(slot->item - 1);
    return 0;
}

struct stack_key {
    const uintptr_t *pcs;
    unsigned depth;
    bool leaf_exact;
};

static bool same_stack(const void *ctx, size_t item, const void *key)
{
    const struct reading *r = ctx;
    const struct stack_key *k = key;
    const trace_stack *st = &r->s->stacks[item];
    return st->depth == k->depth && st->leaf_exact == k->leaf_exact &&
           memcmp(st->pcs, k->pcs, k->depth * sizeof *k->pcs) == 0;
}

/* The snapshot's number + 1 of the stack (0: none), kept when new. */
static int stack_number(struct reading *r, const uintptr_t *pcs,
                        unsigned depth, bool leaf_exact, uint32_t *out)
{
    *out = 0;
    if (!depth)
        return 0;
    uint64_t hash = hash_mix(leaf_exact, depth);
    for (unsigned i = 0; i < depth; i++)
        hash = hash_mix(hash, pcs[i]);
    struct stack_key key = {pcs, depth, leaf_exact};
    struct hashindex_slot *slot =
        hashindex_find(&r->stack_index, hash, same_stack, r, &key);
    if (!slot)
        return -ENOMEM;
    if (!slot->item) {
        trace_snapshot *s = r->s;
        uintptr_t *copy = malloc(depth * sizeof *copy);
        if (!copy || ARRAY_RESERVE(s->stacks, s->n_stacks, r->cap_stacks, 1)) {
            free(copy);
            return -ENOMEM;
        }
        memcpy(copy, pcs, depth * sizeof *copy);
        s->stacks[s->n_stacks] = (trace_stack){copy, depth, leaf_exact};
        hashindex_set(&r->stack_index, slot, hash, s->n_stacks++);
    }
    *out = (uint32_t)slot->item;
    return 0;
}

/* A copy of chunk c's records, or 0 bytes when it was being reused. */
static size_t copy_chunk(struct chunk *c, uint8_t *to)
{
    uint32_t seq = atomic_load_explicit(&c->h.seq, memory_order_acquire);
    if (seq & 1)
        return 0;
    uint32_t used = atomic_load_explicit(&c->h.used, memory_order_acquire);
    if (used > sizeof c->data)
        return 0;
    memcpy(to, c->data, used);
    /* A read-modify-write that releases: the copy's loads stay before the
     * second read (a plain load could pass them, and ThreadSanitizer
     * knows no fence). */
    return atomic_fetch_add_explicit(&c->h.seq, 0, memory_order_acq_rel) ==
                   seq
               ? used
               : 0;
}

/* The texts of a record's payload, NUL-terminated within it. */
static const char *payload_text(const struct rec *r, size_t skip)
{
    const char *p = (const char *)(r + 1);
    const char *end = (const char *)r + r->bytes;
    for (; skip && p < end; skip--)
        p += strnlen(p, (size_t)(end - p)) + 1;
    if (p >= end || !memchr(p, '\0', (size_t)(end - p)))
        return NULL;
    return p;
}

/* Adds record rec, of labels `set` (its REC_SET, or NULL), at ts. */
static int add_event(struct reading *r, const struct rec *rec,
                     const struct rec *set, int64_t ts)
{
    trace_snapshot *s = r->s;
    int rc = ARRAY_RESERVE(s->events, s->n_events, r->cap_events, 1);
    if (rc)
        return rc;
    trace_event *e = &s->events[s->n_events];
    *e = (trace_event){.ts = ts, .kind = rec->kind, .tid = rec->tid};
    if ((rc = set_number(r, set, &e->labels)))
        return rc;
    const uintptr_t *pcs = (const uintptr_t *)(const void *)(rec + 1);
    unsigned depth = (unsigned)((rec->bytes - sizeof *rec) / sizeof *pcs);
    switch (rec->kind) {
    case TRACE_LABELS:
    case TRACE_TASK_ENTER:
        e->task = rec->a;
        break;
    case TRACE_TASK_LEAVE:
        e->task = rec->a;
        e->text = payload_text(rec, 0);
        break;
    case TRACE_CPU_SAMPLE:
        rc = stack_number(r, pcs, depth, rec->a & 1, &e->stack);
        break;
    case TRACE_LOCK_WAIT:
        e->dur_ns = (int64_t)(rec->a >> 1);
        e->text = rec->a & 1 ? "mutex" : "block";
        rc = stack_number(r, pcs, depth, false, &e->stack);
        break;
    case TRACE_LOG:
        e->text = payload_text(rec, 0);
        e->text2 = payload_text(rec, 1);
        break;
    default:
        e->text = payload_text(rec, 0);
        break;
    }
    s->n_events++;
    return rc;
}

/* A record's time in CLOCK_MONOTONIC ns. */
static int64_t to_ns(const struct reading *r, int64_t ticks)
{
    return trace_anchor_ns + (int64_t)((double)(ticks - trace_anchor_ticks) *
                                 r->ns_per_tick);
}

/* b becomes rec, of labels `set` (its REC_SET, or NULL), copied: the
 * chunk's copy is reused for the next chunk. */
static int keep_before(struct before *b, const struct rec *rec,
                       const struct rec *set)
{
    struct rec *copy = NULL;
    if (set && !(copy = realloc(b->set_copy, set->bytes)))
        return -ENOMEM;
    if (set)
        memcpy(copy, set, set->bytes);
    else
        free(b->set_copy);
    *b = (struct before){rec->tid, rec->ts, *rec, copy};
    return 0;
}

/* Notes rec, a label switch before the window of labels `set`, when it is
 * its thread's latest yet. */
static int note_before(struct reading *r, const struct rec *rec,
                       const struct rec *set)
{
    for (size_t i = 0; i < r->n_before; i++) {
        struct before *b = &r->before[i];
        if (b->tid == rec->tid)
            return rec->ts >= b->ts ? keep_before(b, rec, set) : 0;
    }
    if (ARRAY_RESERVE(r->before, r->n_before, r->cap_before, 1))
        return -ENOMEM;
    r->before[r->n_before] = (struct before){0};
    int rc = keep_before(&r->before[r->n_before], rec, set);
    if (rc == 0)
        r->n_before++;
    return rc;
}

/* Parses one chunk's copy; a record that does not fit ends it (a writer
 * racing a restart may have left one). */
static int read_records(struct reading *r, const uint8_t *data, size_t used)
{
    for (size_t at = 0; at + sizeof(struct rec) <= used;) {
        const struct rec *rec = (const void *)(data + at);
        if (rec->bytes < sizeof *rec || rec->bytes % 8 ||
            at + rec->bytes > used || rec->kind > REC_SET)
            return 0;
        const struct rec *set = set_of(data, at, rec);
        at += rec->bytes;
        if (rec->kind == REC_SET) /* read through the records naming it */
            continue;
        int64_t ts = to_ns(r, rec->ts);
        int rc = 0;
        if (ts < r->from && rec->kind == TRACE_LABELS)
            rc = note_before(r, rec, set); /* by ticks: the same order */
        else if (ts >= r->from && ts <= r->to)
            rc = add_event(r, rec, set, ts);
        if (rc)
            return rc;
    }
    return 0;
}

/* The window opens with each thread's set from before it. */
static int add_befores(struct reading *r)
{
    for (size_t i = 0; i < r->n_before; i++) {
        int rc = add_event(r, &r->before[i].rec, r->before[i].set_copy,
                           r->from);
        if (rc)
            return rc;
    }
    return 0;
}

static void free_befores(struct reading *r)
{
    for (size_t i = 0; i < r->n_before; i++)
        free(r->before[i].set_copy);
    free(r->before);
}

static int by_time(const void *a, const void *b)
{
    const trace_event *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    /* Two events of one thread in one nanosecond are not told apart. */
    return (x->tid > y->tid) - (x->tid < y->tid);
}

static trace_thread *thread_of(struct reading *r, pid_t tid)
{
    trace_snapshot *s = r->s;
    for (size_t i = 0; i < s->n_threads; i++)
        if (s->threads[i].tid == tid)
            return &s->threads[i];
    if (ARRAY_RESERVE(s->threads, s->n_threads, r->cap_threads, 1))
        return NULL;
    trace_thread *t = &s->threads[s->n_threads++];
    *t = (trace_thread){.tid = tid};
    return t;
}

static void name_from_proc(int dirfd, trace_thread *t)
{
    char path[32], name[64];
    snprintf(path, sizeof path, "%d/comm", (int)t->tid);
    ssize_t n = procfile_read(dirfd, path, name, sizeof name);
    if (n <= 0)
        return;
    size_t len = strcspn(name, "\n");
    if (len >= sizeof t->name)
        len = sizeof t->name - 1;
    memcpy(t->name, name, len);
    t->name[len] = '\0';
}

/* Every thread /proc/self/task lists, alive and named as it is now.  The
 * listing's batches are read into the heap: a flight snapshot is taken on
 * the program's thread that asks for it, whose stack may be small. */
static int list_live(struct reading *r, int dirfd)
{
    pid_t *tids = malloc(PROCTASKS_BATCH_TIDS * sizeof *tids);
    if (!tids)
        return -ENOMEM;
    int n, rc = 0;
    while (rc == 0 &&
           (n = proctasks_next(dirfd, tids, PROCTASKS_BATCH_TIDS)) > 0)
        for (int i = 0; i < n && rc == 0; i++) {
            trace_thread *t = thread_of(r, tids[i]);
            if (t) {
                t->alive = true;
                name_from_proc(dirfd, t);
            } else {
                rc = -ENOMEM;
            }
        }
    free(tids);
    return rc;
}

/* Every live thread of the program, and every thread with an event. */
static int list_threads(struct reading *r)
{
    trace_snapshot *s = r->s;
    int dirfd = proctasks_open();
    if (dirfd >= 0) {
        int rc = list_live(r, dirfd);
        close(dirfd);
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < s->n_events; i++) {
        trace_event *e = &s->events[i];
        trace_thread *t = thread_of(r, e->tid);
        if (!t)
            return -ENOMEM;
        /* A thread gone by now is named as it was when it exited. */
        if ((e->kind == TRACE_THREAD_START && !t->name[0]) ||
            (e->kind == TRACE_THREAD_EXIT && !t->alive))
            if (e->text)
                snprintf(t->name, sizeof t->name, "%s", e->text);
    }
    for (size_t i = 0; i < s->n_threads; i++) {
        cpprof_labelset *set = registry_labels_of(s->threads[i].tid);
        const char *role;
        bool found = false;
        if (set)
            cpprof_label(set, PPROF_INTERNAL_KEY, &role, &found);
        s->threads[i].own = found;
        labelset_drop(set);
    }
    return 0;
}

static int list_tasks(struct reading *r)
{
    trace_snapshot *s = r->s;
    for (size_t i = 0; i < s->n_events; i++) {
        const trace_event *e = &s->events[i];
        if (e->kind != TRACE_TASK_ENTER && e->kind != TRACE_TASK_LEAVE)
            continue;
        size_t k = 0;
        while (k < s->n_tasks && s->tasks[k].number != e->task)
            k++;
        if (k < s->n_tasks)
            continue;
        if (ARRAY_RESERVE(s->tasks, s->n_tasks, r->cap_tasks, 1))
            return -ENOMEM;
        /* The task's labels: the set its thread switched to on entering. */
        uint32_t labels = 0;
        for (size_t j = i + 1; j < s->n_events; j++)
            if (s->events[j].tid == e->tid &&
                s->events[j].kind == TRACE_LABELS) {
                labels = s->events[j].labels;
                break;
            }
        s->tasks[s->n_tasks++] = (trace_task){e->task, labels};
    }
    return 0;
}

/* The process's name: its main thread's (the caller is cpprof's). */
static void process_name(char *name, size_t cap)
{
    ssize_t n = procfile_read(AT_FDCWD, "/proc/self/comm", name, cap);
    if (n <= 0)
        snprintf(name, cap, "%d", (int)getpid());
    else
        name[strcspn(name, "\n")] = '\0';
}

/* A text that points into a chunk's copy `from` (of `used` bytes) points
 * into its kept copy `to` instead. */
static void move_text(const char **text, const uint8_t *from, size_t used,
                      uint8_t *to)
{
    const uint8_t *p = (const uint8_t *)*text;
    if (p && p >= from && p < from + used)
        *text = (const char *)(to + (p - from));
}

int trace_snapshot_take(int64_t from, int64_t to, bool flight,
                        trace_snapshot **out)
{
    *out = NULL;
    trace_snapshot *s = calloc(1, sizeof *s);
    uint8_t *copy = malloc(CHUNK_BYTES);
    if (!s || !copy) {
        free(s);
        free(copy);
        return -ENOMEM;
    }
    struct reading r = {.s = s, .from = from, .to = to, .ns_per_tick = 1};
    int64_t ticks, ns;
    trace_read_clocks(&ticks, &ns);
    if (trace_pool && ticks > trace_anchor_ticks && ns > trace_anchor_ns)
        r.ns_per_tick =
            (double)(ns - trace_anchor_ns) /
            (double)(ticks - trace_anchor_ticks);
    s->start_ns = from;
    s->end_ns = to;
    s->realtime_ns = clock_ns(CLOCK_REALTIME) - (clock_mono_ns() - from);
    s->pid = getpid();
    s->flight = flight;
    s->dropped = atomic_load(&trace_dropped_n) -
                 (flight ? 0 : trace_window_dropped);
    process_name(s->process_name, sizeof s->process_name);
    int rc = ARRAY_RESERVE(s->sets, s->n_sets, r.cap_sets, 1) ||
                     ARRAY_RESERVE(r.serials, s->n_sets, r.cap_serials, 1)
                 ? -ENOMEM
                 : 0;
    if (rc == 0) {
        r.serials[s->n_sets] = 0;
        s->sets[s->n_sets++] = (trace_labels){0, NULL};
    }
    /* Each chunk is read from one reused copy; only a chunk with events in
     * the window is kept, its events' texts moved into the kept copy.  The
     * flight recorder's region holds mostly older events: keeping every
     * chunk (fresh memory, so a page fault per 4 KiB, about 25 us each on
     * a VM) was most of a snapshot's time. */
    for (size_t i = 0; rc == 0 && trace_pool && i < trace_n_chunks; i++) {
        struct chunk *c = &trace_pool[i];
        size_t used, first = s->n_events;
        if (atomic_load(&c->h.state) == CHUNK_FREE ||
            !(used = copy_chunk(c, copy)))
            continue;
        if ((rc = read_records(&r, copy, used)) || s->n_events == first)
            continue;
        uint8_t *kept = malloc(used);
        if (!kept ||
            ARRAY_RESERVE(s->storage, s->n_storage, r.cap_kept, 1)) {
            free(kept);
            rc = -ENOMEM;
            break;
        }
        memcpy(kept, copy, used);
        s->storage[s->n_storage++] = kept;
        for (size_t e = first; e < s->n_events; e++) {
            move_text(&s->events[e].text, copy, used, kept);
            move_text(&s->events[e].text2, copy, used, kept);
        }
    }
    if (rc == 0)
        rc = add_befores(&r);
    free(copy);
    free_befores(&r);
    free(r.serials);
    hashindex_free(&r.set_index);
    hashindex_free(&r.stack_index);
    if (rc == 0) {
        qsort(s->events, s->n_events, sizeof *s->events, by_time);
        rc = list_threads(&r);
    }
    if (rc == 0)
        rc = list_tasks(&r);
    if (rc) {
        trace_snapshot_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void trace_snapshot_free(trace_snapshot *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_stacks; i++)
        free((void *)s->stacks[i].pcs);
    for (size_t i = 0; i < s->n_storage; i++)
        free(s->storage[i]);
    free(s->storage);
    free(s->events);
    free(s->threads);
    free(s->tasks);
    free(s->sets);
    free(s->stacks);
    free(s);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(trace_snapshot_free);
UPPER_CALLS(trace_snapshot_take);
