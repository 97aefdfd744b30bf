/*
 * http_goroutine.c -- GET /debug/pprof/goroutine?debug=N: the thread census
 * (census.h) in Go's three forms.
 *
 *   debug=0 (default)  gzip'd profile.proto, sample type goroutine/count
 *                      (Go's names, so tools that know Go's profile work
 *                      unchanged), one sample per (stack, label set).
 *   debug=1            Go's text form, grouped the same way, largest group
 *                      first, with a "# labels:" line per labelled group.
 *   debug=2            one block per thread, as Go's full goroutine dump
 *                      (gotext.h, godump.h):
 *                      goroutine TID [STATE, WCHAN, thread "NAME",
 *                      labels:{...}]:
 *                      then FUNC(...) / \tFILE:LINE +0xOFF per frame and
 *                      "created by"; then one per parked task (task.h):
 *                      goroutine N [REASON, 3 seconds, labels:{...}]:
 *
 * Parked tasks count in every form as goroutines do, told from threads by
 * their labels pprof_task=parked and pprof_wait=REASON (census.h); a
 * thread running a task carries pprof_task=running.
 *
 * GET /debug/pprof/goroutineleak is Go 1.27's leak profile in the same
 * forms: the threads census_take_leaked proves cannot run again (deadlock
 * cycles and the threads blocked behind them), sample type
 * goroutineleak/count, "goroutineleak profile: total N" at debug=1, each
 * marked with the leak's labels (census.h); debug=2 dumps every thread as
 * Go's does, the leaked ones with "(leaked)" after their wait.
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
#include "threadcreate.h"
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

/* Go's sample type and period for the goroutine profile or its leak
 * profile (`name`): NAME/count. */
static int add_count_types(builder *b, const char *name)
{
    const value_type type = {name, "count"};
    return named_add_types(b, &type, 1, type, 1);
}

static int encode_proto(const struct group *groups, size_t n,
                        const char *name, unsigned char **buf, size_t *len)
{
    builder *b = builder_new();
    if (!b)
        return -ENOMEM;
    builder_set_time(b, clock_ns(CLOCK_REALTIME), 0);
    int rc = add_count_types(b, name);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = add_group(b, &groups[i]);
    if (rc == 0)
        rc = symbolize_and_encode(b, buf, len);
    builder_free(b);
    return rc;
}

/* ---- Text forms --------------------------------------------------------- */

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

static void print_debug1(FILE *f, const census *c, const char *name,
                         const struct group *groups, size_t n)
{
    fprintf(f, "%s profile: total %zu\n", name, c->n + c->parked_tasks);
    struct debug1 d = {groups, ""};
    text_write_records(f, n, group_head, &d);
}

/* debug=2's block for census thread t (text_write_goroutine): its tid,
 * state, wait channel, name and labels in Go's goroutine header, and its
 * creator where cpprof saw the thread created. */
static void print_thread(FILE *f, const census_thread *t)
{
    pid_t creator = 0;
    text_goroutine g = {
        .head = {.id = (uint64_t)t->tid, .state = t->state_name,
                 .wait = t->wchan, .leaked = t->leaked, .thread = t->name,
                 .missing = t->missing, .labels = t->labels},
        .pcs = t->pcs, .depth = t->depth, .flags = t->flags,
        .pseudo_frame = t->missing[0] ? CENSUS_NO_STACK : NULL};
    if (threadcreate_creator(t->tid, &creator, &g.created_at))
        g.creator = (uint64_t)creator;
    text_write_goroutine(f, &g);
}

/* How long a task has been parked, as Go prints a goroutine's wait
 * ("5 minutes", from one minute on), and in seconds before that. */
static void parked_for(char *buf, size_t len, int64_t ns)
{
    int64_t s = ns / 1000000000;
    if (s >= 60)
        snprintf(buf, len, "%" PRId64 " minutes", s / 60);
    else
        snprintf(buf, len, "%" PRId64 " seconds", s);
}

/* debug=2's block for a parked task: its number, its reason in place of
 * Go's wait reason ("chan receive"), how long it has been parked, and its
 * labels, which mark it a task (pprof_task=parked). */
static void print_task(FILE *f, const census_task *t, const census_parked *p)
{
    char wait[32];
    parked_for(wait, sizeof wait, t->parked_ns);
    text_goroutine g = {
        .head = {.id = t->number, .state = p->reason, .wait = wait,
                 .missing = parked_missing(p), .labels = p->labels},
        .pcs = p->pcs, .depth = p->depth, .flags = p->flags,
        .pseudo_frame = p->depth ? NULL : CENSUS_NO_STACK,
        .creator = t->creator, .created_at = t->created_at};
    text_write_goroutine(f, &g);
}

/* Every thread, then every parked task (census_take lists each). */
static void print_debug2(FILE *f, const census *c)
{
    symbolize_begin();
    for (size_t i = 0; i < c->n; i++) {
        if (i)
            fputc('\n', f);
        print_thread(f, &c->threads[i]);
    }
    for (size_t i = 0; i < c->n_tasks; i++) {
        if (i || c->n)
            fputc('\n', f);
        print_task(f, &c->tasks[i], &c->parked[c->tasks[i].group]);
    }
    symbolize_end();
}

/* Renders a text form into a malloc'd buffer. */
static int render_text(const census *c, const char *name, long debug,
                       char **buf, size_t *len)
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
        print_debug1(f, c, name, groups, n);
    else
        print_debug2(f, c);
    free(groups);
    return fclose(f) == 0 ? 0 : -ENOMEM;
}

static int render_proto(const census *c, const char *name,
                        unsigned char **buf, size_t *len)
{
    struct group *groups;
    size_t n;
    int rc = group_stacks(c, &groups, &n);
    if (rc == 0)
        rc = encode_proto(groups, n, name, buf, len);
    free(groups);
    return rc;
}

/* ---- seconds=N ---------------------------------------------------------- */

/* The census `take` takes as (stack, label set) -> thread and task
 * count; a thread or task without a stack under the empty stack. */
static int census_snapshot(int (*take)(census *), sampleset **out)
{
    census c;
    int rc = take(&c);
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

static int delta_build(builder *b, const sampleset *s, const char *name)
{
    int rc = add_count_types(b, name);
    return rc ? rc : sampleset_build(b, s, add_delta_group, NULL);
}

static int goroutine_snapshot(sampleset **out)
{
    return census_snapshot(census_take_stacks, out);
}

static int goroutine_build(builder *b, const sampleset *s)
{
    return delta_build(b, s, "goroutine");
}

static int take_leaked(census *c) { return census_take_leaked(c, false); }

static int leak_snapshot(sampleset **out)
{
    return census_snapshot(take_leaked, out);
}

static int leak_build(builder *b, const sampleset *s)
{
    return delta_build(b, s, "goroutineleak");
}

/* Served only with `seconds` (http_named.c refuses debug with it), so they
 * have no text form. */
static const named_profile goroutine_delta = {
    .name = "goroutine",
    .delta = true,
    .labelled = true,
    .snapshot = goroutine_snapshot,
    .build = goroutine_build,
};

static const named_profile leak_delta = {
    .name = "goroutineleak",
    .delta = true,
    .labelled = true,
    .snapshot = leak_snapshot,
    .build = leak_build,
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

/* Sends the census in the form `debug` asks for, as profile `name`. */
static int reply_census(http_req *r, const census *c, const char *name,
                        long debug)
{
    int rc;
    if (debug == 0) {
        unsigned char *proto = NULL;
        size_t len = 0;
        rc = render_proto(c, name, &proto, &len);
        if (rc == 0)
            rc = http_reply_profile(r, name, true, proto, len);
        free(proto);
    } else {
        char *text = NULL;
        size_t len = 0;
        rc = render_text(c, name, debug, &text, &len);
        if (rc == 0)
            rc = http_reply(r, "text/plain; charset=utf-8", NULL, text, len);
        free(text);
    }
    return rc;
}

/* What the goroutine and goroutineleak endpoints share: the errors, the
 * delta, and the census `take` takes for the form asked for. */
static int serve_census(http_req *r, const named_profile *delta,
                        int (*take)(census *c, long debug))
{
    const char *format_error = http_profile_format_error(r);
    if (format_error != NULL)
        return http_error(r, 400, "%s", format_error);
    const char *seconds = http_query(r, "seconds");
    if (seconds && *seconds)
        return http_serve_named(r, delta);
    long debug = parse_debug(http_query(r, "debug"));
    if (debug < 0)
        return http_error(r, 400,
                          "invalid value for \"debug\" - must be 0, 1 or 2");
    census c;
    int rc = take(&c, debug);
    if (rc == CPPROF_ESIGTAKEN)
        return http_error(r, 500,
                          "Could not take the thread census: signal %ld "
                          "(setting census_signal) has a handler that is "
                          "not cpprof's",
                          cfg_int(CFG_CENSUS_SIGNAL));
    if (rc < 0)
        return http_error(r, 500, "Could not take the thread census: %s",
                          cpprof_strerror(rc));
    rc = reply_census(r, &c, delta->name, debug);
    census_release(&c);
    return rc;
}

/* Only debug=2 prints names, states and wait channels: the other forms
 * read one /proc file per blocked thread instead of three. */
static int take_goroutines(census *c, long debug)
{
    return debug == 2 ? census_take(c) : census_take_stacks(c);
}

int http_goroutine(http_req *r)
{
    return serve_census(r, &goroutine_delta, take_goroutines);
}

/* debug=2 dumps every thread, the leaked ones marked, as Go's does. */
static int take_leaks(census *c, long debug)
{
    return census_take_leaked(c, debug == 2);
}

int http_goroutineleak(http_req *r)
{
    return serve_census(r, &leak_delta, take_leaks);
}

long http_count_leaked(void) { return census_count_leaked(); }
