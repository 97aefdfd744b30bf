/*
 * http_goroutine.c -- GET /debug/pprof/goroutine?debug=N: the thread census
 * (census.h) in Go's three forms.
 *
 *   debug=0 (default)  gzip'd profile.proto, sample type goroutine/count
 *                      (Go's names, so tools that know Go's profile work
 *                      unchanged), one sample per (stack, label set).
 *   debug=1            Go's text form, grouped the same way, largest group
 *                      first, with a "# labels:" line per labelled group.
 *   debug=2            one block per thread, as Go's full goroutine dump:
 *                      thread TID "NAME" [STATE, WCHAN, labels:{...}]:
 *                      then FUNC(...) / \tFILE:LINE +0xOFF per frame;
 *                      then one per parked task (task.h):
 *                      task N [REASON, 3 seconds, labels:{...}]:
 *
 * Parked tasks count in every form as goroutines do, told from threads by
 * their labels pprof_task=parked and pprof_wait=REASON (census.h); a
 * thread running a task carries pprof_task=running.
 *
 * Anything else in `debug` is a 400.  A thread whose stack is missing has
 * one pseudo-frame instead, CENSUS_NO_STACK plus the reason, in every form:
 * it still counts, with its labels.
 *
 * Only debug=2 shows threads' names, states and kernel wait channels, so
 * only it takes the census that reads them (census_take); the others take
 * stacks and labels alone (census_take_stacks), a third of the /proc reads.
 *
 * seconds=N is Go's goroutine delta: two censuses N seconds apart as
 * (stack, label set) -> thread count, the first subtracted from the second
 * (a group that shrank is negative), served by http_named.c's named-profile
 * code like every other delta, so the errors and their order are Go's.
 * In a delta, threads without a stack count under CENSUS_NO_STACK alone:
 * the reasons of two censuses need not match.
 */
#define _GNU_SOURCE /* open_memstream */
#include "builder.h"
#include "census.h"
#include "config.h"
#include "gotext.h"
#include "http_named.h"
#include "http.h"
#include "labels.h"
#include "symbolize.h"
#include "symbolize_profile.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Threads, or parked tasks, with the same stack and label set: one
 * record of debug=0 and debug=1. */
struct group {
    const cpprof_labelset *labels;
    const char *missing; /* "" when pcs hold the stack; else why not */
    const uintptr_t *pcs;
    unsigned depth, flags;
    int64_t count;
    size_t first; /* its first member's place: threads, then tasks */
};

static int by_stack_key(const void *x, const void *y)
{
    const struct group *a = x, *b = y;
    if (a->labels != b->labels)
        return (uintptr_t)a->labels < (uintptr_t)b->labels ? -1 : 1;
    int c = strcmp(a->missing, b->missing);
    if (c)
        return c;
    if (a->flags != b->flags)
        return a->flags < b->flags ? -1 : 1;
    if (a->depth != b->depth)
        return a->depth < b->depth ? -1 : 1;
    return a->depth ? memcmp(a->pcs, b->pcs, a->depth * sizeof *a->pcs) : 0;
}

/* Largest group first; equal counts in census order, so output is
 * stable. */
static int by_count(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return (x->first > y->first) - (x->first < y->first);
}

/* Why a parked task's group has no stack, or "". */
static const char *parked_missing(const census_parked *p)
{
    return p->depth ? "" : CENSUS_TASK_NO_STACK;
}

/* Groups the census's threads and parked tasks by (stack, label set),
 * largest first.  The census grouped the tasks already: what is sorted
 * here is a record per thread and per group of tasks. */
static int group_stacks(const census *c, struct group **out, size_t *n)
{
    size_t all = c->n + c->n_parked;
    struct group *groups = malloc((all + 1) * sizeof *groups);
    if (!groups)
        return -ENOMEM;
    /* Written whole below: a record per thread, 14 pages at 1,000
     * threads, populated in one call (util.h) rather than faulted in. */
    prefault_for_write(groups, all * sizeof *groups);
    for (size_t i = 0; i < c->n; i++) {
        const census_thread *t = &c->threads[i];
        groups[i] = (struct group){t->labels, t->missing, t->pcs, t->depth,
                                   t->flags, 1, i};
    }
    for (size_t i = 0; i < c->n_parked; i++) {
        const census_parked *p = &c->parked[i];
        groups[c->n + i] = (struct group){p->labels, parked_missing(p),
                                          p->pcs, p->depth, p->flags,
                                          (int64_t)p->count, c->n + i};
    }
    qsort(groups, all, sizeof *groups, by_stack_key);
    *n = 0;
    for (size_t i = 0; i < all; i++) {
        struct group *last = *n ? &groups[*n - 1] : NULL;
        if (last && by_stack_key(last, &groups[i]) == 0) {
            last->count += groups[i].count;
            if (groups[i].first < last->first)
                last->first = groups[i].first;
            continue;
        }
        groups[(*n)++] = groups[i];
    }
    qsort(groups, *n, sizeof *groups, by_count);
    *out = groups;
    return 0;
}

/* The frame that stands for a missing stack. */
static void no_stack_frame(const char *missing, char *buf, size_t len)
{
    snprintf(buf, len, "%s (%s)", CENSUS_NO_STACK, missing);
}

/* ---- debug=0 ------------------------------------------------------------ */

static int add_group(builder *b, const struct group *g)
{
    if (!g->missing[0])
        return builder_add_sample(b, g->pcs, g->depth, g->flags, &g->count,
                                  g->labels, NULL, 0);
    char frame[CENSUS_NO_STACK_FRAME_MAX];
    no_stack_frame(g->missing, frame, sizeof frame);
    return builder_add_labelled_pseudo_sample(b, frame, &g->count, g->labels);
}

/* Go's sample type and period for the goroutine profile. */
static int add_goroutine_types(builder *b)
{
    static const value_type type = {"goroutine", "count"};
    return named_add_types(b, &type, 1, type, 1);
}

static int encode_proto(const struct group *groups, size_t n,
                        unsigned char **buf, size_t *len)
{
    builder *b = builder_new();
    if (!b)
        return -ENOMEM;
    builder_set_time(b, clock_ns(CLOCK_REALTIME), 0);
    int rc = add_goroutine_types(b);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = add_group(b, &groups[i]);
    if (rc == 0)
        rc = symbolize_and_encode(b, buf, len);
    builder_free(b);
    return rc;
}

/* ---- Text forms --------------------------------------------------------- */

/* The address to symbolize: a return address is looked up one byte back,
 * so that the line is the call's. */
static uintptr_t lookup_pc(const uintptr_t *pcs, unsigned flags, size_t i)
{
    bool exact = i == 0 && (flags & STACK_LEAF_EXACT);
    return exact || pcs[i] == 0 ? pcs[i] : pcs[i] - 1;
}

static const char *file_or_unknown(const symbolize_frame *f)
{
    return f->file[0] ? f->file : "?";
}

/* The groups, and the missing-stack frame of the record being written. */
struct debug1 {
    const struct group *groups;
    char frame[CENSUS_NO_STACK_FRAME_MAX];
};

static void group_head(FILE *f, size_t i, void *arg, text_record *rec)
{
    struct debug1 *d = arg;
    const struct group *g = &d->groups[i];
    fprintf(f, "%" PRId64, g->count);
    *rec = (text_record){g->pcs, g->depth, g->flags, 0, g->labels, NULL};
    if (g->missing[0]) {
        no_stack_frame(g->missing, d->frame, sizeof d->frame);
        rec->pseudo_frame = d->frame;
    }
}

static void print_debug1(FILE *f, const census *c, const struct group *groups,
                         size_t n)
{
    fprintf(f, "goroutine profile: total %zu\n", c->n + c->parked_tasks);
    struct debug1 d = {groups, ""};
    text_write_records(f, n, group_head, &d);
}

struct header_labels {
    FILE *f;
    bool first;
};

static bool print_header_label(const char *key, const char *value, void *arg)
{
    struct header_labels *h = arg;
    if (!h->first)
        fputs(", ", h->f);
    h->first = false;
    text_put_escaped(h->f, key, true);
    fputs(": ", h->f);
    text_put_escaped(h->f, value, true);
    return true;
}

/* ", labels:{"k": "v", ...}" when the set has any. */
static void print_header_labels(FILE *f, const cpprof_labelset *labels)
{
    if (!cpprof_labelset_size(labels))
        return;
    struct header_labels h = {f, true};
    fputs(", labels:{", f);
    cpprof_labels_foreach(labels, print_header_label, &h);
    fputc('}', f);
}

/* thread TID "NAME" [STATE, WCHAN, labels:{"k": "v", ...}]: -- the labels
 * inside the bracket, after the state, in Go 1.27's traceback form
 * (GODEBUG tracebacklabels=1, the default for go 1.27 modules;
 * golang/go#76349, CL 694119), which debug=2 dumps print. */
static void print_thread_header(FILE *f, const census_thread *t)
{
    fprintf(f, "thread %d ", (int)t->tid);
    text_put_escaped(f, t->name, true);
    fprintf(f, " [%s%s", t->state_name[0] ? t->state_name : "unknown",
            t->wchan[0] ? ", " : "");
    text_put_escaped(f, t->wchan, false);
    print_header_labels(f, t->labels);
    fputs("]:\n", f);
}

/* FUNC(...) then \tFILE:LINE +0xOFF, per frame (inlined ones first);
 * the stand-in frame when the stack is `missing`. */
static void print_debug2_frames(FILE *f, const uintptr_t *pcs, size_t depth,
                                unsigned flags, const char *missing)
{
    if (missing[0]) {
        char frame[CENSUS_NO_STACK_FRAME_MAX];
        no_stack_frame(missing, frame, sizeof frame);
        fprintf(f, "%s\n", frame);
        return;
    }
    for (size_t i = 0; i <= depth; i++) {
        if ((flags & STACK_GUESSED) && i == STACK_GUESS_AT(flags))
            fprintf(f, "%s(...)\n\t?:0 +0x0\n", STACK_GUESSED_FRAME);
        if (i == depth)
            break;
        const symbolize_result *s = symbolize_pc(lookup_pc(pcs, flags, i));
        for (size_t j = 0; j < s->nframes; j++) {
            text_put_escaped(f, s->frames[j].name, false);
            fputs("(...)\n\t", f);
            text_put_escaped(f, file_or_unknown(&s->frames[j]), false);
            fprintf(f, ":%" PRId64 " +%#" PRIxPTR "\n", s->frames[j].line,
                    s->sym_offset);
        }
    }
}

/* How long a task has been parked, as Go prints a goroutine's wait
 * (", 5 minutes", from one minute on), and in seconds before that. */
static void print_parked_for(FILE *f, int64_t ns)
{
    int64_t s = ns / 1000000000;
    if (s >= 60)
        fprintf(f, ", %" PRId64 " minutes", s / 60);
    else
        fprintf(f, ", %" PRId64 " seconds", s);
}

/* task N [REASON, D, labels:{...}]: -- a parked task as Go's goroutine
 * header: its reason in place of Go's wait reason ("chan receive"). */
static void print_task_header(FILE *f, const census_task *t,
                              const census_parked *p)
{
    fprintf(f, "task %" PRIu64 " [", t->number);
    text_put_escaped(f, p->reason, false);
    print_parked_for(f, t->parked_ns);
    print_header_labels(f, p->labels);
    fputs("]:\n", f);
}

/* Every thread, then every parked task (census_take lists each). */
static void print_debug2(FILE *f, const census *c)
{
    symbolize_begin();
    for (size_t i = 0; i < c->n; i++) {
        const census_thread *t = &c->threads[i];
        if (i)
            fputc('\n', f);
        print_thread_header(f, t);
        print_debug2_frames(f, t->pcs, t->depth, t->flags, t->missing);
    }
    for (size_t i = 0; i < c->n_tasks; i++) {
        const census_parked *p = &c->parked[c->tasks[i].group];
        if (i || c->n)
            fputc('\n', f);
        print_task_header(f, &c->tasks[i], p);
        print_debug2_frames(f, p->pcs, p->depth, p->flags,
                            parked_missing(p));
    }
    symbolize_end();
}

/* Renders a text form into a malloc'd buffer. */
static int render_text(const census *c, long debug, char **buf, size_t *len)
{
    struct group *groups = NULL;
    size_t n = 0;
    if (debug == 1 && group_stacks(c, &groups, &n) != 0)
        return -ENOMEM;
    FILE *f = open_memstream(buf, len);
    if (!f) {
        free(groups);
        return -ENOMEM;
    }
    if (debug == 1)
        print_debug1(f, c, groups, n);
    else
        print_debug2(f, c);
    free(groups);
    return fclose(f) == 0 ? 0 : -ENOMEM;
}

static int render_proto(const census *c, unsigned char **buf, size_t *len)
{
    struct group *groups;
    size_t n;
    int rc = group_stacks(c, &groups, &n);
    if (rc == 0)
        rc = encode_proto(groups, n, buf, len);
    free(groups);
    return rc;
}

/* ---- seconds=N ---------------------------------------------------------- */

/* The census as (stack, label set) -> thread and task count; a thread
 * or task without a stack under the empty stack. */
static int delta_snapshot(sampleset **out)
{
    census c;
    int rc = census_take_stacks(&c);
    if (rc != 0)
        return rc;
    sampleset *s = sampleset_new(1);
    rc = s ? 0 : -ENOMEM;
    const int64_t one = 1;
    for (size_t i = 0; rc == 0 && i < c.n; i++) {
        const census_thread *t = &c.threads[i];
        bool stack = !t->missing[0];
        rc = sampleset_add(s, t->pcs, stack ? t->depth : 0,
                           stack ? t->flags : 0, 0, t->labels, 0, &one);
    }
    for (size_t i = 0; rc == 0 && i < c.n_parked; i++) {
        const census_parked *p = &c.parked[i];
        const int64_t count = (int64_t)p->count;
        rc = sampleset_add(s, p->pcs, p->depth, p->flags, 0, p->labels, 0,
                           &count);
    }
    census_release(&c);
    if (rc != 0) {
        sampleset_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static int add_delta_group(builder *b, const sampleset_entry *e, void *arg)
{
    (void)arg;
    if (!e->depth)
        return builder_add_labelled_pseudo_sample(b, CENSUS_NO_STACK,
                                                  e->values, e->labels);
    return builder_add_sample(b, e->pcs, e->depth, e->flags, e->values,
                              e->labels, NULL, 0);
}

static int delta_build(builder *b, const sampleset *s)
{
    int rc = add_goroutine_types(b);
    return rc ? rc : sampleset_build(b, s, add_delta_group, NULL);
}

/* Served only with `seconds` (http_named.c refuses debug with it), so it has
 * no text form. */
static const named_profile goroutine_delta = {
    .name = "goroutine",
    .delta = true,
    .labelled = true,
    .snapshot = delta_snapshot,
    .build = delta_build,
};

/* ---- The handler -------------------------------------------------------- */

/* `debug`: absent means 0; otherwise a decimal integer, 0, 1 or 2. */
static long parse_debug(const char *s)
{
    if (s == NULL)
        return 0;
    long v = 0;
    if (*s == '\0')
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > 2)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v <= 2 ? v : -1;
}

/* Takes the census and sends it in the form `debug` asks for. */
static int reply_census(http_req *r, const census *c, long debug)
{
    int rc;
    if (debug == 0) {
        unsigned char *proto = NULL;
        size_t len = 0;
        rc = render_proto(c, &proto, &len);
        if (rc == 0)
            rc = http_reply_profile(r, "goroutine", true, proto, len);
        free(proto);
    } else {
        char *text = NULL;
        size_t len = 0;
        rc = render_text(c, debug, &text, &len);
        if (rc == 0)
            rc = http_reply(r, "text/plain; charset=utf-8", NULL, text, len);
        free(text);
    }
    return rc;
}

int http_goroutine(http_req *r)
{
    const char *format_error = http_profile_format_error(r);
    if (format_error != NULL)
        return http_error(r, 400, "%s", format_error);
    const char *seconds = http_query(r, "seconds");
    if (seconds && *seconds)
        return http_serve_named(r, &goroutine_delta);
    long debug = parse_debug(http_query(r, "debug"));
    if (debug < 0)
        return http_error(r, 400,
                          "invalid value for \"debug\" - must be 0, 1 or 2");
    census c;
    /* Only debug=2 prints names, states and wait channels: the other forms
     * read one /proc file per blocked thread instead of three. */
    int rc = debug == 2 ? census_take(&c) : census_take_stacks(&c);
    if (rc == CPPROF_ESIGTAKEN)
        return http_error(r, 500,
                          "Could not take the thread census: signal %ld "
                          "(setting census_signal) has a handler that is "
                          "not cpprof's",
                          cfg_int(CFG_CENSUS_SIGNAL));
    if (rc < 0)
        return http_error(r, 500, "Could not take the thread census: %s",
                          cpprof_strerror(rc));
    rc = reply_census(r, &c, debug);
    census_release(&c);
    return rc;
}
