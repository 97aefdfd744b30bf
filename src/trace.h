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
    TRACE_THREAD_START, /* text: the thread's name */
    TRACE_THREAD_EXIT,
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

typedef struct {
    uint64_t number; /* as TRACE_TASK_ENTER's `task` */
    uint32_t labels; /* the task's set when it was first seen */
} trace_task;

typedef struct {
    const uintptr_t *pcs; /* innermost first */
    unsigned depth;
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
    const cpprof_labelset **sets; /* [0] is NULL: the empty set; each
                                     other holds a reference */
    size_t n_sets;
    trace_stack *stacks;
    size_t n_stacks;
    int64_t dropped;     /* records lost for want of buffer room */
    bool cpu_samples;    /* the CPU sampler ran during the window */
    bool flight;         /* taken from the flight recorder */
} trace_snapshot;

void trace_snapshot_free(trace_snapshot *s);

#endif
