/*
 * tracefile.c -- a trace snapshot (trace.h) made into a file: its stacks
 * named by the symbolizer, then encoded (timeline.h) as Perfetto's
 * protobuf or Chrome's trace-event JSON.  Shared by /debug/pprof/trace
 * (http_trace.c) and cpprof_trace_flight_write, the program's own call;
 * either way the encoding goes to the caller's sink as it is made (the
 * reply, compressed as it comes; the program's file), never whole in
 * memory.
 *
 * The encoders take frames as text and call nothing, so they sit beside
 * the profile builder; naming is done here, above the symbolizer, once
 * per distinct stack the snapshot kept.
 */
#define _GNU_SOURCE
#include "tracefile.h"
#include "config.h"
#include "symbolize.h"
#include "timeline.h"
#include "trace.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every stack's frames as "function (file:line)" texts, inlined frames
 * expanded, innermost first; the texts are in `texts`. */
struct naming {
    timeline_frames *stacks;
    char **texts;
    size_t n_texts, cap_texts;
};

static int add_text(struct naming *n, const symbolize_frame *f)
{
    char *text;
    int len = f->file[0]
                  ? asprintf(&text, "%s (%s:%lld)", f->name, f->file,
                             (long long)f->line)
                  : asprintf(&text, "%s", f->name);
    if (len < 0)
        return -ENOMEM;
    if (ARRAY_RESERVE(n->texts, n->n_texts, n->cap_texts, 1)) {
        free(text);
        return -ENOMEM;
    }
    n->texts[n->n_texts++] = text;
    return 0;
}

/* Names stack st into n->stacks[i]: its texts are appended to n->texts,
 * whose first index is noted and turned into pointers at the end (the
 * array may move meanwhile). */
static int name_stack(struct naming *n, const trace_stack *st, size_t *first)
{
    *first = n->n_texts;
    for (unsigned i = 0; i < st->depth; i++) {
        uintptr_t pc = st->pcs[i];
        bool exact = i == 0 && st->leaf_exact;
        const symbolize_result *r = symbolize_pc(exact || !pc ? pc : pc - 1);
        for (size_t j = 0; j < r->nframes; j++) {
            int rc = add_text(n, &r->frames[j]);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static void naming_free(struct naming *n)
{
    for (size_t i = 0; i < n->n_texts; i++)
        free(n->texts[i]);
    free(n->texts);
    free(n->stacks);
}

static int name_stacks(const trace_snapshot *s, struct naming *n)
{
    size_t *first = calloc(s->n_stacks + 1, sizeof *first);
    n->stacks = calloc(s->n_stacks + 1, sizeof *n->stacks);
    if (!first || !n->stacks) {
        free(first);
        return -ENOMEM;
    }
    int rc = 0;
    symbolize_begin();
    for (size_t i = 0; rc == 0 && i < s->n_stacks; i++)
        rc = name_stack(n, &s->stacks[i], &first[i]);
    symbolize_end();
    first[s->n_stacks] = n->n_texts;
    for (size_t i = 0; rc == 0 && i < s->n_stacks; i++)
        n->stacks[i] = (timeline_frames){
            (const char *const *)n->texts + first[i], first[i + 1] - first[i]};
    free(first);
    return rc;
}

int tracefile_encode(const trace_snapshot *s, bool json,
                     const timeline_sink *out)
{
    struct naming n = {0};
    int rc = name_stacks(s, &n);
    if (rc == 0)
        rc = json ? timeline_json(s, n.stacks, out)
                  : timeline_perfetto(s, n.stacks, out);
    naming_free(&n);
    return rc;
}

/* A sink writing to a file descriptor, whole pieces (short writes and
 * EINTR resumed). */
static int write_fd(void *arg, const void *data, size_t len)
{
    int fd = *(const int *)arg;
    for (size_t at = 0; at < len;) {
        ssize_t w = write(fd, (const char *)data + at, len - at);
        if (w < 0 && errno != EINTR)
            return -errno;
        if (w > 0)
            at += (size_t)w;
    }
    return 0;
}

int tracefile_flight_write(int fd, int64_t until)
{
    if (!trace_flight_on())
        return CPPROF_ENOTRACE;
    trace_snapshot *s;
    int rc = trace_snapshot_take(
        until - (int64_t)cfg_int(CFG_TRACE_FLIGHT_SECONDS) * 1000000000,
        until, true, &s);
    if (rc)
        return rc;
    timeline_sink sink = {write_fd, &fd};
    rc = tracefile_encode(s, false, &sink);
    trace_snapshot_free(s);
    return rc;
}

int cpprof_trace_flight_write(int fd)
{
    return tracefile_flight_write(fd, clock_mono_ns());
}
