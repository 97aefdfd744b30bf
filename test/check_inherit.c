/*
 * check_inherit.c -- labels pass to every new thread, however it is
 * created through pthread_create, as a goroutine inherits its creator's:
 * a thread made with plain pthread_create inside a cpprof_do scope holds
 * the scope's labels from its first instruction, in the census and on its
 * CPU samples (read back by google/pprof's parser, gocheck).  With the
 * setting inherit_labels off it starts without them, and
 * cpprof_thread_create passes them still.  CPPROF_BACKGROUND: cpprof_do's
 * explicitly empty parent.
 */
#define _GNU_SOURCE
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "census.h"
#include "cpprof.h"
#include "check_pair.h"

/* The value of `key` in `set`, or NULL. */
static const char *value_of(const cpprof_labelset *set, const char *key)
{
    const char *v;
    bool found;
    ck_assert_int_eq(cpprof_label(set, key, &v, &found), 0);
    return found ? v : NULL;
}

/* ---- The child thread ---------------------------------------------------- */

struct child {
    pid_t tid;
    char first_tenant[32]; /* its labels at its first instruction */
    atomic_int started, stop;
    double spin_seconds; /* CPU to burn before parking */
};

static double thread_cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void *child_main(void *arg)
{
    struct child *c = arg;
    cpprof_labelset *now = cpprof_thread_labels();
    const char *t = value_of(now, "tenant");
    snprintf(c->first_tenant, sizeof c->first_tenant, "%s", t ? t : "");
    cpprof_labelset_release(now);
    c->tid = gettid();
    volatile unsigned long x = 0;
    while (thread_cpu_seconds() < c->spin_seconds)
        x++;
    atomic_store(&c->started, 1);
    while (!atomic_load(&c->stop))
        usleep(1000);
    return NULL;
}

struct create_args {
    struct child *child;
    pthread_t thread;
    bool use_cpprof_create;
};

static void create_in_scope(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    struct create_args *a = arg;
    int rc = a->use_cpprof_create
                 ? cpprof_thread_create(&a->thread, NULL, child_main,
                                        a->child)
                 : pthread_create(&a->thread, NULL, child_main, a->child);
    ck_assert_int_eq(rc, 0);
}

/* Creates a child inside a cpprof_do scope with tenant=`tenant`, waits
 * until it has burnt `spin` CPU seconds and parked. */
static pthread_t start_child(struct child *c, const char *tenant, double spin,
                             bool use_cpprof_create)
{
    cpprof_labelset *set = make("tenant", tenant);
    *c = (struct child){.spin_seconds = spin};
    struct create_args a = {c, 0, use_cpprof_create};
    ck_assert_int_eq(cpprof_do(NULL, set, create_in_scope, &a), 0);
    cpprof_labelset_release(set);
    while (!atomic_load(&c->started))
        usleep(1000);
    return a.thread;
}

static void stop_child(struct child *c, pthread_t t)
{
    atomic_store(&c->stop, 1);
    pthread_join(t, NULL);
}

/* The census's labels of thread `tid`: its tenant, or "" without. */
static void census_tenant(pid_t tid, char *out, size_t len)
{
    census cs;
    ck_assert_int_eq(census_take(&cs), 0);
    bool seen = false;
    for (size_t i = 0; i < cs.n; i++)
        if (cs.threads[i].tid == tid) {
            const char *t = value_of(cs.threads[i].labels, "tenant");
            snprintf(out, len, "%s", t ? t : "");
            seen = true;
        }
    census_release(&cs);
    ck_assert_msg(seen, "thread %d not in the census", (int)tid);
}

/* ---- Tests ----------------------------------------------------------------- */

START_TEST(plain_pthread_create_inherits)
{
    struct child c;
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    pthread_t t = start_child(&c, "inherited", 0.5, false);
    unsigned char *gz;
    size_t len;
    ck_assert_int_eq(cpprof_cpu_profile_stop(&gz, &len), 0);
    ck_assert_str_eq(c.first_tenant, "inherited");
    char tenant[32];
    census_tenant(c.tid, tenant, sizeof tenant);
    ck_assert_str_eq(tenant, "inherited");
    stop_child(&c, t);

    /* The child's 0.5 CPU seconds carry the label; the creator was parked
     * meanwhile, so samples with it can only be the child's. */
    char path[] = "/tmp/check_inherit.XXXXXX", cmd[256], line[256];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, gz, len), (ssize_t)len);
    close(fd);
    free(gz);
    snprintf(cmd, sizeof cmd, "%s %s", GOCHECK, path);
    FILE *out = popen(cmd, "r");
    ck_assert_ptr_nonnull(out);
    long long cpu_ns = 0;
    while (fgets(line, sizeof line, out))
        sscanf(line, "tag tenant inherited 1 %lld", &cpu_ns);
    ck_assert_int_eq(pclose(out), 0);
    unlink(path);
    ck_assert_msg(cpu_ns >= 100000000,
                  "samples labelled tenant=inherited: %lld ns", cpu_ns);
}
END_TEST

START_TEST(setting_off_passes_nothing)
{
    struct child c;
    ck_assert_int_eq(cpprof_set("inherit_labels", "0"), 0);
    pthread_t t = start_child(&c, "not-passed", 0, false);
    ck_assert_str_eq(c.first_tenant, "");
    char tenant[32];
    census_tenant(c.tid, tenant, sizeof tenant);
    ck_assert_str_eq(tenant, "");
    stop_child(&c, t);
    /* cpprof_thread_create is asked to pass them: it does. */
    t = start_child(&c, "asked-for", 0, true);
    ck_assert_str_eq(c.first_tenant, "asked-for");
    stop_child(&c, t);
    ck_assert_int_eq(cpprof_set("inherit_labels", "1"), 0);
}
END_TEST

static void read_inner(void *arg, const cpprof_labelset *labels)
{
    const char **seen = arg;
    seen[0] = value_of(labels, "outer");
    seen[1] = value_of(labels, "inner");
    cpprof_labelset *now = cpprof_thread_labels();
    ck_assert_ptr_eq(now, labels);
    cpprof_labelset_release(now);
}

struct nested {
    const cpprof_labelset *parent, *inner;
    const char *seen[2];
};

static void run_inner(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    struct nested *n = arg;
    ck_assert_int_eq(cpprof_do(n->parent, n->inner, read_inner, n->seen), 0);
}

START_TEST(background_parent_is_empty)
{
    cpprof_labelset *outer = make("outer", "o"), *inner = make("inner", "i");
    struct nested n = {NULL, inner, {NULL, NULL}};
    ck_assert_int_eq(cpprof_do(NULL, outer, run_inner, &n), 0);
    ck_assert_str_eq(n.seen[0], "o"); /* NULL: the thread's set */
    ck_assert_str_eq(n.seen[1], "i");
    n = (struct nested){CPPROF_BACKGROUND, inner, {NULL, NULL}};
    ck_assert_int_eq(cpprof_do(NULL, outer, run_inner, &n), 0);
    ck_assert_ptr_null(n.seen[0]); /* Background: nothing inherited */
    ck_assert_str_eq(n.seen[1], "i");
    /* Background with no labels: no labels at all inside, and the outer
     * set back after. */
    n = (struct nested){CPPROF_BACKGROUND, NULL, {"x", "x"}};
    ck_assert_int_eq(cpprof_do(NULL, outer, run_inner, &n), 0);
    ck_assert_ptr_null(n.seen[0]);
    ck_assert_ptr_null(n.seen[1]);
    cpprof_labelset *now = cpprof_thread_labels();
    ck_assert_ptr_null(now);
    cpprof_labelset_release(outer);
    cpprof_labelset_release(inner);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("inherit");
    TCase *tc = tcase_create("inherit");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, plain_pthread_create_inherits);
    tcase_add_test(tc, setting_off_passes_nothing);
    tcase_add_test(tc, background_parent_is_empty);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
