/*
 * trace.c -- the trace recorder: label switches, task enters and leaves,
 * user regions and logs, contended waits, thread starts and exits and CPU
 * samples, each with its time, kept while a trace window
 * (/debug/pprof/trace) or the flight recorder runs.
 *
 * Why a recorder of its own: the profiles aggregate (how much), a trace
 * keeps order (when).  Go's trace is written by its scheduler; here the
 * events come from the paths that already see them: thread.c's label
 * switch (through label_hooks.traced, there only while recording), task.c,
 * contention.c's timed waits and the sampler's collector.
 *
 * Storage.  One region of `trace_kb`, mapped at the first recording and
 * cut into chunks of CHUNK_BYTES.  A thread appends records to the chunk
 * it owns (no lock, no allocation, no atomic read-modify-write: only its
 * `used` is published with a release store) and, when that is full, seals
 * it and takes the next chunk round the region (one fetch-and-add and a
 * compare-and-swap of the chunk's state).  So memory is bounded whatever
 * the thread count, and the oldest sealed chunks are reused first:
 *  - with the flight recorder on, always (it keeps the newest events);
 *  - for a window alone, only chunks whose events all precede the window
 *    (else the new event is dropped and counted: a window keeps its
 *    beginning, as a trace file would).
 * A reader copies each chunk under its sequence number (odd while the
 * chunk is being reset for reuse) and keeps the copy only if the number
 * did not move: a reader never blocks a writer.
 *
 * Label sets in records are pointers, each held once by the recorder
 * (`pins`, a lock-free table) before it is first recorded and kept held
 * for the process's life, so a record never outlives its set.  The cost:
 * sets a trace saw are never reclaimed by the label core (its cap counts
 * them); docs/trace.md says so.
 *
 * Timestamps: CLOCK_MONOTONIC, one clock for every thread.  Off, the hot
 * paths pay one load and a branch (trace_recording(), or label_hooks.traced
 * being NULL).  In a forked child the recording stops: its buffers
 * belong to the parent's window.  Nothing here runs in a signal handler.
 */
#define _GNU_SOURCE
#include "trace.h"
#include "atfork.h"
#include "config.h"
#include "labelhooks.h"
#include "labels.h"
#include "procfile.h"
#include "proctasks.h"
#include "thread.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define CHUNK_BYTES 16384u
#define TEXT_MAX 128u /* a region's name, a log's category and message */

enum { CHUNK_FREE, CHUNK_OWNED, CHUNK_SEALED };

struct chunk_head {
    _Atomic uint32_t state;
    _Atomic uint32_t seq;  /* odd while being reset for reuse */
    _Atomic uint32_t used; /* bytes of complete records */
    _Atomic int64_t last_ts;
};

struct chunk {
    struct chunk_head h;
    uint8_t data[CHUNK_BYTES - sizeof(struct chunk_head)];
};

/* A record: this header, then `bytes - sizeof header` of payload (a text,
 * or a stack's PCs), 8-aligned.  Its time is in the cheap clock's ticks
 * (acct_clock_ticks: the cycle counter on x86-64, a clock_gettime there
 * costs three times as much), made nanoseconds when read. */
struct rec {
    int64_t ts;
    uint16_t kind;
    uint16_t bytes;
    pid_t tid;
    const cpprof_labelset *labels;
    uint64_t a; /* task (LABELS, TASK_*), wait ns << 1 | is_lock
                   (LOCK_WAIT), leaf exact (CPU_SAMPLE) */
};

_Atomic int trace_on; /* TRACE_WINDOW | TRACE_FLIGHT */

static struct chunk *pool;
static size_t n_chunks;
static _Atomic size_t next_take;
static _Atomic uint32_t pool_gen = 1; /* a thread's chunk is of this */
static _Atomic int64_t dropped;
static int64_t window_dropped; /* `dropped` when the window began */
static _Atomic int64_t window_start; /* ticks; INT64_MAX: no window */
/* A tick count and CLOCK_MONOTONIC read together when the pool was mapped:
 * with a pair read at each snapshot, the ticks' rate. */
static int64_t anchor_ticks, anchor_ns;
/* A window alone found no chunk to reuse: none will be until it ends. */
static _Atomic bool exhausted;
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;

static _Atomic(const cpprof_labelset *) *pins;
static size_t n_pins;

static __thread struct chunk *cur __attribute__((tls_model("initial-exec")));
static __thread uint32_t cur_gen __attribute__((tls_model("initial-exec")));
static __thread uint64_t cur_task __attribute__((tls_model("initial-exec")));

/* ---- Writing ------------------------------------------------------------ */

static inline int64_t ticks_now(void)
{
    return (int64_t)acct_clock_ticks();
}

/* Holds `set` for the recorder's life, once; false when the table is full
 * (the record then carries no labels, and is counted as dropped). */
static bool pin(const cpprof_labelset *set)
{
    if (!set)
        return true;
    size_t mask = n_pins - 1;
    size_t i = (size_t)hash_mix(0, (uintptr_t)set) & mask;
    for (size_t probes = 0; probes < n_pins; probes++, i = (i + 1) & mask) {
        const cpprof_labelset *p =
            atomic_load_explicit(&pins[i], memory_order_acquire);
        if (p == set)
            return true;
        if (!p) {
            labelset_hold(set);
            if (atomic_compare_exchange_strong(&pins[i], &p, set))
                return true;
            labelset_drop(set);
            if (p == set)
                return true;
        }
    }
    return false;
}

/* Whether chunk c may be reset for reuse: it holds no event a window
 * being recorded needs, or the flight recorder keeps only the newest. */
static bool reusable(struct chunk *c, uint32_t state)
{
    if (state == CHUNK_FREE)
        return true;
    if (state != CHUNK_SEALED)
        return false;
    return (atomic_load(&trace_on) & TRACE_FLIGHT) ||
           atomic_load_explicit(&c->h.last_ts, memory_order_relaxed) <
               atomic_load(&window_start);
}

/* Seals the calling thread's chunk and gives it the next reusable one
 * round the pool; NULL when none is (every event until one is: dropped). */
static struct chunk *take_chunk(void)
{
    if (cur && cur_gen == atomic_load(&pool_gen))
        atomic_store(&cur->h.state, CHUNK_SEALED);
    cur = NULL;
    for (size_t tries = 0; tries < n_chunks; tries++) {
        struct chunk *c = &pool[atomic_fetch_add(&next_take, 1) % n_chunks];
        uint32_t state = atomic_load(&c->h.state);
        if (!reusable(c, state) ||
            !atomic_compare_exchange_strong(&c->h.state, &state, CHUNK_OWNED))
            continue;
        atomic_fetch_add_explicit(&c->h.seq, 1, memory_order_acq_rel);
        atomic_store_explicit(&c->h.used, 0, memory_order_relaxed);
        atomic_store_explicit(&c->h.last_ts, INT64_MIN, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->h.seq, 1, memory_order_release);
        cur = c;
        cur_gen = atomic_load(&pool_gen);
        return c;
    }
    if (!(atomic_load(&trace_on) & TRACE_FLIGHT))
        atomic_store(&exhausted, true);
    return NULL;
}

/* Whether the calling thread's chunk c is of the pool's generation and
 * holds `bytes` more. */
static bool has_room(const struct chunk *c, size_t bytes)
{
    return c &&
           cur_gen == atomic_load_explicit(&pool_gen, memory_order_relaxed) &&
           atomic_load_explicit(&c->h.used, memory_order_relaxed) + bytes <=
               sizeof c->data;
}

/* Room for a record of `payload` bytes in the calling thread's chunk, its
 * header filled; NULL (counted as dropped) when there is none. */
static struct rec *reserve(trace_kind kind, size_t payload, int64_t ts,
                           pid_t tid)
{
    size_t bytes = (sizeof(struct rec) + payload + 7) & ~(size_t)7;
    struct chunk *c = cur;
    if (!has_room(c, bytes))
        c = atomic_load_explicit(&exhausted, memory_order_relaxed)
                ? NULL
                : take_chunk();
    if (!c) {
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        return NULL;
    }
    struct rec *r = (struct rec *)(void *)(c->data +
        atomic_load_explicit(&c->h.used, memory_order_relaxed));
    *r = (struct rec){ts, (uint16_t)kind, (uint16_t)bytes, tid, NULL, 0};
    return r;
}

/* Publishes the record reserve() gave. */
static void commit(const struct rec *r)
{
    struct chunk *c = cur;
    atomic_store_explicit(&c->h.last_ts, r->ts, memory_order_relaxed);
    atomic_store_explicit(&c->h.used,
                          atomic_load_explicit(&c->h.used,
                                               memory_order_relaxed) +
                              r->bytes,
                          memory_order_release);
}

/* Copies up to `count` NUL-terminated texts into the payload, each cut
 * at TEXT_MAX - 1 bytes. */
static size_t texts_size(const char *const *texts, size_t count)
{
    size_t n = 0;
    for (size_t i = 0; i < count; i++)
        n += strnlen(texts[i] ? texts[i] : "", TEXT_MAX - 1) + 1;
    return n;
}

static void put_texts(struct rec *r, const char *const *texts, size_t count)
{
    char *p = (char *)(r + 1);
    for (size_t i = 0; i < count; i++) {
        size_t n = strnlen(texts[i] ? texts[i] : "", TEXT_MAX - 1);
        memcpy(p, texts[i] ? texts[i] : "", n);
        p[n] = '\0';
        p += n + 1;
    }
}

static void record_texts(trace_kind kind, const char *const *texts,
                         size_t count, const cpprof_labelset *labels,
                         uint64_t a)
{
    pid_t tid = thread_self_tid();
    struct rec *r = reserve(kind, texts_size(texts, count), ticks_now(), tid);
    if (!r)
        return;
    if (labels && pin(labels))
        r->labels = labels;
    r->a = a;
    put_texts(r, texts, count);
    commit(r);
}

/* A thread starts or exits, named: at its start, as its creator (it has
 * not named itself yet); at its exit, as itself.  At exit its chunk is
 * sealed, for other threads to reuse. */
static void record_thread(trace_kind kind, const cpprof_labelset *set)
{
    char name[16] = "";
    prctl(PR_GET_NAME, name);
    const char *texts[] = {name};
    record_texts(kind, texts, 1, set, 0);
    if (kind == TRACE_THREAD_EXIT) {
        if (cur && cur_gen == atomic_load(&pool_gen))
            atomic_store(&cur->h.state, CHUNK_SEALED);
        cur = NULL;
    }
}

static void record_switch(const cpprof_labelset *set, uint64_t task)
{
    struct rec *r = reserve(TRACE_LABELS, 0, ticks_now(), thread_self_tid());
    if (!r)
        return;
    if (set && pin(set))
        r->labels = set;
    r->a = task;
    commit(r);
}

/* label_hooks.traced while recording. */
static void on_label_event(enum label_trace_what what,
                           const cpprof_labelset *set, uint64_t task)
{
    if (!atomic_load_explicit(&trace_on, memory_order_relaxed))
        return;
    if (what == LABEL_TRACE_SWITCH)
        record_switch(set, task);
    else
        record_thread(what == LABEL_TRACE_START ? TRACE_THREAD_START
                                                : TRACE_THREAD_EXIT,
                      set);
}

void trace_task_switch(uint64_t number, const char *reason)
{
    const char *texts[] = {reason};
    if (number) {
        cur_task = number;
        record_texts(TRACE_TASK_ENTER, NULL, 0, NULL, number);
    } else if (cur_task) {
        record_texts(TRACE_TASK_LEAVE, texts, reason ? 1 : 0, NULL,
                     cur_task);
        cur_task = 0;
    }
}

void trace_cpu_sample(pid_t tid, int64_t ts, const uintptr_t *pcs,
                      size_t depth, bool leaf_exact,
                      const cpprof_labelset *labels)
{
    struct rec *r = reserve(TRACE_CPU_SAMPLE, depth * sizeof *pcs, ts, tid);
    if (!r)
        return;
    r->a = leaf_exact;
    if (labels && pin(labels))
        r->labels = labels;
    memcpy(r + 1, pcs, depth * sizeof *pcs);
    commit(r);
}

void trace_lock_wait(int64_t t0, int64_t t1, bool is_lock,
                     const uintptr_t *pcs, size_t depth)
{
    /* Stamped now, in ticks: t1 was a few instructions ago. */
    struct rec *r = reserve(TRACE_LOCK_WAIT, depth * sizeof *pcs, ticks_now(),
                            thread_self_tid());
    if (!r)
        return;
    r->a = (uint64_t)(t1 - t0) << 1 | is_lock;
    memcpy(r + 1, pcs, depth * sizeof *pcs);
    commit(r);
}

int64_t trace_lock_threshold_ns(void)
{
    return (int64_t)cfg_int(CFG_TRACE_LOCK_US) * 1000;
}

int cpprof_trace_region_begin(const char *name)
{
    if (!name)
        return -EINVAL;
    if (trace_recording()) {
        const char *texts[] = {name};
        record_texts(TRACE_REGION_BEGIN, texts, 1, NULL, 0);
    }
    return 0;
}

int cpprof_trace_region_end(const char *name)
{
    if (!name)
        return -EINVAL;
    if (trace_recording()) {
        const char *texts[] = {name};
        record_texts(TRACE_REGION_END, texts, 1, NULL, 0);
    }
    return 0;
}

int cpprof_trace_log(const char *category, const char *message)
{
    if (!message)
        return -EINVAL;
    if (trace_recording()) {
        const char *texts[] = {category ? category : "", message};
        record_texts(TRACE_LOG, texts, 2, NULL, 0);
    }
    return 0;
}

/* ---- Starting and stopping ---------------------------------------------- */

/* Reads the tick count and CLOCK_MONOTONIC at one moment: the ticks
 * between two clock reads, against their mean. */
static void read_clocks(int64_t *ticks, int64_t *ns)
{
    int64_t a = clock_mono_ns();
    *ticks = ticks_now();
    *ns = a + (clock_mono_ns() - a) / 2;
}

/* Maps the buffers and the pin table at the first recording, when
 * trace_kb is read (a program may set it until then). */
static int map_pool(void)
{
    if (pool)
        return 0;
    cfg_freeze(CFG_TRACE_KB);
    size_t bytes = (size_t)cfg_int(CFG_TRACE_KB) * 1024;
    size_t cap = (size_t)cfg_int(CFG_LABEL_CAP) + 1;
    n_pins = 1024;
    while (n_pins < 2 * cap && n_pins < (1u << 21))
        n_pins *= 2;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    void *q = mmap(NULL, n_pins * sizeof *pins, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (q == MAP_FAILED) {
        munmap(p, bytes);
        return -ENOMEM;
    }
    pool = p;
    n_chunks = bytes / CHUNK_BYTES;
    pins = q;
    read_clocks(&anchor_ticks, &anchor_ns);
    return 0;
}

/* The recording state becomes `on`: the label hook follows it; buffers
 * are given back to the system when nothing records. */
static void set_recording(int on)
{
    int was = atomic_exchange(&trace_on, on);
    atomic_store(&exhausted, false);
    atomic_store(&label_hooks.traced, on ? on_label_event : NULL);
    if (on || !was)
        return;
    /* Threads holding a chunk see the generation move and take another;
     * the pages go back, the mapping stays (a late writer faults in a
     * zero page, nothing worse). */
    atomic_fetch_add(&pool_gen, 1);
    madvise(pool, n_chunks * CHUNK_BYTES, MADV_DONTNEED);
    atomic_store(&next_take, 0);
}

static void atfork_prepare(void) { pthread_mutex_lock(&start_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&start_mu); }

/* The child's threads are gone and the window is the parent's. */
static void atfork_child(void)
{
    atomic_store(&trace_on, 0);
    atomic_store(&label_hooks.traced, NULL);
    atomic_store(&window_start, INT64_MAX);
    atomic_fetch_add(&pool_gen, 1);
    cur = NULL;
    pthread_mutex_unlock(&start_mu);
}

static void register_atfork(void)
{
    static const atfork_handlers h = {atfork_prepare, atfork_parent,
                                      atfork_child};
    atfork_add(ATFORK_TRACE, &h);
}

/* Notes every registered thread's set at `now`, so that a span that began
 * before the window is drawn from its start. */
static void note_current(pid_t tid, const char *name,
                         const cpprof_labelset *labels, void *arg)
{
    (void)name;
    struct rec *r = reserve(TRACE_LABELS, 0, *(int64_t *)arg, tid);
    if (!r)
        return;
    if (labels && pin(labels))
        r->labels = labels;
    commit(r);
}

int trace_window_begin(int64_t *start_ns)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork);
    pthread_mutex_lock(&start_mu);
    int on = atomic_load(&trace_on);
    int rc = (on & TRACE_WINDOW) ? -EBUSY : map_pool();
    if (rc == 0) {
        int64_t now = clock_mono_ns(), ticks = ticks_now();
        atomic_store(&window_start, ticks);
        window_dropped = atomic_load(&dropped);
        set_recording(on | TRACE_WINDOW);
        registry_foreach(note_current, &ticks);
        *start_ns = now;
    }
    pthread_mutex_unlock(&start_mu);
    return rc;
}

void trace_window_end(void)
{
    pthread_mutex_lock(&start_mu);
    atomic_store(&window_start, INT64_MAX);
    set_recording(atomic_load(&trace_on) & ~TRACE_WINDOW);
    pthread_mutex_unlock(&start_mu);
}

int trace_flight_start(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork);
    pthread_mutex_lock(&start_mu);
    int rc = map_pool();
    if (rc == 0)
        set_recording(atomic_load(&trace_on) | TRACE_FLIGHT);
    pthread_mutex_unlock(&start_mu);
    return rc;
}

bool trace_flight_on(void)
{
    return atomic_load(&trace_on) & TRACE_FLIGHT;
}

/* CPPROF_TRACE_FLIGHT_SECONDS: on from load (config.c's constructor has
 * read the settings by then). */
__attribute__((constructor)) static void flight_from_environment(void)
{
    cfg_freeze(CFG_TRACE_FLIGHT_SECONDS);
    if (cfg_int(CFG_TRACE_FLIGHT_SECONDS) > 0)
        trace_flight_start();
}

/* ---- Reading ------------------------------------------------------------ */

/* What a snapshot is built from: the copied records, then the tables. */
struct reading {
    trace_snapshot *s;
    int64_t from, to;
    double ns_per_tick; /* from the anchor to now */
    size_t cap_events, cap_threads, cap_tasks, cap_sets, cap_stacks;
    size_t cap_kept, cap_before;
    struct hashindex set_index, stack_index;
    /* Each thread's latest set before the window, drawn from its start. */
    struct before {
        pid_t tid;
        int64_t ts;
        const struct rec *rec;
    } *before;
    size_t n_before;
};

static bool same_set(const void *ctx, size_t item, const void *key)
{
    const struct reading *r = ctx;
    return r->s->sets[item] == key;
}

/* The snapshot's index of set (0: none), held when new. */
static int set_number(struct reading *r, const cpprof_labelset *set,
                      uint32_t *out)
{
    *out = 0;
    if (!set)
        return 0;
    uint64_t hash = hash_mix(0, (uintptr_t)set);
    struct hashindex_slot *slot =
        hashindex_find(&r->set_index, hash, same_set, r, set);
    if (!slot)
        return -ENOMEM;
    if (!slot->item) {
        trace_snapshot *s = r->s;
        if (ARRAY_RESERVE(s->sets, s->n_sets, r->cap_sets, 1))
            return -ENOMEM;
        s->sets[s->n_sets] = labelset_hold(set);
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

static int add_event(struct reading *r, const struct rec *rec, int64_t ts)
{
    trace_snapshot *s = r->s;
    int rc = ARRAY_RESERVE(s->events, s->n_events, r->cap_events, 1);
    if (rc)
        return rc;
    trace_event *e = &s->events[s->n_events];
    *e = (trace_event){.ts = ts, .kind = rec->kind, .tid = rec->tid};
    if ((rc = set_number(r, rec->labels, &e->labels)))
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
    return anchor_ns + (int64_t)((double)(ticks - anchor_ticks) *
                                 r->ns_per_tick);
}

/* Notes rec, a label switch before the window, when it is its thread's
 * latest yet. */
static int note_before(struct reading *r, const struct rec *rec)
{
    for (size_t i = 0; i < r->n_before; i++) {
        struct before *b = &r->before[i];
        if (b->tid == rec->tid) {
            if (rec->ts >= b->ts)
                *b = (struct before){rec->tid, rec->ts, rec};
            return 0;
        }
    }
    if (ARRAY_RESERVE(r->before, r->n_before, r->cap_before, 1))
        return -ENOMEM;
    r->before[r->n_before++] = (struct before){rec->tid, rec->ts, rec};
    return 0;
}

/* Parses one chunk's copy; a record that does not fit ends it (a writer
 * racing a restart may have left one). */
static int read_records(struct reading *r, const uint8_t *data, size_t used)
{
    for (size_t at = 0; at + sizeof(struct rec) <= used;) {
        const struct rec *rec = (const void *)(data + at);
        if (rec->bytes < sizeof *rec || rec->bytes % 8 ||
            at + rec->bytes > used || rec->kind >= TRACE_NKINDS)
            return 0;
        at += rec->bytes;
        int64_t ts = to_ns(r, rec->ts);
        int rc = 0;
        if (ts < r->from && rec->kind == TRACE_LABELS)
            rc = note_before(r, rec); /* by ticks: the same order */
        else if (ts >= r->from && ts <= r->to)
            rc = add_event(r, rec, ts);
        if (rc)
            return rc;
    }
    return 0;
}

/* The window opens with each thread's set from before it. */
static int add_befores(struct reading *r)
{
    for (size_t i = 0; i < r->n_before; i++) {
        int rc = add_event(r, r->before[i].rec, r->from);
        if (rc)
            return rc;
    }
    return 0;
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

/* Every live thread of the program, and every thread with an event. */
static int list_threads(struct reading *r)
{
    trace_snapshot *s = r->s;
    int dirfd = proctasks_open();
    if (dirfd >= 0) {
        pid_t tids[64];
        int n;
        while ((n = proctasks_next(dirfd, tids)) > 0)
            for (int i = 0; i < n; i++) {
                trace_thread *t = thread_of(r, tids[i]);
                if (!t)
                    break;
                t->alive = true;
                name_from_proc(dirfd, t);
            }
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
    if (dirfd >= 0)
        close(dirfd);
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
    read_clocks(&ticks, &ns);
    if (pool && ticks > anchor_ticks && ns > anchor_ns)
        r.ns_per_tick =
            (double)(ns - anchor_ns) / (double)(ticks - anchor_ticks);
    s->start_ns = from;
    s->end_ns = to;
    s->realtime_ns = clock_ns(CLOCK_REALTIME) - (clock_mono_ns() - from);
    s->pid = getpid();
    s->flight = flight;
    s->dropped = atomic_load(&dropped) - (flight ? 0 : window_dropped);
    process_name(s->process_name, sizeof s->process_name);
    int rc = ARRAY_RESERVE(s->sets, s->n_sets, r.cap_sets, 1);
    if (rc == 0)
        s->sets[s->n_sets++] = NULL;
    /* Each chunk's copy is kept: the events' texts point into it. */
    for (size_t i = 0; rc == 0 && pool && i < n_chunks; i++) {
        struct chunk *c = &pool[i];
        size_t used;
        if (atomic_load(&c->h.state) == CHUNK_FREE ||
            !(used = copy_chunk(c, copy)))
            continue;
        void *kept = malloc(used);
        if (!kept ||
            ARRAY_RESERVE(s->storage, s->n_storage, r.cap_kept, 1)) {
            free(kept);
            rc = -ENOMEM;
            break;
        }
        memcpy(kept, copy, used);
        s->storage[s->n_storage++] = kept;
        rc = read_records(&r, kept, used);
    }
    if (rc == 0)
        rc = add_befores(&r);
    free(copy);
    free(r.before);
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
    for (size_t i = 0; i < s->n_sets; i++)
        labelset_drop(s->sets[i]);
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
