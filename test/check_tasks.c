/*
 * check_tasks.c -- tasks (cpprof_task_*): labels that follow the work from
 * thread to thread, and bad use refused with a clear error that loses
 * nothing.
 *
 *   - entering gives the thread the task's labels, leaving gives it back
 *     its own; labels applied while the task runs (cpprof_do,
 *     cpprof_set_thread_labels) go with the task to the next thread; a
 *     task made with NULL takes its creator's labels;
 *   - ending twice, entering a task another thread runs, leaving a task the
 *     thread does not run, entering while running another, a thread
 *     exiting while it runs a task, the "tasks_max" limit: each refused
 *     (or, for the exit, reported) with the task, its labels and the
 *     threads' labels as they were;
 *   - a label scope (cpprof_scope_begin/end, cpprof_do) may span a task's
 *     leave and enter on another thread; one whose code moves to another
 *     thread without a task (a fiber switch) is refused at its end with
 *     CPPROF_ESCOPEMOVED, changing no thread's labels;
 *   - the census lists parked tasks with their labels, the marks
 *     pprof_task=parked and pprof_wait=REASON, and the stack where they
 *     parked, grouped by (stack, labels, reason) with a count, and with
 *     census_take each task in its group; a thread running a task carries
 *     pprof_task=running.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "census.h"
#include "cpprof.h"
#include "symbolize.h"
#include "check_pair.h"

/* The value of `key` in `set`, or NULL. */
static const char *value_of(const cpprof_labelset *set, const char *key)
{
    const char *v;
    bool found;
    ck_assert_int_eq(cpprof_label(set, key, &v, &found), 0);
    return found ? v : NULL;
}

/* The calling thread's value of `key`, copied ("" when absent). */
static const char *thread_value(const char *key)
{
    static __thread char buf[64];
    cpprof_labelset *now = cpprof_thread_labels();
    const char *v = now ? value_of(now, key) : NULL;
    snprintf(buf, sizeof buf, "%s", v ? v : "");
    cpprof_labelset_release(now);
    return buf;
}

/* ---- A second thread that runs what it is told --------------------------- */

enum { IDLE, ENTER, LEAVE, SCOPE_END, RESUME, EXIT };

struct worker {
    pthread_t thread;
    cpprof_task task;
    cpprof_scope *scope;   /* SCOPE_END's */
    ucontext_t *fiber;     /* RESUME's: run until it swaps back */
    ucontext_t own;
    atomic_int order, done;
    int rc;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    cpprof_labelset *own = make("thread", "worker");
    ck_assert_int_eq(cpprof_set_thread_labels(own), 0);
    cpprof_labelset_release(own);
    for (;;) {
        int order;
        while ((order = atomic_load(&w->order)) == IDLE)
            usleep(100);
        if (order == EXIT)
            return NULL; /* with whatever task it runs */
        if (order == ENTER)
            w->rc = cpprof_task_enter(w->task);
        else if (order == LEAVE)
            w->rc = cpprof_task_leave(w->task, "io", 0);
        else if (order == SCOPE_END)
            w->rc = cpprof_scope_end(w->scope);
        else
            w->rc = swapcontext(&w->own, w->fiber);
        atomic_store(&w->order, IDLE);
        atomic_fetch_add(&w->done, 1);
    }
}

static void worker_start(struct worker *w)
{
    memset(w, 0, sizeof *w);
    ck_assert_int_eq(pthread_create(&w->thread, NULL, worker_main, w), 0);
}

/* Has the worker do `order` and returns its result. */
static int worker_do(struct worker *w, cpprof_task task, int order)
{
    int before = atomic_load(&w->done);
    w->task = task;
    atomic_store(&w->order, order);
    while (atomic_load(&w->done) == before)
        usleep(100);
    return w->rc;
}

static void worker_exit(struct worker *w)
{
    atomic_store(&w->order, EXIT);
    ck_assert_int_eq(pthread_join(w->thread, NULL), 0);
}

/* ---- Labels follow the task ---------------------------------------------- */

/* Runs inside a task, in a cpprof_do scope: the scope's labels on top of
 * the task's. */
static void in_scope(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    *(bool *)arg = strcmp(thread_value("tenant"), "acme") == 0 &&
                   strcmp(thread_value("step"), "inside") == 0;
}

START_TEST(labels_move_with_the_task)
{
    cpprof_labelset *mine = make("thread", "main");
    ck_assert_int_eq(cpprof_set_thread_labels(mine), 0);
    cpprof_labelset *acme = make("tenant", "acme");
    cpprof_task t;
    ck_assert_int_eq(cpprof_task_create(&t, acme), 0);
    ck_assert_uint_ne(t.id, 0);
    ck_assert_str_eq(thread_value("thread"), "main"); /* creating: no change */

    ck_assert_int_eq(cpprof_task_enter(t), 0);
    ck_assert_uint_eq(cpprof_task_current().id, t.id);
    ck_assert_str_eq(thread_value("tenant"), "acme");
    ck_assert_str_eq(thread_value("thread"), ""); /* the task's, not mine */
    /* Applied while it runs: the task's from now on. */
    cpprof_labelset *with_job;
    cpprof_labelset *now = cpprof_thread_labels();
    ck_assert_int_eq(cpprof_labels_with(&with_job, now, 2,
                                        (const char *[]){"job", "42"}),
                     0);
    cpprof_labelset_release(now);
    ck_assert_int_eq(cpprof_set_thread_labels(with_job), 0);
    cpprof_labelset_release(with_job);
    ck_assert_int_eq(cpprof_task_leave(t, "io", 0), 0);
    ck_assert_uint_eq(cpprof_task_current().id, 0);
    ck_assert_str_eq(thread_value("thread"), "main");
    ck_assert_str_eq(thread_value("job"), "");

    /* Another thread enters it: tenant and job go there; back, its own. */
    struct worker w;
    worker_start(&w);
    ck_assert_int_eq(worker_do(&w, t, ENTER), 0);
    cpprof_labelset *seen = NULL;
    census c;
    ck_assert_int_eq(census_take_labels(&c), 0);
    for (size_t i = 0; i < c.n; i++)
        if (c.threads[i].labels &&
            value_of(c.threads[i].labels, "job") != NULL)
            seen = cpprof_labelset_ref(c.threads[i].labels);
    census_release(&c);
    ck_assert_ptr_nonnull(seen);
    ck_assert_str_eq(value_of(seen, "tenant"), "acme");
    ck_assert_ptr_null(value_of(seen, "thread"));
    cpprof_labelset_release(seen);
    ck_assert_int_eq(worker_do(&w, t, LEAVE), 0);
    worker_exit(&w);

    /* A cpprof_do scope inside a task: its labels while it lasts. */
    ck_assert_int_eq(cpprof_task_enter(t), 0);
    ck_assert_str_eq(thread_value("job"), "42");
    cpprof_labelset *step = make("step", "inside");
    bool inside = false;
    ck_assert_int_eq(cpprof_do(NULL, step, in_scope, &inside), 0);
    ck_assert(inside);
    cpprof_labelset_release(step);
    ck_assert_str_eq(thread_value("step"), "");
    ck_assert_int_eq(cpprof_task_end(t), 0); /* ends the one it runs */
    ck_assert_str_eq(thread_value("thread"), "main");
    ck_assert_uint_eq(cpprof_task_current().id, 0);

    /* NULL: the creator's labels, as a goroutine's. */
    ck_assert_int_eq(cpprof_task_create(&t, NULL), 0);
    ck_assert_int_eq(cpprof_set_thread_labels(acme), 0);
    ck_assert_int_eq(cpprof_task_enter(t), 0);
    ck_assert_str_eq(thread_value("thread"), "main");
    ck_assert_int_eq(cpprof_task_leave(t, NULL, CPPROF_TASK_NO_STACK), 0);
    ck_assert_str_eq(thread_value("tenant"), "acme");
    ck_assert_int_eq(cpprof_task_end(t), 0);
    cpprof_labelset_release(acme);
    cpprof_labelset_release(mine);
}
END_TEST

/* ---- Scopes that span a park ------------------------------------------- */

START_TEST(a_scope_spans_the_tasks_moves)
{
    cpprof_labelset *acme = make("tenant", "acme");
    cpprof_labelset *step = make("step", "upload");
    cpprof_task t;
    ck_assert_int_eq(cpprof_task_create(&t, acme), 0);
    ck_assert_int_eq(cpprof_task_enter(t), 0);
    cpprof_scope scope;
    ck_assert_int_eq(cpprof_scope_begin(&scope, NULL, step), 0);
    ck_assert_str_eq(thread_value("step"), "upload");
    ck_assert_int_eq(cpprof_task_leave(t, "io", 0), 0);
    ck_assert_str_eq(thread_value("step"), "");

    /* Resumed on another thread, the scope ends there: the task's labels
     * go back to what they were before it, the worker's own untouched. */
    struct worker w;
    worker_start(&w);
    ck_assert_int_eq(worker_do(&w, t, ENTER), 0);
    w.scope = &scope;
    ck_assert_int_eq(worker_do(&w, t, SCOPE_END), 0);
    /* Ended twice: refused, nothing put back again. */
    ck_assert_int_eq(worker_do(&w, t, SCOPE_END), -EINVAL);
    ck_assert_int_eq(worker_do(&w, t, LEAVE), 0);
    ck_assert_int_eq(cpprof_task_enter(t), 0);
    ck_assert_str_eq(thread_value("tenant"), "acme");
    ck_assert_str_eq(thread_value("step"), "");
    ck_assert_int_eq(cpprof_task_end(t), 0);
    worker_exit(&w);
    cpprof_labelset_release(step);
    cpprof_labelset_release(acme);
}
END_TEST

START_TEST(a_scope_moved_without_a_task_is_refused)
{
    cpprof_labelset *mine = make("thread", "main");
    ck_assert_int_eq(cpprof_set_thread_labels(mine), 0);
    cpprof_labelset *acme = make("tenant", "acme");
    cpprof_scope scope;
    ck_assert_int_eq(cpprof_scope_begin(&scope, NULL, acme), 0);
    ck_assert_str_eq(thread_value("tenant"), "acme");

    /* Ended by another thread: refused, and the worker keeps its own. */
    struct worker w;
    worker_start(&w);
    w.scope = &scope;
    ck_assert_int_eq(worker_do(&w, (cpprof_task){0}, SCOPE_END),
                     CPPROF_ESCOPEMOVED);
    ck_assert_ptr_nonnull(strstr(cpprof_strerror(CPPROF_ESCOPEMOVED),
                                 "another thread or task"));
    cpprof_labelset *seen = NULL;
    census c;
    ck_assert_int_eq(census_take_labels(&c), 0);
    for (size_t i = 0; i < c.n; i++)
        if (c.threads[i].labels &&
            value_of(c.threads[i].labels, "thread") != NULL &&
            strcmp(value_of(c.threads[i].labels, "thread"), "worker") == 0)
            seen = cpprof_labelset_ref(c.threads[i].labels);
    census_release(&c);
    ck_assert_ptr_nonnull(seen);
    ck_assert_ptr_null(value_of(seen, "tenant"));
    cpprof_labelset_release(seen);
    worker_exit(&w);
    /* The thread it began on has its labels as they were at the end. */
    ck_assert_str_eq(thread_value("tenant"), "acme");
    ck_assert_int_eq(cpprof_set_thread_labels(mine), 0);
    cpprof_labelset_release(acme);
    cpprof_labelset_release(mine);
}
END_TEST

/* A fiber that runs cpprof_do, whose function switches back to the main
 * thread's context: resumed by the worker, it returns there. */
static ucontext_t main_ctx, fiber_ctx;
static int fiber_do_rc = 1;

static void switch_out(void *arg, const cpprof_labelset *labels)
{
    (void)arg;
    (void)labels;
    swapcontext(&fiber_ctx, &main_ctx);
}

static void fiber_main(void)
{
    cpprof_labelset *acme = make("tenant", "acme");
    fiber_do_rc = cpprof_do(NULL, acme, switch_out, NULL);
    cpprof_labelset_release(acme);
}

START_TEST(a_cpprof_do_across_a_fiber_switch_is_refused)
{
    static char stack[256 * 1024];
    struct worker w;
    worker_start(&w);
    ck_assert_int_eq(getcontext(&fiber_ctx), 0);
    fiber_ctx.uc_stack.ss_sp = stack;
    fiber_ctx.uc_stack.ss_size = sizeof stack;
    fiber_ctx.uc_link = &w.own; /* done: back to the worker */
    makecontext(&fiber_ctx, fiber_main, 0);
    ck_assert_int_eq(swapcontext(&main_ctx, &fiber_ctx), 0);
    ck_assert_str_eq(thread_value("tenant"), "acme"); /* the scope's, here */
    w.fiber = &fiber_ctx;
    ck_assert_int_eq(worker_do(&w, (cpprof_task){0}, RESUME), 0);
    ck_assert_int_eq(fiber_do_rc, CPPROF_ESCOPEMOVED);
    ck_assert_str_eq(thread_value("tenant"), "acme");
    worker_exit(&w);
    ck_assert_int_eq(cpprof_set_thread_labels(NULL), 0);
}
END_TEST

/* ---- Bad use ------------------------------------------------------------- */

START_TEST(ending_twice_is_refused)
{
    cpprof_labelset *a = make("tenant", "a"), *b = make("tenant", "b");
    cpprof_task first, second;
    ck_assert_int_eq(cpprof_task_create(&first, a), 0);
    ck_assert_int_eq(cpprof_task_end(first), 0);
    /* The record is reused by the next task: the stale handle must not
     * reach it. */
    ck_assert_int_eq(cpprof_task_create(&second, b), 0);
    ck_assert_uint_eq((uint32_t)second.id, (uint32_t)first.id);
    ck_assert_int_eq(cpprof_task_end(first), CPPROF_ETASKENDED);
    ck_assert_int_eq(cpprof_task_enter(first), CPPROF_ETASKENDED);
    ck_assert_int_eq(cpprof_task_leave(first, "io", 0), CPPROF_ETASKENDED);
    ck_assert_str_eq(cpprof_strerror(CPPROF_ETASKENDED),
                     "not a live task: it was ended already, or never "
                     "created");
    /* Nothing lost: the second task is whole. */
    ck_assert_int_eq(cpprof_task_enter(second), 0);
    ck_assert_str_eq(thread_value("tenant"), "b");
    ck_assert_int_eq(cpprof_task_leave(second, "io", 0), 0);
    ck_assert_int_eq(cpprof_task_end(second), 0);
    ck_assert_int_eq(cpprof_task_end(second), CPPROF_ETASKENDED);
    ck_assert_int_eq(cpprof_task_end((cpprof_task){0}), CPPROF_ETASKENDED);
    cpprof_labelset_release(a);
    cpprof_labelset_release(b);
}
END_TEST

START_TEST(entering_a_task_run_elsewhere_is_refused)
{
    cpprof_labelset *a = make("tenant", "a"), *mine = make("thread", "main");
    ck_assert_int_eq(cpprof_set_thread_labels(mine), 0);
    cpprof_task t;
    ck_assert_int_eq(cpprof_task_create(&t, a), 0);
    struct worker w;
    worker_start(&w);
    ck_assert_int_eq(worker_do(&w, t, ENTER), 0);
    ck_assert_int_eq(cpprof_task_enter(t), CPPROF_ETASKRUNNING);
    ck_assert_str_eq(thread_value("thread"), "main"); /* mine, unchanged */
    ck_assert_uint_eq(cpprof_task_current().id, 0);
    /* Neither can this thread leave or end it. */
    ck_assert_int_eq(cpprof_task_leave(t, "io", 0), CPPROF_ETASKNOTHERE);
    ck_assert_int_eq(cpprof_task_end(t), CPPROF_ETASKRUNNING);
    /* The worker still runs it, with its labels, and can leave it. */
    ck_assert_int_eq(worker_do(&w, t, LEAVE), 0);
    ck_assert_int_eq(cpprof_task_enter(t), 0);
    ck_assert_str_eq(thread_value("tenant"), "a");
    ck_assert_int_eq(cpprof_task_end(t), 0);
    worker_exit(&w);
    cpprof_labelset_release(a);
    cpprof_labelset_release(mine);
}
END_TEST

START_TEST(leaving_a_task_not_run_here_is_refused)
{
    cpprof_labelset *a = make("tenant", "a"), *b = make("tenant", "b");
    cpprof_task t, u;
    ck_assert_int_eq(cpprof_task_create(&t, a), 0);
    ck_assert_int_eq(cpprof_task_create(&u, b), 0);
    /* Parked: not run by anyone. */
    ck_assert_int_eq(cpprof_task_leave(t, "io", 0), CPPROF_ETASKNOTHERE);
    /* Running another: that one stays, with its labels. */
    ck_assert_int_eq(cpprof_task_enter(u), 0);
    ck_assert_int_eq(cpprof_task_leave(t, "io", 0), CPPROF_ETASKNOTHERE);
    ck_assert_uint_eq(cpprof_task_current().id, u.id);
    ck_assert_str_eq(thread_value("tenant"), "b");
    /* Tasks do not nest. */
    ck_assert_int_eq(cpprof_task_enter(t), CPPROF_ETASKBUSY);
    ck_assert_int_eq(cpprof_task_enter(u), CPPROF_ETASKBUSY);
    ck_assert_str_eq(thread_value("tenant"), "b");
    ck_assert_int_eq(cpprof_task_leave(u, "io", 0), 0);
    ck_assert_int_eq(cpprof_task_leave(u, "io", 0), CPPROF_ETASKNOTHERE);
    ck_assert_int_eq(cpprof_task_leave(u, "io", 2), -EINVAL);
    /* Both whole. */
    ck_assert_int_eq(cpprof_task_enter(t), 0);
    ck_assert_str_eq(thread_value("tenant"), "a");
    ck_assert_int_eq(cpprof_task_end(t), 0);
    ck_assert_int_eq(cpprof_task_end(u), 0);
    cpprof_labelset_release(a);
    cpprof_labelset_release(b);
}
END_TEST

/* The census's one group of parked tasks with `tenant`, or NULL. */
static const census_parked *parked_with(const census *c, const char *tenant)
{
    const census_parked *found = NULL;
    for (size_t i = 0; i < c->n_parked; i++) {
        const census_parked *p = &c->parked[i];
        const char *v = p->labels ? value_of(p->labels, "tenant") : NULL;
        if (v && strcmp(v, tenant) == 0) {
            ck_assert_ptr_null(found);
            found = p;
        }
    }
    return found;
}

START_TEST(a_thread_exiting_in_a_task_loses_nothing)
{
    cpprof_labelset *a = make("tenant", "exiting");
    cpprof_task t;
    ck_assert_int_eq(cpprof_task_create(&t, a), 0);
    struct worker w;
    worker_start(&w);
    ck_assert_int_eq(worker_do(&w, t, ENTER), 0);
    worker_exit(&w); /* still inside the task */
    census c;
    ck_assert_int_eq(census_take_stacks(&c), 0);
    const census_parked *p = parked_with(&c, "exiting");
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(p->count, 1);
    ck_assert_str_eq(p->reason, "thread exited");
    ck_assert_str_eq(value_of(p->labels, "pprof_wait"), "thread exited");
    census_release(&c);
    /* Enterable elsewhere, its labels whole. */
    ck_assert_int_eq(cpprof_task_enter(t), 0);
    ck_assert_str_eq(thread_value("tenant"), "exiting");
    ck_assert_int_eq(cpprof_task_end(t), 0);
    cpprof_labelset_release(a);
}
END_TEST

START_TEST(the_limit_is_refused_clearly)
{
    ck_assert_int_eq(cpprof_set("tasks_max", "3"), 0);
    cpprof_task t[4];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(cpprof_task_create(&t[i], NULL), 0);
    ck_assert_int_eq(cpprof_task_create(&t[3], NULL), CPPROF_ETASKLIMIT);
    ck_assert_uint_eq(t[3].id, 0);
    ck_assert_str_eq(cpprof_strerror(CPPROF_ETASKLIMIT),
                     "as many tasks are live as the tasks_max setting "
                     "allows");
    ck_assert_int_eq(cpprof_task_end(t[1]), 0);
    ck_assert_int_eq(cpprof_task_create(&t[3], NULL), 0);
    for (int i = 0; i < 4; i++)
        if (i != 1)
            ck_assert_int_eq(cpprof_task_end(t[i]), 0);
}
END_TEST

/* ---- The census ---------------------------------------------------------- */

/* Where the tasks park: the census must show this function. */
static __attribute__((noinline)) void wait_for_disk(cpprof_task t)
{
    ck_assert_int_eq(cpprof_task_leave(t, "io", 0), 0);
    __asm__ volatile(""); /* not a tail call */
}

/* Whether one of the stack's frames is in `function`. */
static bool stack_has(const census_parked *p, const char *function)
{
    symbolize_begin();
    bool found = false;
    for (unsigned i = 0; i < p->depth && !found; i++) {
        const symbolize_result *s = symbolize_pc(p->pcs[i] - (i > 0));
        for (size_t j = 0; j < s->nframes; j++)
            if (strcmp(s->frames[j].name, function) == 0)
                found = true;
    }
    symbolize_end();
    return found;
}

START_TEST(the_census_lists_parked_tasks)
{
    cpprof_labelset *a = make("tenant", "census-a"),
                    *b = make("tenant", "census-b");
    cpprof_task parked, runs;
    ck_assert_int_eq(cpprof_task_create(&parked, a), 0);
    ck_assert_int_eq(cpprof_task_create(&runs, b), 0);
    ck_assert_int_eq(cpprof_task_enter(parked), 0);
    wait_for_disk(parked);
    ck_assert_int_eq(cpprof_task_enter(runs), 0);
    census c;
    ck_assert_int_eq(census_take(&c), 0);
    const census_parked *p = parked_with(&c, "census-a");
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(p->count, 1);
    ck_assert_str_eq(p->reason, "io");
    ck_assert_str_eq(value_of(p->labels, "pprof_task"), "parked");
    ck_assert_str_eq(value_of(p->labels, "pprof_wait"), "io");
    ck_assert_uint_gt(p->depth, 0);
    ck_assert(stack_has(p, "wait_for_disk"));
    ck_assert(stack_has(p, "cpprof_task_leave"));
    /* census_take lists the task itself, in its group. */
    size_t listed = 0;
    for (size_t i = 0; i < c.n_tasks; i++)
        if (&c.parked[c.tasks[i].group] == p) {
            listed++;
            ck_assert_uint_gt(c.tasks[i].number, 0);
            ck_assert_int_ge(c.tasks[i].parked_ns, 0);
        }
    ck_assert_uint_eq(listed, 1);
    /* The running one is this thread, marked, with the task's labels. */
    ck_assert_ptr_null(parked_with(&c, "census-b"));
    pid_t me = gettid();
    bool seen = false;
    for (size_t i = 0; i < c.n; i++)
        if (c.threads[i].tid == me) {
            seen = true;
            ck_assert_str_eq(value_of(c.threads[i].labels, "tenant"),
                             "census-b");
            ck_assert_str_eq(value_of(c.threads[i].labels, "pprof_task"),
                             "running");
        }
    ck_assert(seen);
    census_release(&c);
    ck_assert_int_eq(cpprof_task_end(runs), 0);
    /* Without its stack: the reason says so. */
    ck_assert_int_eq(cpprof_task_enter(parked), 0);
    ck_assert_int_eq(cpprof_task_leave(parked, "timer", CPPROF_TASK_NO_STACK),
                     0);
    ck_assert_int_eq(census_take_stacks(&c), 0);
    p = parked_with(&c, "census-a");
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(p->depth, 0);
    ck_assert_str_eq(p->reason, "timer");
    ck_assert_str_eq(value_of(p->labels, "pprof_wait"), "timer");
    census_release(&c);
    ck_assert_int_eq(cpprof_task_end(parked), 0);
    ck_assert_int_eq(census_take_stacks(&c), 0);
    ck_assert_ptr_null(parked_with(&c, "census-a"));
    census_release(&c);
    cpprof_labelset_release(a);
    cpprof_labelset_release(b);
}
END_TEST

/* Parks t with `reason` at another place than wait_for_disk. */
static __attribute__((noinline)) void wait_elsewhere(cpprof_task t,
                                                     const char *reason)
{
    ck_assert_int_eq(cpprof_task_leave(t, reason, 0), 0);
    __asm__ volatile(""); /* not a tail call */
}

/* The census's groups with `tenant`: how many, the first `max` in g. */
static size_t groups_with(const census *c, const char *tenant,
                          const census_parked **g, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_parked; i++) {
        const census_parked *p = &c->parked[i];
        const char *v = p->labels ? value_of(p->labels, "tenant") : NULL;
        if (v && strcmp(v, tenant) == 0 && n++ < max)
            g[n - 1] = p;
    }
    return n;
}

START_TEST(the_census_groups_tasks_parked_alike)
{
    enum { ALIKE = 50, ALL = ALIKE + 2 };
    cpprof_labelset *a = make("tenant", "grouped");
    static const char *const reasons[ALL - ALIKE] = {"timer", "io"};
    cpprof_task t[ALL];
    for (int i = 0; i < ALL; i++) {
        ck_assert_int_eq(cpprof_task_create(&t[i], a), 0);
        ck_assert_int_eq(cpprof_task_enter(t[i]), 0);
        if (i < ALIKE)
            wait_for_disk(t[i]);
        else /* one stack, two reasons */
            wait_elsewhere(t[i], reasons[i - ALIKE]);
    }
    /* Without the list of tasks: a group per (stack, set, reason). */
    census c;
    ck_assert_int_eq(census_take_stacks(&c), 0);
    ck_assert_ptr_null(c.tasks);
    ck_assert_uint_eq(c.n_tasks, 0);
    ck_assert_uint_ge(c.parked_tasks, ALL);
    const census_parked *g[4];
    ck_assert_uint_eq(groups_with(&c, "grouped", g, 4), 3);
    ck_assert_uint_eq(g[0]->count, ALIKE);
    ck_assert_str_eq(g[0]->reason, "io");
    ck_assert(stack_has(g[0], "wait_for_disk"));
    for (int k = 1; k < 3; k++) {
        ck_assert_uint_eq(g[k]->count, 1);
        ck_assert(stack_has(g[k], "wait_elsewhere"));
        ck_assert_str_eq(value_of(g[k]->labels, "pprof_wait"),
                         k == 1 ? "timer" : "io");
    }
    ck_assert_uint_eq(g[1]->depth, g[2]->depth);
    ck_assert_mem_eq(g[1]->pcs, g[2]->pcs, g[1]->depth * sizeof *g[1]->pcs);
    census_release(&c);
    /* With it: every task once, in its group, in order of creation. */
    ck_assert_int_eq(census_take(&c), 0);
    ck_assert_uint_eq(groups_with(&c, "grouped", g, 4), 3);
    ck_assert_uint_eq(c.n_tasks, c.parked_tasks);
    size_t listed[3] = {0};
    uint64_t last = 0;
    for (size_t i = 0; i < c.n_tasks; i++)
        for (int k = 0; k < 3; k++)
            if (&c.parked[c.tasks[i].group] == g[k]) {
                listed[k]++;
                ck_assert_uint_gt(c.tasks[i].number, last);
                last = c.tasks[i].number;
            }
    ck_assert_uint_eq(listed[0], ALIKE);
    ck_assert_uint_eq(listed[1], 1);
    ck_assert_uint_eq(listed[2], 1);
    census_release(&c);
    for (int i = 0; i < ALL; i++)
        ck_assert_int_eq(cpprof_task_end(t[i]), 0);
    cpprof_labelset_release(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tasks");
    TCase *tc = tcase_create("tasks");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, labels_move_with_the_task);
    tcase_add_test(tc, a_scope_spans_the_tasks_moves);
    tcase_add_test(tc, a_scope_moved_without_a_task_is_refused);
#ifndef __SANITIZE_THREAD__
    /* TSan cannot follow a context resumed on another thread (it faults
     * in its own shadow stack): the scope's refusal is the case above. */
    tcase_add_test(tc, a_cpprof_do_across_a_fiber_switch_is_refused);
#endif
    tcase_add_test(tc, ending_twice_is_refused);
    tcase_add_test(tc, entering_a_task_run_elsewhere_is_refused);
    tcase_add_test(tc, leaving_a_task_not_run_here_is_refused);
    tcase_add_test(tc, a_thread_exiting_in_a_task_loses_nothing);
    tcase_add_test(tc, the_limit_is_refused_clearly);
    tcase_add_test(tc, the_census_lists_parked_tasks);
    tcase_add_test(tc, the_census_groups_tasks_parked_alike);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
