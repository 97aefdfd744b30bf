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
 * A reader (trace_snapshot.c) copies each chunk under its sequence number
 * (odd while the chunk is being reset for reuse) and keeps the copy only
 * if the number did not move: a reader never blocks a writer.
 *
 * Label sets: a record names its set by the offset of a copy of the set's
 * labels earlier in the same chunk (REC_SET, trace_int.h), made at the
 * set's first record in that chunk.  The recorder holds no reference to
 * any set: a trace or the flight recorder must not keep sets alive, which
 * would fill the label cap the program's profiles need (a program that
 * labels each job with a value of its own then had every later set
 * folded into cpprof_overflow, for the process's life); the copies live
 * and die with the chunks, within trace_kb.
 *
 * Timestamps: CLOCK_MONOTONIC, one clock for every thread.  Off, the hot
 * paths pay one load and a branch (trace_recording(), or label_hooks.traced
 * being NULL).  In a forked child the recording stops: its buffers
 * belong to the parent's window.  Nothing here runs in a signal handler.
 */
#define _GNU_SOURCE
#include "trace_int.h"
#include "atfork.h"
#include "config.h"
#include "labels.h"
#include "thread.h"
#include "unwind.h"
#include "util.h"
#include "upper_calls.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define TEXT_MAX 128u /* a region's name, a log's category and message */

/* A fresh chunk holds any record with its set's copy: reserve() takes no
 * second chunk. */
_Static_assert(2 * sizeof(struct rec) + STACK_MAX_FRAMES * sizeof(uintptr_t) +
                       2 * TEXT_MAX + TRACE_SET_MAX + 16 <=
                   sizeof(((struct chunk *)0)->data),
               "a chunk holds the largest record and a set's copy");

_Atomic int trace_on; /* TRACE_WINDOW | TRACE_FLIGHT */

struct chunk *trace_pool;
size_t trace_n_chunks;
static _Atomic size_t next_take;
static _Atomic uint32_t pool_gen = 1; /* a thread's chunk is of this */
_Atomic int64_t trace_dropped_n;
int64_t trace_window_dropped;
static _Atomic int64_t window_start; /* ticks; INT64_MAX: no window */
int64_t trace_anchor_ticks, trace_anchor_ns;
/* A window alone found no chunk to reuse: none will be until it ends. */
static _Atomic bool exhausted;
static pthread_mutex_t start_mu ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;

static __thread struct chunk *cur __attribute__((tls_model("initial-exec")));
static __thread uint32_t cur_gen __attribute__((tls_model("initial-exec")));
static __thread uint64_t cur_task __attribute__((tls_model("initial-exec")));
/* The calling thread's id, read once per process it runs in. */
static __thread pid_t tid_read __attribute__((tls_model("initial-exec")));
static __thread unsigned tid_fork __attribute__((tls_model("initial-exec")));
static _Atomic unsigned forks; /* children this process began as: + 1 */

/* ---- Writing ------------------------------------------------------------ */

/* The calling thread's id, without the thread registry: a record is made
 * inside the registry's own lock (a timed wait for it, a thread starting),
 * where registering the thread would take that lock again. */
static pid_t own_tid(void)
{
    unsigned f = atomic_load_explicit(&forks, memory_order_relaxed);
    if (tid_fork != f + 1) {
        tid_read = gettid();
        tid_fork = f + 1;
    }
    return tid_read;
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
    for (size_t tries = 0; tries < trace_n_chunks; tries++) {
        size_t i = atomic_fetch_add(&next_take, 1) % trace_n_chunks;
        struct chunk *c = &trace_pool[i];
        uint32_t state = atomic_load(&c->h.state);
        if (!reusable(c, state) ||
            !atomic_compare_exchange_strong(&c->h.state, &state, CHUNK_OWNED))
            continue;
        atomic_fetch_add_explicit(&c->h.seq, 1, memory_order_acq_rel);
        atomic_store_explicit(&c->h.used, 0, memory_order_relaxed);
        atomic_store_explicit(&c->h.last_ts, INT64_MIN, memory_order_relaxed);
        atomic_fetch_add_explicit(&c->h.seq, 1, memory_order_release);
        memset(c->sets, 0, sizeof c->sets);
        cur = c;
        cur_gen = atomic_load(&pool_gen);
        return c;
    }
    if (!(atomic_load(&trace_on) & TRACE_FLIGHT))
        atomic_store(&exhausted, true);
    return NULL;
}

/* The calling thread's chunk, when it has one of the pool's generation
 * (else the chunk may be another thread's by now). */
static struct chunk *own_chunk(void)
{
    return cur && cur_gen == atomic_load_explicit(&pool_gen,
                                                  memory_order_relaxed)
               ? cur
               : NULL;
}

/* Whether c, the calling thread's own chunk or NULL, holds `bytes` more. */
static bool has_room(const struct chunk *c, size_t bytes)
{
    return c && atomic_load_explicit(&c->h.used, memory_order_relaxed) +
                        bytes <=
                    sizeof c->data;
}

/* A record's size, its header and payload 8-aligned. */
static size_t rec_bytes(size_t payload)
{
    return (sizeof(struct rec) + payload + 7) & ~(size_t)7;
}

/* The header of a record at the end of chunk c's records. */
static struct rec *put_header(struct chunk *c, uint16_t kind, size_t bytes,
                              int64_t ts, pid_t tid)
{
    struct rec *r = (struct rec *)(void *)(c->data +
        atomic_load_explicit(&c->h.used, memory_order_relaxed));
    *r = (struct rec){ts, kind, (uint16_t)bytes, tid, 0, 0, 0};
    return r;
}

/* Publishes the record put_header() began. */
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

/* The length of text s kept in a REC_SET: at most TRACE_LABEL_TEXT_MAX - 1
 * bytes, cut before a UTF-8 continuation byte (sets are valid UTF-8). */
static size_t label_text_len(const char *s)
{
    size_t n = strnlen(s, TRACE_LABEL_TEXT_MAX);
    if (n < TRACE_LABEL_TEXT_MAX)
        return n;
    n = TRACE_LABEL_TEXT_MAX - 1;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

/* The pairs of `set` a REC_SET keeps, and their payload's bytes. */
static size_t set_pairs(const cpprof_labelset *set, size_t *payload)
{
    size_t n = cpprof_labelset_size(set), kept = 0, bytes = 0;
    for (; kept < n; kept++) {
        size_t pair = label_text_len(labelset_key(set, kept)) + 1 +
                      label_text_len(labelset_value(set, kept)) + 1;
        if (bytes + pair > TRACE_SET_MAX)
            break;
        bytes += pair;
    }
    *payload = bytes;
    return kept;
}

static char *put_label_text(char *p, const char *s)
{
    size_t n = label_text_len(s);
    memcpy(p, s, n);
    p[n] = '\0';
    return p + n + 1;
}

/* Copies `set` into chunk c as a REC_SET (there is room) and notes where;
 * that place, as rec.set_at. */
static uint32_t define_set(struct chunk *c, const cpprof_labelset *set,
                           int64_t ts, pid_t tid)
{
    size_t payload, n = set_pairs(set, &payload);
    uint32_t at = atomic_load_explicit(&c->h.used, memory_order_relaxed) + 1;
    struct rec *r = put_header(c, REC_SET, rec_bytes(payload), ts, tid);
    r->a = labelset_serial(set);
    r->pairs = (uint32_t)n;
    char *p = (char *)(r + 1);
    for (size_t i = 0; i < n; i++) {
        p = put_label_text(p, labelset_key(set, i));
        p = put_label_text(p, labelset_value(set, i));
    }
    commit(r);
    c->sets[r->a % CHUNK_SETS] = (struct chunk_set){r->a, at};
    return at;
}

/* Where chunk c holds a copy of the set of number `serial` (as
 * rec.set_at), or 0; c may be NULL. */
static uint32_t set_in_chunk(const struct chunk *c, uint64_t serial)
{
    const struct chunk_set *d = c ? &c->sets[serial % CHUNK_SETS] : NULL;
    return d && d->serial == serial ? d->at : 0;
}

/* Room for a record of `payload` bytes naming `set` (NULL: the empty set)
 * in the calling thread's chunk, its header filled, after the set's copy
 * when the chunk had none; NULL (counted as dropped) when there is none. */
static struct rec *reserve(trace_kind kind, size_t payload, int64_t ts,
                           pid_t tid, const cpprof_labelset *set)
{
    size_t bytes = rec_bytes(payload), copy = 0;
    struct chunk *c = own_chunk();
    uint64_t serial = set ? labelset_serial(set) : 0;
    uint32_t at = serial ? set_in_chunk(c, serial) : 0;
    if (serial && !at) {
        set_pairs(set, &copy);
        copy = rec_bytes(copy);
    }
    if (!has_room(c, bytes + copy)) {
        c = atomic_load_explicit(&exhausted, memory_order_relaxed)
                ? NULL
                : take_chunk();
        at = 0;
    }
    if (!c) {
        atomic_fetch_add_explicit(&trace_dropped_n, 1, memory_order_relaxed);
        return NULL;
    }
    if (serial && !at)
        at = define_set(c, set, ts, tid);
    struct rec *r = put_header(c, (uint16_t)kind, bytes, ts, tid);
    r->set_at = at;
    return r;
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
    pid_t tid = own_tid();
    struct rec *r = reserve(kind, texts_size(texts, count),
                            trace_ticks_now(), tid, labels);
    if (!r)
        return;
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
    struct rec *r =
        reserve(TRACE_LABELS, 0, trace_ticks_now(), own_tid(), set);
    if (!r)
        return;
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
    struct rec *r =
        reserve(TRACE_CPU_SAMPLE, depth * sizeof *pcs, ts, tid, labels);
    if (!r)
        return;
    r->a = leaf_exact;
    memcpy(r + 1, pcs, depth * sizeof *pcs);
    commit(r);
}

void trace_lock_wait(int64_t t0, int64_t t1, bool is_lock,
                     const uintptr_t *pcs, size_t depth)
{
    /* Stamped now, in ticks: t1 was a few instructions ago. */
    struct rec *r = reserve(TRACE_LOCK_WAIT, depth * sizeof *pcs,
                            trace_ticks_now(), own_tid(), NULL);
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

/* The ticks between two clock reads, against their mean: of 8 tries, the
 * one whose reads were closest (a try the scheduler cut in two is off by
 * as long as the thread waited). */
void trace_read_clocks(int64_t *ticks, int64_t *ns)
{
    int64_t best = INT64_MAX;
    for (int i = 0; i < 8; i++) {
        int64_t a = clock_mono_ns();
        int64_t t = trace_ticks_now();
        int64_t b = clock_mono_ns();
        if (b - a < best) {
            best = b - a;
            *ticks = t;
            *ns = a + (b - a) / 2;
        }
    }
}

/* Maps the buffers at the first recording, when trace_kb is read (a
 * program may set it until then). */
static int map_pool(void)
{
    if (trace_pool)
        return 0;
    cfg_freeze(CFG_TRACE_KB);
    size_t bytes = (size_t)cfg_int(CFG_TRACE_KB) * 1024;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -ENOMEM;
    trace_pool = p;
    trace_n_chunks = bytes / CHUNK_BYTES;
    trace_read_clocks(&trace_anchor_ticks, &trace_anchor_ns);
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
    madvise(trace_pool, trace_n_chunks * CHUNK_BYTES, MADV_DONTNEED);
    atomic_store(&next_take, 0);
}

static void atfork_prepare(void) { pthread_mutex_lock(&start_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&start_mu); }

/* The child's threads are gone and the window is the parent's. */
ATFORK_CHILD static void atfork_child(void)
{
    atomic_fetch_add(&forks, 1);
    atomic_store(&trace_on, 0);
    atomic_store(&label_hooks.traced, NULL);
    atomic_store(&window_start, INT64_MAX);
    atomic_fetch_add(&pool_gen, 1);
    cur = NULL;
    atfork_mutex_release(&start_mu);
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
                         const cpprof_labelset *labels, uint64_t task,
                         void *arg)
{
    (void)task;
    (void)name;
    struct rec *r = reserve(TRACE_LABELS, 0, *(int64_t *)arg, tid, labels);
    if (r)
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
        int64_t now = clock_mono_ns(), ticks = trace_ticks_now();
        atomic_store(&window_start, ticks);
        trace_window_dropped = atomic_load(&trace_dropped_n);
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


/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(trace_flight_on);
UPPER_CALLS(trace_window_begin);
UPPER_CALLS(trace_window_end);
