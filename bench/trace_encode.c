/*
 * bench/trace_encode -- what the trace encoders (src/upper/timeline.h) cost: a
 * synthetic window of N events (100,000 by default) on 16 threads, in the
 * mix a labelled server makes (per thread, label switches, a region
 * around each, CPU samples, lock waits, log lines, task runs), encoded as
 * Perfetto's protobuf and as Chrome's JSON.  Each form's best of five
 * runs, and its size, are printed per 100,000 events, so that a window's
 * cost reads off the recorder's event count.
 *
 * Usage: trace_encode [N]; prints per form:
 *   form F events N encode_ms T bytes B ms_per_100k M bytes_per_100k K
 */
#include "timeline.h"

#include <cpprof.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define THREADS 16
#define SETS 32
#define STACKS 256
#define DEPTH 16
#define RUNS 5

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct {
    trace_snapshot s;
    trace_thread threads[THREADS];
    trace_task tasks[THREADS];
    trace_labels sets[SETS + 1];
    char set_text[SETS + 1][2][16];
    const char *kv[SETS + 1][4];
    trace_stack stacks[STACKS];
    uintptr_t pcs[STACKS][DEPTH];
    char frame_text[STACKS][DEPTH][48];
    const char *frame_ptrs[STACKS][DEPTH];
    timeline_frames frames[STACKS];
} window;

/* The sets as the recorder's snapshot holds them: pairs sorted by key. */
static int make_sets(window *w)
{
    for (int i = 1; i <= SETS; i++) {
        snprintf(w->set_text[i][0], sizeof w->set_text[i][0], "%d", i);
        snprintf(w->set_text[i][1], sizeof w->set_text[i][1], "tenant%d",
                 i % 8);
        const char **kv = w->kv[i];
        kv[0] = "job", kv[1] = w->set_text[i][0];
        kv[2] = "tenant", kv[3] = w->set_text[i][1];
        w->sets[i] = (trace_labels){2, kv};
    }
    return 0;
}

static void make_stacks(window *w)
{
    for (int i = 0; i < STACKS; i++) {
        for (int d = 0; d < DEPTH; d++) {
            w->pcs[i][d] = 0x400000 + (uintptr_t)(i * DEPTH + d) * 16;
            snprintf(w->frame_text[i][d], sizeof w->frame_text[i][d],
                     "function_%d_%d (server.c:%d)", i % 64, d, 100 + d);
            w->frame_ptrs[i][d] = w->frame_text[i][d];
        }
        w->stacks[i] = (trace_stack){w->pcs[i], DEPTH};
        w->frames[i] = (timeline_frames){w->frame_ptrs[i], DEPTH};
    }
}

/* Event i of thread t: a cycle of 10 events, a 100 us step. */
static trace_event event(size_t i, int t, int64_t ts)
{
    static const trace_kind cycle[10] = {
        TRACE_LABELS,     TRACE_REGION_BEGIN, TRACE_CPU_SAMPLE,
        TRACE_LOCK_WAIT,  TRACE_TASK_ENTER,   TRACE_CPU_SAMPLE,
        TRACE_TASK_LEAVE, TRACE_LOG,          TRACE_REGION_END,
        TRACE_CPU_SAMPLE};
    size_t k = i / THREADS;
    trace_event e = {.ts = ts, .kind = cycle[k % 10], .tid = 1000 + t,
                     .labels = (uint32_t)(1 + (k / 10 + (size_t)t) % SETS),
                     .stack = (uint32_t)(1 + (i * 7) % STACKS)};
    if (e.kind == TRACE_LOCK_WAIT)
        e.dur_ns = 40000, e.text = "mutex";
    if (e.kind == TRACE_REGION_BEGIN || e.kind == TRACE_REGION_END)
        e.text = "handle request";
    if (e.kind == TRACE_LOG)
        e.text = "db", e.text2 = "query done";
    if (e.kind == TRACE_TASK_ENTER || e.kind == TRACE_TASK_LEAVE)
        e.task = 1 + (uint64_t)t;
    if (e.kind == TRACE_TASK_LEAVE)
        e.text = "chan receive";
    return e;
}

static int make_window(window *w, size_t n)
{
    if (make_sets(w))
        return -1;
    make_stacks(w);
    for (int t = 0; t < THREADS; t++) {
        w->threads[t] = (trace_thread){.tid = 1000 + t, .alive = true};
        snprintf(w->threads[t].name, sizeof w->threads[t].name, "worker-%d", t);
        w->tasks[t] = (trace_task){.number = 1 + (uint64_t)t, .labels = 1};
    }
    trace_event *events = malloc(n * sizeof *events);
    if (!events)
        return -1;
    int64_t start = 1000000000000;
    for (size_t i = 0; i < n; i++)
        events[i] = event(i, (int)(i % THREADS),
                          start + (int64_t)(i / THREADS) * 100000);
    w->s = (trace_snapshot){
        .start_ns = start, .end_ns = start + (int64_t)(n / THREADS + 1) * 100000,
        .realtime_ns = 1700000000000000000, .pid = 4242,
        .process_name = "server", .events = events, .n_events = n,
        .threads = w->threads, .n_threads = THREADS, .tasks = w->tasks,
        .n_tasks = THREADS, .sets = w->sets, .n_sets = SETS + 1,
        .stacks = w->stacks, .n_stacks = STACKS, .cpu_samples = true};
    return 0;
}

/* A sink that only counts: the encoders' own cost. */
static int count_bytes(void *arg, const void *data, size_t len)
{
    (void)data;
    *(size_t *)arg += len;
    return 0;
}

/* One form's best time of RUNS, and its size. */
static int measure(const window *w, bool json)
{
    double best = 1e300;
    size_t bytes = 0;
    for (int r = 0; r < RUNS; r++) {
        bytes = 0;
        timeline_sink sink = {count_bytes, &bytes};
        double t0 = now_ms();
        int rc = json ? timeline_json(&w->s, w->frames, &sink)
                      : timeline_perfetto(&w->s, w->frames, &sink);
        double t = now_ms() - t0;
        if (rc) {
            fprintf(stderr, "trace_encode: %s\n", cpprof_strerror(rc));
            return -1;
        }
        if (t < best)
            best = t;
    }
    double per = 100000.0 / (double)w->s.n_events;
    printf("form %s events %zu encode_ms %.1f bytes %zu ms_per_100k %.1f "
           "bytes_per_100k %.0f\n",
           json ? "json" : "perfetto", w->s.n_events, best, bytes, best * per,
           (double)bytes * per);
    return 0;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    static window w;
    if (!n || make_window(&w, n)) {
        fprintf(stderr, "trace_encode: cannot make a window of %zu events\n", n);
        return 1;
    }
    int rc = measure(&w, false) || measure(&w, true);
    free(w.s.events);
    return rc ? 1 : 0;
}
