/*
 * trace.h -- the trace recorder (trace.c): what happened when, per thread
 * and per task, for /debug/pprof/trace and the flight recorder.
 *
 * While a trace window or the flight recorder runs, the hot paths (a label
 * switch, a task's enter and leave, a user region or log, a contended
 * lock wait, a thread's start and exit, a CPU sample drained by the
 * sampler's collector) append a small record to the calling thread's own
 * buffer: no lock, no allocation after the thread's first record.  Off,
 * each of those paths pays one load and a predictable branch.
 *
 * A reader takes a snapshot: every buffer's records since a time, resolved
 * into plain data (trace_snapshot) that the encoders (timeline.h) turn
 * into Perfetto's protobuf or Chrome's JSON without calling back here.
 * Never called from a signal handler.
 */
#ifndef CPPROF_TRACE_H
#define CPPROF_TRACE_H

#include "cpprof.h"

#include <stdatomic.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum {
    TRACE_LABELS,       /* the thread's label set became `labels` */
    TRACE_REGION_BEGIN, /* text: the region's name (cpprof_trace_region) */
    TRACE_REGION_END,   /* text: the region's name */
    TRACE_LOG,          /* text: category, text2: message */
    TRACE_CPU_SAMPLE,   /* stack, labels: the sample's */
    TRACE_LOCK_WAIT,    /* a wait of dur_ns ending at ts; stack; text:
                           "mutex" (a lock's holder made it wait) or
                           "block" (a wait for a condition) */
    TRACE_THREAD_START, /* text: the thread's name (its creator's, as yet) */
    TRACE_THREAD_EXIT,  /* text: its name */
    TRACE_TASK_ENTER,   /* the thread runs task number `task` from ts */
    TRACE_TASK_LEAVE,   /* ... until ts; text: its park reason, or NULL
                           when it ended */
    TRACE_NKINDS
} trace_kind;

typedef struct {
    int64_t ts;      /* CLOCK_MONOTONIC nanoseconds */
    int64_t dur_ns;  /* TRACE_LOCK_WAIT only */
    trace_kind kind;
    pid_t tid;       /* the thread it happened on */
    uint64_t task;   /* the task the thread ran then (0: none) */
    uint32_t labels; /* index in trace_snapshot.sets (0: the empty set) */
    uint32_t stack;  /* index + 1 in trace_snapshot.stacks (0: none) */
    const char *text, *text2; /* in the snapshot's own storage, or NULL */
} trace_event;

typedef struct {
    pid_t tid;
    char name[16];
    bool own;   /* cpprof's own thread (its server, collector...) */
    bool alive; /* still running when the snapshot was taken */
} trace_thread;

/* A label set as the recorder copied it (trace_int.h: each key and value
 * cut at 255 bytes, up to 2 KiB of them): kv[2n], key then value, sorted
 * by key, in the snapshot's own storage. */
typedef struct {
    size_t n;
    const char *const *kv;
} trace_labels;

typedef struct {
    uint64_t number; /* as TRACE_TASK_ENTER's `task` */
    uint32_t labels; /* the task's set when it was first seen */
} trace_task;

typedef struct {
    const uintptr_t *pcs; /* innermost first: return addresses, but for a
                             CPU sample's leaf (`leaf_exact`), where the
                             thread was interrupted */
    unsigned depth;
    bool leaf_exact;
} trace_stack;

typedef struct {
    int64_t start_ns, end_ns; /* the window, CLOCK_MONOTONIC */
    int64_t realtime_ns;      /* CLOCK_REALTIME at start_ns */
    pid_t pid;
    char process_name[64];
    trace_event *events; /* by ts, then by record order on one thread */
    size_t n_events;
    trace_thread *threads; /* every thread with an event, and every live
                              thread of the program */
    size_t n_threads;
    trace_task *tasks;
    size_t n_tasks;
    trace_labels *sets; /* [0]: the empty set */
    size_t n_sets;
    trace_stack *stacks;
    size_t n_stacks;
    int64_t dropped;     /* records lost for want of buffer room */
    bool cpu_samples;    /* the CPU sampler ran during the window */
    bool flight;         /* taken from the flight recorder */
    void **storage;      /* what the events' texts and the sets point
                            into */
    size_t n_storage;
} trace_snapshot;

/* ---- Recording ---------------------------------------------------------- */

enum { TRACE_WINDOW = 1, TRACE_FLIGHT = 2 };
extern _Atomic int trace_on;

/* Whether events are being recorded: what every hot path asks first. */
static inline bool trace_recording(void)
{
    return __builtin_expect(
        atomic_load_explicit(&trace_on, memory_order_relaxed) != 0, 0);
}

/* Task number `number` (0: none) starts running on the calling thread, or
 * the one it ran parks for `reason` (NULL: it ended).  task.c, before the
 * thread's labels change. */
void trace_task_switch(uint64_t number, const char *reason);

/* The sampler's collector: a CPU sample of thread tid, taken at ts
 * (acct_clock_ticks(), which a signal handler may read). */
void trace_cpu_sample(pid_t tid, int64_t ts, const uintptr_t *pcs,
                      size_t depth, bool leaf_exact,
                      const cpprof_labelset *labels);

/* contention.c: the calling thread waited from t0 to t1 (CLOCK_MONOTONIC
 * ns, t1 just now) for a lock (is_lock) or a condition; at least
 * trace_lock_threshold_ns(). */
void trace_lock_wait(int64_t t0, int64_t t1, bool is_lock,
                     const uintptr_t *pcs, size_t depth);
int64_t trace_lock_threshold_ns(void);

/* Opens the one trace window, at *start_ns; -EBUSY while one is open
 * (Go: a second trace at once is refused), -ENOMEM. */
int trace_window_begin(int64_t *start_ns);
void trace_window_end(void);

/* The flight recorder (trace_flight_seconds): on until the process
 * ends. */
int trace_flight_start(void);
bool trace_flight_on(void);

/* ---- Reading ------------------------------------------------------------ */

/* The events recorded from `from` to `to` (CLOCK_MONOTONIC ns), resolved;
 * `flight`: a flight recorder's snapshot (its drops counted since it
 * began, not since a window did).  0, or -ENOMEM. */
int trace_snapshot_take(int64_t from, int64_t to, bool flight,
                        trace_snapshot **out);
void trace_snapshot_free(trace_snapshot *s);

#endif
