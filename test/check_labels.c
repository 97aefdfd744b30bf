/*
 * check_labels.c -- unit tests of the label API (Go's runtime/pprof labels
 * in C): building, deriving, looking up, iterating, printing, scoped and
 * unscoped application, restore on return / C++ exception / pthread_cancel,
 * inheritance into new threads, bad input, the cardinality cap and the
 * thread registry.
 */
#define _GNU_SOURCE
#include <check.h>
#include <cpprof.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "labels.h"
#include "thread.h"

cpprof_labelset *cxx_do_and_catch(const cpprof_labelset *labels, int *caught);

static cpprof_labelset *make(size_t n, const char *const *kv)
{
    cpprof_labelset *s = NULL;
    ck_assert_int_eq(cpprof_labels(&s, n, kv), 0);
    return s;
}

static const char *value_of(const cpprof_labelset *s, const char *key)
{
    const char *v;
    bool found;
    ck_assert_int_eq(cpprof_label(s, key, &v, &found), 0);
    return found ? v : NULL;
}

static char printed[256];
static const char *print(const cpprof_labelset *s)
{
    ck_assert_int_ge(cpprof_labelset_format(s, printed, sizeof printed), 0);
    return printed;
}

/* ---- Building ----------------------------------------------------------- */

START_TEST(sorted_and_later_duplicate_wins)
{
    const char *kv[] = {"tenant", "acme", "kind", "reindex", "tenant", "globex"};
    cpprof_labelset *s = make(6, kv);
    ck_assert_uint_eq(cpprof_labelset_size(s), 2);
    ck_assert_str_eq(labelset_key(s, 0), "kind");
    ck_assert_str_eq(labelset_key(s, 1), "tenant");
    ck_assert_str_eq(value_of(s, "tenant"), "globex");
    ck_assert_str_eq(print(s), "{\"kind\":\"reindex\", \"tenant\":\"globex\"}");
    cpprof_labelset_release(s);
}
END_TEST

START_TEST(interned_by_content)
{
    const char *a[] = {"k1", "v1", "k2", "v2"}, *b[] = {"k2", "v2", "k1", "v1"};
    const char *c[] = {"k1", "v1", "k2", "other"};
    cpprof_labelset *x = make(4, a), *y = make(4, b), *z = make(4, c);
    ck_assert_ptr_eq(x, y);
    ck_assert_ptr_ne(x, z);
    cpprof_labelset_release(x);
    cpprof_labelset_release(y);
    cpprof_labelset_release(z);
}
END_TEST

START_TEST(empty_set_is_null)
{
    cpprof_labelset *s = (cpprof_labelset *)1;
    ck_assert_int_eq(cpprof_labels(&s, 0, NULL), 0);
    ck_assert_ptr_null(s);
    ck_assert_uint_eq(cpprof_labelset_size(NULL), 0);
    ck_assert_str_eq(print(NULL), "{}");
    ck_assert_ptr_null(value_of(NULL, "tenant"));
}
END_TEST

START_TEST(with_labels_child_overrides_parent_unchanged)
{
    const char *p[] = {"tenant", "acme", "kind", "reindex"};
    const char *c[] = {"tenant", "globex", "region", "eu"};
    cpprof_labelset *parent = make(4, p), *child = NULL;
    ck_assert_int_eq(cpprof_labels_with(&child, parent, 4, c), 0);
    ck_assert_str_eq(print(child), "{\"kind\":\"reindex\", \"region\":\"eu\", "
                                   "\"tenant\":\"globex\"}");
    ck_assert_str_eq(print(parent), "{\"kind\":\"reindex\", \"tenant\":\"acme\"}");
    cpprof_labelset_release(child);
    cpprof_labelset_release(parent);
}
END_TEST

START_TEST(format_quotes_like_go)
{
    const char *kv[] = {"q", "a\"b\\c\nd\x01"};
    cpprof_labelset *s = make(2, kv);
    ck_assert_str_eq(print(s), "{\"q\":\"a\\\"b\\\\c\\nd\\x01\"}");
    char small[5];
    int need = cpprof_labelset_format(s, small, sizeof small);
    ck_assert_int_eq(need, (int)strlen(printed));
    ck_assert_str_eq(small, "{\"q\"");
    cpprof_labelset_release(s);
}
END_TEST

/* Names (a thread's, a function's) are not repaired as labels are: the
 * escape itself keeps invalid UTF-8 and control bytes out of a text form,
 * quoted as Go's %q or bare, and keeps valid UTF-8 as it is. */
START_TEST(text_escape_quoted_and_bare)
{
    const char *name = "q\"\\\n\t\r\x01\x7f\xff\xc3(caf\xc3\xa9";
    char out[128];
    size_t need = text_escape(out, sizeof out, 0, name, true);
    ck_assert_uint_eq(need, strlen(out));
    ck_assert_str_eq(out, "\"q\\\"\\\\\\n\\t\\r\\x01\\x7f\\xff\\xc3(caf\xc3\xa9\"");
    text_escape(out, sizeof out, 0, name, false);
    ck_assert_str_eq(out, "q\"\\\\n\\t\\r\\x01\\x7f\\xff\\xc3(caf\xc3\xa9");
    char small[4];
    ck_assert_uint_eq(text_escape(small, sizeof small, 0, "\n\n", true), 6);
    ck_assert_str_eq(small, "\"\\n");
}
END_TEST

/* ---- Bad input ----------------------------------------------------------- */

START_TEST(bad_input_returns_codes)
{
    cpprof_labelset *s = (cpprof_labelset *)1;
    const char *odd[] = {"tenant", "acme", "kind"};
    const char *nullkey[] = {NULL, "x"}, *emptykey[] = {"", "x"};
    const char *nullvalue[] = {"tenant", NULL};
    ck_assert_int_eq(cpprof_labels(&s, 3, odd), CPPROF_EUNEVEN);
    ck_assert_ptr_null(s);
    ck_assert_int_eq(cpprof_labels(&s, 2, nullkey), CPPROF_ENULLKEY);
    ck_assert_int_eq(cpprof_labels(&s, 2, emptykey), CPPROF_EEMPTYKEY);
    ck_assert_int_eq(cpprof_labels(&s, 2, nullvalue), CPPROF_ENULLVALUE);
    ck_assert_int_eq(cpprof_labels(&s, 2, NULL), -EINVAL);
    ck_assert_int_eq(cpprof_labels(NULL, 0, NULL), -EINVAL);
    ck_assert_int_eq(cpprof_labels_with(&s, NULL, 1, odd), CPPROF_EUNEVEN);
    ck_assert_int_eq(cpprof_do(NULL, NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(cpprof_labels_foreach(NULL, NULL, NULL), -EINVAL);
    const char *v;
    bool found;
    ck_assert_int_eq(cpprof_label(NULL, NULL, &v, &found), -EINVAL);
    ck_assert_int_eq(cpprof_thread_create(NULL, NULL, NULL, NULL), -EINVAL);
    ck_assert(strstr(cpprof_strerror(CPPROF_EUNEVEN), "uneven"));
    ck_assert(strstr(cpprof_strerror(CPPROF_ENULLVALUE), "NULL"));
    ck_assert_str_eq(cpprof_strerror(-EINVAL), "Invalid argument");
    ck_assert_str_eq(cpprof_strerror(12345), "unknown cpprof error");
}
END_TEST

START_TEST(settings_reject_bad_values)
{
    ck_assert_int_eq(cpprof_set("no_such", "1"), CPPROF_ESETTING);
    ck_assert_int_eq(cpprof_set("cpu_hz", "0"), CPPROF_EVALUE);
    ck_assert_int_eq(cpprof_set("cpu_hz", "1001"), CPPROF_EVALUE);
    ck_assert_int_eq(cpprof_set("cpu_hz", "10x"), CPPROF_EVALUE);
    ck_assert_int_eq(cpprof_set("cpu_hz", ""), CPPROF_EVALUE);
    ck_assert_int_eq(cpprof_set("http_addr", "nocolon"), CPPROF_EVALUE);
    ck_assert_int_eq(cpprof_set("http_addr", "127.0.0.1:70000"), CPPROF_EVALUE);
    ck_assert_int_eq(cpprof_set("cpu_signal", "9"), CPPROF_EVALUE);
    ck_assert_int_eq(cpprof_set("cpu_hz", "250"), 0);
    ck_assert_int_eq(cpprof_set("cpu_hz", "100"), 0);
}
END_TEST

/* ---- Lookup and iteration -------------------------------------------------- */

struct collected {
    char text[128];
    int calls, stop_after;
};

static bool collect(const char *k, const char *v, void *arg)
{
    struct collected *c = arg;
    size_t at = strlen(c->text);
    snprintf(c->text + at, sizeof c->text - at, "%s=%s;", k, v);
    return ++c->calls != c->stop_after;
}

/* Bytes that are not valid UTF-8 (a lone continuation byte, a cut-short
 * sequence, an overlong form, a surrogate) are stored as U+FFFD each, valid
 * multi-byte text is kept, and sets differing only in how their text was
 * broken are one set. */
START_TEST(invalid_utf8_stored_as_replacement)
{
    const char *kv[] = {"k\xc3", "\x80" "a\xe2\x82", "ok", "\xc0\xafz\xed\xa0\x80",
                        "fine", "caf\xc3\xa9 \xf0\x9f\x98\x80"};
    cpprof_labelset *s = make(6, kv);
    ck_assert_str_eq(value_of(s, "k\xef\xbf\xbd"),
                     "\xef\xbf\xbd" "a" "\xef\xbf\xbd\xef\xbf\xbd");
    ck_assert_str_eq(value_of(s, "ok"), "\xef\xbf\xbd\xef\xbf\xbdz"
                     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    ck_assert_str_eq(value_of(s, "fine"), "caf\xc3\xa9 \xf0\x9f\x98\x80");
    const char *other[] = {"k\xff", "\xfe" "a\xc3\xc3", "ok",
                           "\xc0\xafz\xed\xa0\x80", "fine",
                           "caf\xc3\xa9 \xf0\x9f\x98\x80"};
    cpprof_labelset *t = make(6, other);
    ck_assert_ptr_eq(s, t);
    cpprof_labelset_release(t);
    cpprof_labelset_release(s);
}
END_TEST

START_TEST(foreach_in_key_order_with_early_stop)
{
    const char *kv[] = {"c", "3", "a", "1", "b", "2"};
    cpprof_labelset *s = make(6, kv);
    struct collected all = {"", 0, -1}, first = {"", 0, 1};
    ck_assert_int_eq(cpprof_labels_foreach(s, collect, &all), 0);
    ck_assert_str_eq(all.text, "a=1;b=2;c=3;");
    ck_assert_int_eq(cpprof_labels_foreach(s, collect, &first), 0);
    ck_assert_str_eq(first.text, "a=1;");
    ck_assert_str_eq(value_of(s, "b"), "2");
    ck_assert_ptr_null(value_of(s, "d"));
    ck_assert_ptr_null(value_of(s, ""));
    cpprof_labelset_release(s);
}
END_TEST

/* ---- Applying to threads ------------------------------------------------- */

struct seen {
    const cpprof_labelset *arg_set;
    cpprof_labelset *thread_set;
};

static void record(void *arg, const cpprof_labelset *labels)
{
    struct seen *s = arg;
    s->arg_set = labels;
    s->thread_set = cpprof_thread_labels();
}

START_TEST(do_applies_merged_and_restores)
{
    const char *outer_kv[] = {"tenant", "acme", "kind", "reindex"};
    const char *inner_kv[] = {"kind", "export"};
    cpprof_labelset *outer = make(4, outer_kv), *inner = make(2, inner_kv);
    ck_assert_int_eq(cpprof_set_thread_labels(outer), 0);
    struct seen s = {0};
    ck_assert_int_eq(cpprof_do(NULL, inner, record, &s), 0);
    ck_assert_ptr_eq(s.arg_set, s.thread_set);
    ck_assert_str_eq(print(s.thread_set),
                     "{\"kind\":\"export\", \"tenant\":\"acme\"}");
    cpprof_labelset *after = cpprof_thread_labels();
    ck_assert_ptr_eq(after, outer);
    /* An explicit parent replaces the thread's set as the base. */
    ck_assert_int_eq(cpprof_do(inner, NULL, record, &s), 0);
    ck_assert_ptr_eq(s.thread_set, inner);
    cpprof_labelset_release(s.thread_set);
    ck_assert_int_eq(cpprof_set_thread_labels(NULL), 0);
    ck_assert_ptr_null(thread_current_labels());
    cpprof_labelset_release(after);
    cpprof_labelset_release(outer);
    cpprof_labelset_release(inner);
}
END_TEST

static void set_inside(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    cpprof_set_thread_labels(arg);
}

START_TEST(do_restores_after_set_inside_scope)
{
    const char *a_kv[] = {"tenant", "acme"}, *b_kv[] = {"tenant", "globex"};
    const char *c_kv[] = {"tenant", "initech"};
    cpprof_labelset *a = make(2, a_kv), *b = make(2, b_kv), *c = make(2, c_kv);
    cpprof_set_thread_labels(a);
    ck_assert_int_eq(cpprof_do(NULL, b, set_inside, c), 0);
    ck_assert_ptr_eq(thread_current_labels(), a);
    cpprof_set_thread_labels(NULL);
    cpprof_labelset_release(a);
    cpprof_labelset_release(b);
    cpprof_labelset_release(c);
}
END_TEST

START_TEST(do_restores_after_cxx_exception)
{
    const char *a_kv[] = {"tenant", "acme"}, *b_kv[] = {"kind", "export"};
    cpprof_labelset *a = make(2, a_kv), *b = make(2, b_kv);
    cpprof_set_thread_labels(a);
    int caught;
    cpprof_labelset *in_catch = cxx_do_and_catch(b, &caught);
    ck_assert_int_eq(caught, 1);
    ck_assert_ptr_eq(in_catch, a);
    cpprof_labelset_release(in_catch);
    cpprof_set_thread_labels(NULL);
    cpprof_labelset_release(a);
    cpprof_labelset_release(b);
}
END_TEST

static pthread_barrier_t in_scope;
static cpprof_labelset *at_cancel_cleanup;

static void wait_for_cancel(void *arg, const cpprof_labelset *labels)
{
    (void)arg, (void)labels;
    pthread_barrier_wait(&in_scope);
    for (;;)
        pause(); /* a cancellation point */
}

static void note_labels_at_cleanup(void *arg)
{
    (void)arg;
    at_cancel_cleanup = cpprof_thread_labels();
}

static void *cancelled_thread(void *arg)
{
    cpprof_set_thread_labels(arg);
    pthread_cleanup_push(note_labels_at_cleanup, NULL);
    const char *kv[] = {"kind", "export"};
    cpprof_labelset *b;
    cpprof_labels(&b, 2, kv);
    cpprof_do(NULL, b, wait_for_cancel, NULL);
    pthread_cleanup_pop(0);
    return NULL;
}

START_TEST(do_restores_after_pthread_cancel)
{
    const char *a_kv[] = {"tenant", "acme"};
    cpprof_labelset *a = make(2, a_kv);
    pthread_t t;
    pthread_barrier_init(&in_scope, NULL, 2);
    ck_assert_int_eq(pthread_create(&t, NULL, cancelled_thread, a), 0);
    pthread_barrier_wait(&in_scope);
    pthread_cancel(t);
    void *ret;
    pthread_join(t, &ret);
    ck_assert_ptr_eq(ret, PTHREAD_CANCELED);
    /* The outer cleanup handler ran after cpprof_do's restore. */
    ck_assert_ptr_eq(at_cancel_cleanup, a);
    cpprof_labelset_release(at_cancel_cleanup);
    pthread_barrier_destroy(&in_scope);
    cpprof_labelset_release(a);
}
END_TEST

static void *report_labels(void *arg)
{
    (void)arg;
    return cpprof_thread_labels();
}

START_TEST(new_thread_inherits_creator_labels)
{
    const char *kv[] = {"tenant", "initech"};
    cpprof_labelset *s = make(2, kv);
    cpprof_set_thread_labels(s);
    pthread_t t;
    ck_assert_int_eq(cpprof_thread_create(&t, NULL, report_labels, NULL), 0);
    /* The creator changing its labels afterwards does not affect the child. */
    cpprof_set_thread_labels(NULL);
    void *child;
    pthread_join(t, &child);
    ck_assert_ptr_eq(child, s);
    cpprof_labelset_release(child);
    /* A plain pthread inherits them too, unless the setting
     * inherit_labels is off (test/check_inherit has the census and CPU
     * profile). */
    cpprof_set_thread_labels(s);
    pthread_create(&t, NULL, report_labels, NULL);
    pthread_join(t, &child);
    ck_assert_ptr_eq(child, s);
    cpprof_labelset_release(child);
    ck_assert_int_eq(cpprof_set("inherit_labels", "0"), 0);
    pthread_create(&t, NULL, report_labels, NULL);
    pthread_join(t, &child);
    ck_assert_ptr_null(child);
    ck_assert_int_eq(cpprof_set("inherit_labels", "1"), 0);
    cpprof_set_thread_labels(NULL);
    cpprof_labelset_release(s);
}
END_TEST

/* ---- Registry ----------------------------------------------------------- */

static pthread_barrier_t registered, may_exit;
static pid_t worker_tid;

static void *labelled_worker(void *arg)
{
    cpprof_set_thread_labels(arg);
    worker_tid = gettid();
    pthread_barrier_wait(&registered);
    pthread_barrier_wait(&may_exit);
    return NULL;
}

START_TEST(exiting_thread_leaves_registry)
{
    const char *kv[] = {"tenant", "globex"};
    cpprof_labelset *s = make(2, kv);
    size_t before = registry_count();
    pthread_barrier_init(&registered, NULL, 2);
    pthread_barrier_init(&may_exit, NULL, 2);
    pthread_t t;
    pthread_create(&t, NULL, labelled_worker, s);
    pthread_barrier_wait(&registered);
    ck_assert_uint_eq(registry_count(), before + 1);
    cpprof_labelset *seen = registry_labels_of(worker_tid);
    ck_assert_ptr_eq(seen, s);
    labelset_drop(seen);
    pthread_barrier_wait(&may_exit);
    pthread_join(t, NULL);
    ck_assert_uint_eq(registry_count(), before);
    ck_assert_ptr_null(registry_labels_of(worker_tid));
    pthread_barrier_destroy(&registered);
    pthread_barrier_destroy(&may_exit);
    cpprof_labelset_release(s);
}
END_TEST

/* ---- Cardinality cap ------------------------------------------------------ */

START_TEST(cap_folds_into_overflow_set)
{
    ck_assert_int_eq(cpprof_set("label_cap", "5"), 0);
    unsigned long folded0 = cpprof_labelsets_folded();
    cpprof_labelset *held[8];
    char id[16];
    for (int i = 0; i < 8; i++) {
        snprintf(id, sizeof id, "req-%d", i);
        const char *kv[] = {"request_id", id};
        held[i] = make(2, kv);
    }
    /* Five distinct sets fit; the other three folded into one set. */
    ck_assert_uint_eq(cpprof_labelsets_folded() - folded0, 3);
    ck_assert_ptr_eq(held[5], held[7]);
    ck_assert_str_eq(value_of(held[6], "cpprof_overflow"), "label set cap reached");
    ck_assert_str_eq(value_of(held[4], "request_id"), "req-4");
    /* Releasing sets makes room: unreferenced ones are reclaimed. */
    for (int i = 0; i < 8; i++)
        cpprof_labelset_release(held[i]);
    const char *kv[] = {"request_id", "fresh"};
    cpprof_labelset *fresh = make(2, kv);
    ck_assert_str_eq(value_of(fresh, "request_id"), "fresh");
    ck_assert_uint_le(labelset_interned_count(), 5);
    cpprof_labelset_release(fresh);
    ck_assert_int_eq(cpprof_set("label_cap", "10000"), 0);
}
END_TEST

/* cpprof_do from a signal handler that interrupted the same thread while
 * it built a label set (holding the intern lock) returns -EDEADLK instead
 * of waiting forever for that lock.  The main thread
 * builds sets in a loop while another thread signals it every 20 us; the
 * handler's cpprof_do needs the lock (it derives the thread's set plus
 * another).  An alarm turns a deadlock into a failure. */
static cpprof_labelset *in_handler_set;
static atomic_long handler_ran, handler_refused;
static atomic_int stop_signalling;
static pid_t main_tid;

static void count_run(void *arg, const cpprof_labelset *labels)
{
    (void)arg, (void)labels;
    atomic_fetch_add(&handler_ran, 1);
}

static void do_in_handler(int sig)
{
    (void)sig;
    int saved = errno;
    int rc = cpprof_do(NULL, in_handler_set, count_run, NULL);
    if (rc == -EDEADLK)
        atomic_fetch_add(&handler_refused, 1);
    errno = saved;
}

static void *signal_main_thread(void *arg)
{
    (void)arg;
    struct timespec gap = {0, 20000};
    while (!atomic_load(&stop_signalling)) {
        syscall(SYS_tgkill, getpid(), main_tid, SIGUSR1);
        nanosleep(&gap, NULL);
    }
    return NULL;
}

START_TEST(do_from_signal_handler_does_not_deadlock)
{
    alarm(20);
    const char *base_kv[] = {"tenant", "acme"}, *extra_kv[] = {"job", "x"};
    cpprof_labelset *base = make(2, base_kv);
    in_handler_set = make(2, extra_kv);
    ck_assert_int_eq(cpprof_set_thread_labels(base), 0);
    /* The derived set exists, so the handler allocates nothing. */
    ck_assert_int_eq(cpprof_do(NULL, in_handler_set, count_run, NULL), 0);
    main_tid = (pid_t)syscall(SYS_gettid);
    struct sigaction sa = {.sa_handler = do_in_handler};
    ck_assert_int_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, signal_main_thread, NULL), 0);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int i = 0;
    do {
        char v[16];
        snprintf(v, sizeof v, "r%d", i++ % 64);
        const char *kv[] = {"request", v};
        cpprof_labelset_release(make(2, kv));
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec - start.tv_sec < 2 ||
             atomic_load(&handler_refused) == 0);
    atomic_store(&stop_signalling, 1);
    pthread_join(t, NULL);
    alarm(0);
    ck_assert_int_gt(atomic_load(&handler_ran), 0);
    ck_assert_int_gt(atomic_load(&handler_refused), 0);
    ck_assert_int_eq(cpprof_set_thread_labels(NULL), 0);
    cpprof_labelset_release(in_handler_set);
    cpprof_labelset_release(base);
}
END_TEST

/* A program that releases a set once too often while its thread still
 * holds it must not get the set freed under the thread when the cap makes
 * room: the extra release is refused. */
START_TEST(extra_release_keeps_set_a_thread_holds)
{
    ck_assert_int_eq(cpprof_set("label_cap", "3"), 0);
    const char *kv[] = {"tenant", "keep-0"};
    cpprof_labelset *held = make(2, kv);
    ck_assert_int_eq(cpprof_set_thread_labels(held), 0);
    cpprof_labelset_release(held);
    cpprof_labelset_release(held); /* once too often */
    /* Same-sized sets past the cap: reclaiming frees what nobody holds,
     * and a freed set's memory would be reused by the next one. */
    for (int i = 0; i < 10; i++) {
        char v[8];
        snprintf(v, sizeof v, "tmp-%02d", i);
        const char *other[] = {"tenant", v};
        cpprof_labelset_release(make(2, other));
    }
    cpprof_labelset *now = cpprof_thread_labels();
    ck_assert_ptr_eq(now, held);
    ck_assert_str_eq(value_of(now, "tenant"), "keep-0");
    cpprof_labelset_release(now);
    ck_assert_int_eq(cpprof_set_thread_labels(NULL), 0);
    ck_assert_int_eq(cpprof_set("label_cap", "10000"), 0);
}
END_TEST

static Suite *labels_suite(void)
{
    Suite *s = suite_create("labels");
    TCase *build = tcase_create("build");
    tcase_add_test(build, sorted_and_later_duplicate_wins);
    tcase_add_test(build, interned_by_content);
    tcase_add_test(build, empty_set_is_null);
    tcase_add_test(build, with_labels_child_overrides_parent_unchanged);
    tcase_add_test(build, format_quotes_like_go);
    tcase_add_test(build, text_escape_quoted_and_bare);
    tcase_add_test(build, bad_input_returns_codes);
    tcase_add_test(build, settings_reject_bad_values);
    tcase_add_test(build, foreach_in_key_order_with_early_stop);
    tcase_add_test(build, invalid_utf8_stored_as_replacement);
    suite_add_tcase(s, build);
    TCase *apply = tcase_create("apply");
    tcase_add_test(apply, do_applies_merged_and_restores);
    tcase_add_test(apply, do_restores_after_set_inside_scope);
    tcase_add_test(apply, do_restores_after_cxx_exception);
    tcase_add_test(apply, do_restores_after_pthread_cancel);
    tcase_add_test(apply, new_thread_inherits_creator_labels);
    tcase_add_test(apply, exiting_thread_leaves_registry);
    suite_add_tcase(s, apply);
    TCase *cap = tcase_create("cap");
    tcase_add_test(cap, cap_folds_into_overflow_set);
    tcase_add_test(cap, extra_release_keeps_set_a_thread_holds);
    tcase_add_test(cap, do_from_signal_handler_does_not_deadlock);
    suite_add_tcase(s, cap);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(labels_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
