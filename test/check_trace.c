/*
 * check_trace.c -- the trace recorder (trace.h): what a window holds, in
 * order, and what it refuses.
 *
 *   - label switches (cpprof_do, cpprof_set_thread_labels), regions and
 *     logs are recorded in order on their thread, with their texts, and
 *     the set a thread held before the window opens it;
 *   - a task's enter and leave (with the park reason) and the switches to
 *     and from its labels;
 *   - threads started during the window: their start (with name) and exit;
 *   - a second window while one is open is refused (-EBUSY); NULL names
 *     are -EINVAL; with nothing recording the calls record nothing;
 *   - a thread waiting for the thread registry's own lock while a trace
 *     records (every wait traced: trace_lock_us=0) is recorded without
 *     taking that lock again (the soak once hung there);
 *   - buffers full (trace_kb at its least): later events are dropped and
 *     counted, the window keeps its beginning, memory stays bounded;
 *   - the recorder keeps copies of the sets it shows, not the sets: a
 *     window over ten times the label cap's sets, each released after its
 *     switch, folds none (issue 44) and still shows every one; a long
 *     value is cut at a character's start.
 */
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "cpprof.h"
#include "labels.h"
#include "thread.h"
#include "trace.h"
#include "util.h"
#include "check_pair.h"

/* The value of `key` in the snapshot's set number n, or NULL. */
static const char *value_in(const trace_snapshot *s, uint32_t n,
                            const char *key)
{
    ck_assert_uint_lt(n, s->n_sets);
    for (size_t i = 0; i < s->sets[n].n; i++)
        if (strcmp(s->sets[n].kv[2 * i], key) == 0)
            return s->sets[n].kv[2 * i + 1];
    return NULL;
}

/* The snapshot's events of thread tid, in order, into out (at most max);
 * how many. */
static size_t events_of(const trace_snapshot *s, pid_t tid,
                        const trace_event **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_events && n < max; i++)
        if (s->events[i].tid == tid)
            out[n++] = &s->events[i];
    return n;
}

static trace_snapshot *take(int64_t start)
{
    trace_snapshot *s;
    ck_assert_int_eq(trace_snapshot_take(start, clock_mono_ns(), false, &s),
                     0);
    for (size_t i = 1; i < s->n_events; i++)
        ck_assert_int_le(s->events[i - 1].ts, s->events[i].ts);
    return s;
}

static void job(void *arg, const cpprof_labelset *labels)
{
    (void)arg;
    (void)labels;
    ck_assert_int_eq(cpprof_trace_region_begin("reindex"), 0);
    ck_assert_int_eq(cpprof_trace_log("progress", "half done"), 0);
    ck_assert_int_eq(cpprof_trace_region_end("reindex"), 0);
}

START_TEST(a_window_records_switches_regions_and_logs_in_order)
{
    cpprof_labelset *before = make("tenant", "initech");
    cpprof_labelset *acme = make("tenant", "acme");
    ck_assert_int_eq(cpprof_set_thread_labels(before), 0);
    int64_t start;
    ck_assert_int_eq(trace_window_begin(&start), 0);
    ck_assert_int_eq(cpprof_do(NULL, acme, job, NULL), 0);
    trace_snapshot *s = take(start);
    trace_window_end();

    const trace_event *e[16];
    size_t n = events_of(s, thread_self_tid(), e, 16);
    ck_assert_uint_eq(n, 6);
    /* The set held before the window, at its start (read through the
     * recorder's tick clock, whose match with CLOCK_MONOTONIC is read
     * within microseconds; more when the machine is loaded). */
    ck_assert_int_eq(e[0]->kind, TRACE_LABELS);
    ck_assert_int_lt(llabs(e[0]->ts - start), 100000);
    ck_assert_str_eq(value_in(s, e[0]->labels, "tenant"), "initech");
    ck_assert_int_eq(e[1]->kind, TRACE_LABELS);
    ck_assert_str_eq(value_in(s, e[1]->labels, "tenant"), "acme");
    ck_assert_int_eq(e[2]->kind, TRACE_REGION_BEGIN);
    ck_assert_str_eq(e[2]->text, "reindex");
    ck_assert_int_eq(e[3]->kind, TRACE_LOG);
    ck_assert_str_eq(e[3]->text, "progress");
    ck_assert_str_eq(e[3]->text2, "half done");
    ck_assert_int_eq(e[4]->kind, TRACE_REGION_END);
    ck_assert_int_eq(e[5]->kind, TRACE_LABELS);
    ck_assert_str_eq(value_in(s, e[5]->labels, "tenant"), "initech");
    ck_assert_int_eq(s->dropped, 0);
    ck_assert(!s->flight);
    bool listed = false;
    for (size_t i = 0; i < s->n_threads; i++)
        listed |= s->threads[i].tid == thread_self_tid() &&
                  s->threads[i].alive;
    ck_assert(listed);
    trace_snapshot_free(s);
    cpprof_labelset_release(before);
    cpprof_labelset_release(acme);
}
END_TEST

START_TEST(a_task_s_enter_and_leave_are_recorded_with_its_reason)
{
    cpprof_labelset *globex = make("tenant", "globex");
    cpprof_task task;
    ck_assert_int_eq(cpprof_task_create(&task, globex), 0);
    int64_t start;
    ck_assert_int_eq(trace_window_begin(&start), 0);
    ck_assert_int_eq(cpprof_task_enter(task), 0);
    ck_assert_int_eq(cpprof_task_leave(task, "io", CPPROF_TASK_NO_STACK), 0);
    trace_snapshot *s = take(start);
    trace_window_end();

    const trace_event *e[16];
    size_t n = events_of(s, thread_self_tid(), e, 16);
    size_t at = 0;
    while (at < n && e[at]->kind != TRACE_TASK_ENTER)
        at++;
    ck_assert_uint_le(at + 4, n);
    uint64_t number = e[at]->task;
    ck_assert_uint_gt(number, 0);
    ck_assert_int_eq(e[at + 1]->kind, TRACE_LABELS);
    ck_assert_str_eq(value_in(s, e[at + 1]->labels, "tenant"), "globex");
    ck_assert_int_eq(e[at + 2]->kind, TRACE_TASK_LEAVE);
    ck_assert_uint_eq(e[at + 2]->task, number);
    ck_assert_str_eq(e[at + 2]->text, "io");
    ck_assert_int_eq(e[at + 3]->kind, TRACE_LABELS);
    ck_assert_ptr_null(value_in(s, e[at + 3]->labels, "tenant"));
    ck_assert_uint_eq(s->n_tasks, 1);
    ck_assert_uint_eq(s->tasks[0].number, number);
    ck_assert_str_eq(value_in(s, s->tasks[0].labels, "tenant"), "globex");
    trace_snapshot_free(s);
    ck_assert_int_eq(cpprof_task_end(task), 0);
    cpprof_labelset_release(globex);
}
END_TEST

static void *named_thread(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "traced-worker");
    cpprof_labelset *set = make("tenant", "umbrella");
    cpprof_set_thread_labels(set);
    cpprof_labelset_release(set);
    return (void *)(intptr_t)thread_self_tid();
}

START_TEST(a_thread_started_in_the_window_has_its_start_and_exit)
{
    int64_t start;
    ck_assert_int_eq(trace_window_begin(&start), 0);
    pthread_t t;
    void *tid;
    ck_assert_int_eq(pthread_create(&t, NULL, named_thread, NULL), 0);
    ck_assert_int_eq(pthread_join(t, &tid), 0);
    trace_snapshot *s = take(start);
    trace_window_end();
    const trace_event *e[16];
    size_t n = events_of(s, (pid_t)(intptr_t)tid, e, 16);
    ck_assert_uint_ge(n, 3);
    ck_assert_int_eq(e[0]->kind, TRACE_THREAD_START);
    ck_assert_int_eq(e[n - 1]->kind, TRACE_THREAD_EXIT);
    bool umbrella = false;
    for (size_t i = 0; i < n; i++)
        umbrella |= e[i]->kind == TRACE_LABELS && e[i]->labels &&
                    value_in(s, e[i]->labels, "tenant") &&
                    strcmp(value_in(s, e[i]->labels, "tenant"),
                           "umbrella") == 0;
    ck_assert(umbrella);
    bool named = false;
    for (size_t i = 0; i < s->n_threads; i++)
        if (s->threads[i].tid == (pid_t)(intptr_t)tid)
            named = strcmp(s->threads[i].name, "traced-worker") == 0 &&
                    !s->threads[i].alive;
    ck_assert(named);
    trace_snapshot_free(s);
}
END_TEST

static void *labelled_briefly(void *arg)
{
    cpprof_set_thread_labels(arg); /* registers the thread: its lock */
    return NULL;
}

static void *start_many(void *arg)
{
    for (int i = 0; i < 200; i++) {
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, labelled_briefly, arg), 0);
        ck_assert_int_eq(pthread_join(t, NULL), 0);
    }
    return NULL;
}

START_TEST(a_wait_inside_the_registry_is_recorded_without_deadlock)
{
    ck_assert_int_eq(cpprof_set("trace_lock_us", "0"), 0);
    cpprof_labelset *acme = make("tenant", "acme");
    int64_t start;
    ck_assert_int_eq(trace_window_begin(&start), 0);
    pthread_t starters[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&starters[i], NULL, start_many, acme),
                         0);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_join(starters[i], NULL), 0);
    trace_snapshot *s = take(start);
    trace_window_end();
    size_t starts = 0;
    for (size_t i = 0; i < s->n_events; i++)
        starts += s->events[i].kind == TRACE_THREAD_START;
    ck_assert_uint_ge(starts, 800);
    trace_snapshot_free(s);
    cpprof_labelset_release(acme);
}
END_TEST

START_TEST(a_second_window_is_refused_and_bad_input_too)
{
    int64_t start, again;
    ck_assert_int_eq(cpprof_trace_region_begin("before any window"), 0);
    ck_assert_int_eq(trace_window_begin(&start), 0);
    ck_assert_int_eq(trace_window_begin(&again), -EBUSY);
    ck_assert_int_eq(cpprof_trace_region_begin(NULL), -EINVAL);
    ck_assert_int_eq(cpprof_trace_region_end(NULL), -EINVAL);
    ck_assert_int_eq(cpprof_trace_log("c", NULL), -EINVAL);
    ck_assert_int_eq(cpprof_trace_log(NULL, "no category"), 0);
    trace_snapshot *s = take(start);
    trace_window_end();
    const trace_event *e[16];
    size_t n = events_of(s, thread_self_tid(), e, 16);
    size_t logs = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_ne(e[i]->kind, TRACE_REGION_BEGIN);
        logs += e[i]->kind == TRACE_LOG;
    }
    ck_assert_uint_eq(logs, 1);
    trace_snapshot_free(s);
    ck_assert_int_eq(cpprof_trace_flight_write(1), CPPROF_ENOTRACE);
}
END_TEST

START_TEST(full_buffers_drop_later_events_and_count_them)
{
    ck_assert_int_eq(cpprof_set("trace_kb", "256"), 0);
    cpprof_labelset *acme = make("tenant", "acme");
    int64_t start;
    ck_assert_int_eq(trace_window_begin(&start), 0);
    enum { SWITCHES = 100000 };
    for (int i = 0; i < SWITCHES; i++) {
        ck_assert_int_eq(cpprof_set_thread_labels(i % 2 ? acme : NULL), 0);
    }
    int64_t mid = clock_mono_ns();
    ck_assert_int_eq(cpprof_trace_log("late", "after the buffers filled"),
                     0);
    trace_snapshot *s = take(start);
    trace_window_end();
    /* 256 KiB of 32-byte records: at most 8,192 kept. */
    ck_assert_uint_le(s->n_events, 256 * 1024 / 32);
    ck_assert_uint_gt(s->n_events, 1000);
    ck_assert_int_ge(s->dropped, SWITCHES - 256 * 1024 / 32);
    for (size_t i = 0; i < s->n_events; i++)
        ck_assert_int_lt(s->events[i].ts, mid); /* the beginning kept */
    trace_snapshot_free(s);
    cpprof_labelset_release(acme);
}
END_TEST

START_TEST(a_trace_keeps_copies_of_sets_not_the_sets)
{
    enum { CAP = 100, SETS = 10 * CAP };
    ck_assert_int_eq(cpprof_set("label_cap", "100"), 0);
    unsigned long folded = cpprof_labelsets_folded();
    int64_t start;
    ck_assert_int_eq(trace_window_begin(&start), 0);
    for (int i = 0; i < SETS; i++) {
        char job[16];
        snprintf(job, sizeof job, "%d", i);
        cpprof_labelset *set = make("job", job);
        ck_assert_int_eq(cpprof_set_thread_labels(set), 0);
        cpprof_labelset_release(set);
    }
    ck_assert_int_eq(cpprof_set_thread_labels(NULL), 0);
    ck_assert_uint_eq(cpprof_labelsets_folded(), folded);
    trace_snapshot *s = take(start);
    trace_window_end();
    static bool seen[SETS];
    size_t distinct = 0;
    for (size_t i = 0; i < s->n_events; i++) {
        const trace_event *e = &s->events[i];
        const char *job = e->kind == TRACE_LABELS && e->labels
                              ? value_in(s, e->labels, "job")
                              : NULL;
        int n = job ? atoi(job) : -1;
        if (n >= 0 && n < SETS && !seen[n])
            seen[n] = true, distinct++;
    }
    ck_assert_uint_eq(distinct, SETS);
    trace_snapshot_free(s);
}
END_TEST

START_TEST(a_long_label_is_cut_at_a_character_s_start)
{
    char value[601]; /* 300 two-byte characters (U+00E9) */
    for (int i = 0; i < 300; i++)
        value[2 * i] = (char)0xc3, value[2 * i + 1] = (char)0xa9;
    value[600] = '\0';
    cpprof_labelset *set = make("long", value);
    int64_t start;
    ck_assert_int_eq(trace_window_begin(&start), 0);
    ck_assert_int_eq(cpprof_set_thread_labels(set), 0);
    ck_assert_int_eq(cpprof_set_thread_labels(NULL), 0);
    trace_snapshot *s = take(start);
    trace_window_end();
    const char *shown = NULL;
    for (size_t i = 0; i < s->n_events && !shown; i++)
        if (s->events[i].kind == TRACE_LABELS && s->events[i].labels)
            shown = value_in(s, s->events[i].labels, "long");
    ck_assert_ptr_nonnull(shown);
    ck_assert_uint_eq(strlen(shown), 254);
    ck_assert_int_eq(strncmp(shown, value, 254), 0);
    trace_snapshot_free(s);
    cpprof_labelset_release(set);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("recorder");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_window_records_switches_regions_and_logs_in_order);
    tcase_add_test(tc, a_task_s_enter_and_leave_are_recorded_with_its_reason);
    tcase_add_test(tc, a_thread_started_in_the_window_has_its_start_and_exit);
    tcase_add_test(tc, a_second_window_is_refused_and_bad_input_too);
    tcase_add_test(tc, a_wait_inside_the_registry_is_recorded_without_deadlock);
    tcase_add_test(tc, full_buffers_drop_later_events_and_count_them);
    tcase_add_test(tc, a_trace_keeps_copies_of_sets_not_the_sets);
    tcase_add_test(tc, a_long_label_is_cut_at_a_character_s_start);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
