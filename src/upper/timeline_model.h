/*
 * timeline_model.h -- what the two encoders of timeline.h share: a
 * snapshot resolved into lanes (threads and tasks) and items (slices and
 * instants), every text escaped once, so that the protobuf and the JSON
 * writers only lay out the same items each in its own form.
 */
#ifndef CPPROF_TIMELINE_MODEL_H
#define CPPROF_TIMELINE_MODEL_H

#include "timeline.h"
#include "util.h"

#include <stdbool.h>

typedef enum {
    TL_LABELS, /* a thread's label span */
    TL_REGION,
    TL_LOG,
    TL_CPU,
    TL_LOCK,
    TL_THREAD, /* its start or exit */
    TL_TASK,   /* a task's run on a thread, on the task's lane */
    TL_NWHAT
} tl_what;

typedef struct {
    int64_t ts;       /* ns, CLOCK_MONOTONIC */
    int64_t dur;      /* ns; TL_INSTANT for an instant */
    size_t lane;      /* index in timeline.lanes */
    tl_what what;
    uint32_t set;     /* label set (TL_LABELS, TL_CPU, TL_TASK), 0: none */
    uint32_t stack;   /* index + 1 in the snapshot's stacks (TL_CPU,
                         TL_LOCK), 0: none */
    pid_t tid;        /* the thread it happened on */
    const char *name, *cat;
    const char *text; /* TL_LOG: the message; TL_TASK: why the run ended
                         (NULL: it still ran at the window's end) */
} tl_item;

#define TL_INSTANT (-1)

typedef struct {
    bool task;
    bool has_labels;  /* a thread with label spans */
    pid_t tid;        /* a thread's */
    uint64_t number;  /* a task's */
    uint32_t set;     /* a task's labels */
    const char *name; /* a thread's name, " (cpprof)" added for cpprof's
                         own; a task's "task N", and its labels */
    const char *span; /* a task's runs' name: "task N" */
} tl_lane;

typedef struct {
    const char *text;       /* "k=v,k=v", "" for the empty set */
    size_t n;               /* pairs */
    const char *const *kv;  /* key, value, key, value... */
} tl_set;

typedef struct {
    const char *const *frames; /* innermost first */
    size_t n;
    const char *joined;        /* the frames, one a line */
} tl_stack;

typedef struct {
    char **blocks;
    size_t n, cap;
    char *at;
    size_t left;
} tl_pool;

typedef struct {
    const trace_snapshot *s;
    const char *process_name;
    tl_lane *lanes;
    size_t n_lanes, cap_lanes;
    tl_item *items; /* by their start, but for slices that began before
                       the window */
    size_t n_items, cap_items;
    tl_set *sets;     /* as the snapshot's sets */
    tl_stack *stacks; /* as the snapshot's stacks */
    tl_pool pool;     /* the texts */
    struct hashindex by_tid, by_task; /* lanes by thread, by task */
} timeline;

/* Resolves s, naming its stacks' frames from `stacks` (NULL: PCs in hex).
 * 0, or -EINVAL, -ENOMEM (t then holds nothing to free). */
int timeline_build(timeline *t, const trace_snapshot *s,
                   const timeline_frames *stacks);
void timeline_free(timeline *t);

/* A label set, a stack (index + 1, 0: none) by their numbers in the
 * snapshot: never NULL, an empty one for none or a number out of range. */
const tl_set *timeline_set(const timeline *t, uint32_t set);
const tl_stack *timeline_stack(const timeline *t, uint32_t stack);

/* An encoder's output: pieces gathered into TL_OUT_BYTES and handed to
 * the sink a block at a time (jansson writes a document a token at a
 * time).  The first error sticks: later puts do nothing and return it. */
#define TL_OUT_BYTES 65536u
typedef struct {
    const timeline_sink *sink;
    char *buf;
    size_t len;
    int rc;
} tl_out;

/* 0, or -EINVAL (no sink), -ENOMEM. */
int tl_out_open(tl_out *o, const timeline_sink *sink);
int tl_out_put(tl_out *o, const void *data, size_t len);
/* Hands the rest to the sink and frees the buffer: the first error. */
int tl_out_close(tl_out *o);

#endif
