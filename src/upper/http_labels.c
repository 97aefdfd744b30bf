/*
 * http_labels.c -- GET /debug/pprof/labels: the labels summary as JSON, the
 * numbers `go tool pprof -tags` would show, for scrapers and for the index
 * page's labels view.
 *
 *   /debug/pprof/labels            a thread census: threads per label key
 *                                  and value, now; and under "tasks" the
 *                                  parked tasks (task.h) per label key and
 *                                  value, their reason as pprof_wait.
 *   /debug/pprof/labels?seconds=N  a CPU profile of N seconds (the same
 *                                  single-profile rule as /profile): CPU
 *                                  samples per label key and value.
 *
 * Both answer one schema (README, "JSON labels summary"):
 *   {"source": "threads"|"cpu", "total": N, ["seconds": N,
 *    "cpu_nanoseconds": N,] "labels": {KEY: {VALUE: {"count": N,
 *    ["cpu_nanoseconds": N,] "share": F}}}}
 * where share is count / total: threads or samples without the key make
 * the shares of a key sum to less than 1; and "unlabelled": {"count": N,
 * ["cpu_nanoseconds": N,] "share": F}, the threads or samples that carry
 * no label at all, which the index page shows as the program's own row
 * (cpprof's threads carry pprof_internal: otherwise, to a newcomer, they
 * would be the only threads there are).
 *
 * The CPU side reads the profile the public API returns (http_profile_unpack:
 * gunzip, then protobuf-c's generated parser) rather than the sampler's internals, so it
 * sees exactly what a client of /profile would see.
 */
#include "census.h"
#include "config.h"
#include "http_named.h"
#include "http.h"
#include "labels.h"
#include "profile.pb-c.h"
#include "sampler.h"
#include "task.h"
#include "util.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Adds `count` (and `ns` when ns >= 0) to labels[key][value]; false when
 * it could not (no memory).  jansson frees what it fails to insert, so a
 * new object is used only once it is in its parent. */
static bool tally(json_t *labels, const char *key, const char *value,
                  json_int_t count, json_int_t ns)
{
    json_t *values = json_object_get(labels, key);
    if (values == NULL &&
        (json_object_set_new(labels, key, json_object()) != 0 ||
         (values = json_object_get(labels, key)) == NULL))
        return false;
    json_t *v = json_object_get(values, value);
    if (v == NULL &&
        (json_object_set_new(values, value,
                             ns >= 0 ? json_pack("{s:I, s:I}", "count",
                                                 (json_int_t)0,
                                                 "cpu_nanoseconds",
                                                 (json_int_t)0)
                                     : json_pack("{s:I}", "count",
                                                 (json_int_t)0)) != 0 ||
         (v = json_object_get(values, value)) == NULL))
        return false;
    json_t *c = json_object_get(v, "count");
    json_integer_set(c, json_integer_value(c) + count);
    if (ns >= 0) {
        json_t *t = json_object_get(v, "cpu_nanoseconds");
        json_integer_set(t, json_integer_value(t) + ns);
    }
    return true;
}

/* Sets every value's share: its count over `total`. */
static void add_shares(json_t *labels, json_int_t total)
{
    const char *key, *value;
    json_t *values, *v;
    json_object_foreach(labels, key, values) {
        json_object_foreach(values, value, v) {
            json_int_t count = json_integer_value(json_object_get(v, "count"));
            json_object_set_new(v, "share",
                                json_real(total ? (double)count / total : 0));
        }
    }
}

#define JSON_FLAGS (JSON_INDENT(2) | JSON_SORT_KEYS | JSON_REAL_PRECISION(6))

/* ---- Threads (census) ---------------------------------------------------- */

static bool tally_thread_label(const char *key, const char *value, void *arg)
{
    return tally(arg, key, value, 1, -1);
}

/* The parked tasks' sets and reasons, gathered under the registry lock
 * (task_foreach_parked) and tallied after it. */
struct parked_list {
    struct parked_entry {
        const cpprof_labelset *labels; /* a reference of the list's */
        const char *reason;
    } *v;
    size_t n, cap;
};

static int gather_parked(const struct task_parked *t, void *arg)
{
    struct parked_list *l = arg;
    if (ARRAY_RESERVE(l->v, l->n, l->cap, 1) != 0)
        return -ENOMEM;
    l->v[l->n++] = (struct parked_entry){labelset_hold(t->labels), t->reason};
    return 0;
}

/* {"total": N, "labels": ...} of the tasks parked now, or NULL. */
static json_t *tally_tasks(void)
{
    struct parked_list l = {0};
    int rc = task_foreach_parked(gather_parked, &l);
    json_t *labels = json_object();
    for (size_t i = 0; i < l.n; i++) {
        if (rc == 0) {
            cpprof_labels_foreach(l.v[i].labels, tally_thread_label, labels);
            if (!tally(labels, CENSUS_WAIT_KEY, l.v[i].reason, 1, -1))
                rc = -ENOMEM;
        }
        labelset_drop(l.v[i].labels);
    }
    free(l.v);
    if (rc != 0) {
        json_decref(labels);
        return NULL;
    }
    add_shares(labels, (json_int_t)l.n);
    return json_pack("{s:I, s:o}", "total", (json_int_t)l.n, "labels",
                     labels);
}

static int reply_census(http_req *r)
{
    census c;
    int rc = census_take_labels(&c); /* counts only: no stacks */
    if (rc < 0)
        return http_error(r, 500, "Could not take a thread census: %s",
                          cpprof_strerror(rc));
    json_t *labels = json_object();
    json_int_t bare = 0;
    for (size_t i = 0; i < c.n; i++) {
        cpprof_labels_foreach(c.threads[i].labels, tally_thread_label, labels);
        bare += cpprof_labelset_size(c.threads[i].labels) == 0;
    }
    add_shares(labels, (json_int_t)c.n);
    json_t *tasks = tally_tasks();
    json_t *root = json_pack(
        "{s:s, s:I, s:o, s:{s:I, s:f}, s:o}", "source", "threads", "total",
        (json_int_t)c.n, "labels", labels, "unlabelled", "count", bare,
        "share", c.n ? (double)bare / (double)c.n : 0.0, "tasks",
        tasks ? tasks : json_null());
    census_release(&c);
    return http_reply_json(r, root, JSON_FLAGS);
}

/* ---- CPU ------------------------------------------------------------------ */

/* Samples and their CPU (ns): all of them, and those without a label. */
struct cpu_counts {
    json_int_t samples, ns, bare_samples, bare_ns;
};

/* Tallies a CPU profile's samples (values: samples/count, cpu/nanoseconds)
 * by their string labels. */
static json_t *tally_profile(const Perftools__Profiles__Profile *p,
                             struct cpu_counts *n)
{
    json_t *labels = json_object();
    *n = (struct cpu_counts){0, 0, 0, 0};
    for (size_t i = 0; i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        if (s->n_value < 2)
            continue;
        n->samples += s->value[0];
        n->ns += s->value[1];
        if (s->n_label == 0) {
            n->bare_samples += s->value[0];
            n->bare_ns += s->value[1];
        }
        for (size_t j = 0; j < s->n_label; j++) {
            const Perftools__Profiles__Label *l = s->label[j];
            if (l->str > 0 && (size_t)l->str < p->n_string_table &&
                l->key > 0 && (size_t)l->key < p->n_string_table)
                tally(labels, p->string_table[l->key],
                      p->string_table[l->str], s->value[0], s->value[1]);
        }
    }
    add_shares(labels, n->samples);
    return labels;
}

/* The summary of a gzip'd CPU profile, or NULL when it does not parse. */
static json_t *summarize_profile(const unsigned char *gz, size_t len,
                                 long seconds)
{
    Perftools__Profiles__Profile *p = http_profile_unpack(gz, len);
    if (p == NULL)
        return NULL;
    struct cpu_counts n;
    json_t *labels = tally_profile(p, &n);
    perftools__profiles__profile__free_unpacked(p, NULL);
    return json_pack(
        "{s:s, s:I, s:I, s:I, s:o, s:{s:I, s:I, s:f}}", "source", "cpu",
        "seconds", (json_int_t)seconds, "total", n.samples, "cpu_nanoseconds",
        n.ns, "labels", labels, "unlabelled", "count", n.bare_samples,
        "cpu_nanoseconds", n.bare_ns, "share",
        n.samples ? (double)n.bare_samples / (double)n.samples : 0.0);
}

static int reply_cpu(http_req *r, long seconds)
{
    unsigned char *buf;
    size_t len;
    int rc = cpprof_cpu_profile_start();
    if (rc < 0)
        return http_cpu_profile_refused(r, rc);
    http_end end = http_wait_window(r, seconds);
    if (end != HTTP_GOING_ON) {
        cpu_profile_discard(); /* not built: http_error_window_ended */
        return http_error_window_ended(
            r, end, "client went away before the profile ended");
    }
    rc = cpprof_cpu_profile_stop(&buf, &len);
    if (rc < 0)
        return http_error(r, 500, "Could not finish CPU profile: %s",
                          cpprof_strerror(rc));
    json_t *root = summarize_profile(buf, len, seconds);
    free(buf);
    if (root == NULL)
        return http_error(r, 500, "Could not read the CPU profile");
    return http_reply_json(r, root, JSON_FLAGS);
}

int http_labels(http_req *r)
{
    long max = cfg_int(CFG_PROFILE_MAX_SECONDS), seconds;
    int rc = http_query_long(r, "seconds", 1, max, &seconds);
    if (rc < 0)
        return http_error(r, 400,
                          "invalid value for \"seconds\" - must be an integer "
                          "from 1 to %ld",
                          max);
    return rc > 0 ? reply_census(r) : reply_cpu(r, seconds);
}
