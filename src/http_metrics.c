/*
 * http_metrics.c -- the per-label-set accounting counters (accounting.c)
 * for ops tooling:
 *
 *   GET /metrics                  Prometheus text exposition 0.0.4
 *   GET /debug/pprof/accounting   the same rows as JSON (README,
 *                                 "Per-tenant memory and contention")
 *
 * Prometheus: one series per label set, its labels as Prometheus labels.
 * Label names are sanitised to [a-zA-Z_][a-zA-Z0-9_]* (any other character
 * becomes '_', a leading digit or the reserved "__" gets a "label_"
 * prefix, a name that collides with an earlier one of the same set gets
 * "_2", "_3"...); values are escaped as the format requires (backslash,
 * double quote, newline).  Counters end in _total and are in base units
 * (seconds, bytes).  The empty set is the series without labels; the
 * label cap's overflow set is one series of its own (its label says so),
 * cpprof_labelsets_folded_total counts the sets folded into it, and
 * counts of reclaimed sets are the series {cpprof_retired="true"}.
 */
#include "heap.h"
#include "accounting.h"
#include "http.h"
#include "labels.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Prometheus text ------------------------------------------------------ */

/* Appends to a growing buffer (open_memstream). */
typedef struct {
    FILE *f;
    char *buf;
    size_t len;
} text;

static bool name_char(char c, bool first)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && c >= '0' && c <= '9');
}

/* The Prometheus form of label key i of `set`, made unique among the
 * set's earlier keys. */
static void sanitised_key(const cpprof_labelset *set, size_t i, char *out,
                          size_t len)
{
    char base[256];
    const char *k = labelset_key(set, i);
    bool prefix = !name_char(k[0], true) || (k[0] == '_' && k[1] == '_');
    size_t n = (size_t)snprintf(base, sizeof base, "%s", prefix ? "label_" : "");
    for (; *k && n + 1 < sizeof base; k++)
        base[n++] = name_char(*k, false) ? *k : '_';
    base[n] = '\0';
    snprintf(out, len, "%s", base);
    for (int suffix = 2;; suffix++) {
        bool clash = false;
        for (size_t j = 0; j < i && !clash; j++) {
            char earlier[300];
            sanitised_key(set, j, earlier, sizeof earlier);
            clash = strcmp(earlier, out) == 0;
        }
        if (!clash)
            return;
        snprintf(out, len, "%s_%d", base, suffix);
    }
}

static void put_escaped_value(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            fputs("\\\\", f);
        else if (*v == '"')
            fputs("\\\"", f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

/* The series' label block, "{k="v",...}", or nothing for the empty set. */
static void put_labels(FILE *f, const acct_row *row)
{
    if (row->kind == ACCT_ROW_RETIRED) {
        fputs("{cpprof_retired=\"true\"}", f);
        return;
    }
    size_t n = cpprof_labelset_size(row->set);
    for (size_t i = 0; i < n; i++) {
        char key[300];
        sanitised_key(row->set, i, key, sizeof key);
        fprintf(f, "%s%s=\"", i ? "," : "{", key);
        put_escaped_value(f, labelset_value(row->set, i));
        fputc('"', f);
    }
    if (n)
        fputc('}', f);
}

enum field { CPU, BYTES, OBJECTS, LOCK_WAIT, THREADS };

static void put_value(FILE *f, const acct_row *row, enum field field)
{
    switch (field) {
    case CPU: fprintf(f, "%.9f", row->cpu_ns / 1e9); break;
    case BYTES: fprintf(f, "%llu", (unsigned long long)row->alloc_bytes); break;
    case OBJECTS:
        fprintf(f, "%llu", (unsigned long long)row->alloc_objects);
        break;
    case LOCK_WAIT: fprintf(f, "%.9f", row->lock_wait_ns / 1e9); break;
    case THREADS: fprintf(f, "%ld", row->threads); break;
    }
}

static void put_family(FILE *f, const acct_row *rows, size_t n,
                       const char *name, const char *type, const char *help,
                       enum field field)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
    for (size_t i = 0; i < n; i++) {
        if (field == THREADS && rows[i].kind == ACCT_ROW_RETIRED)
            continue;
        fputs(name, f);
        put_labels(f, &rows[i]);
        fputc(' ', f);
        put_value(f, &rows[i], field);
        fputc('\n', f);
    }
}

static void put_user_family(FILE *f, const acct_row *rows, size_t n,
                            const char *name, size_t slot)
{
    fprintf(f, "# HELP cpprof_user_%s_total cpprof_counter_add(\"%s\") per "
               "label set.\n# TYPE cpprof_user_%s_total counter\n",
            name, name, name);
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].user[slot])
            continue;
        fprintf(f, "cpprof_user_%s_total", name);
        put_labels(f, &rows[i]);
        fprintf(f, " %llu\n", (unsigned long long)rows[i].user[slot]);
    }
}

static void put_exposition(FILE *f, const acct_row *rows, size_t n)
{
    put_family(f, rows, n, "cpprof_cpu_seconds_total", "counter",
               "CPU time of threads holding the label set.", CPU);
    put_family(f, rows, n, "cpprof_alloc_bytes_total", "counter",
               "Bytes allocated by threads holding the label set.", BYTES);
    put_family(f, rows, n, "cpprof_alloc_objects_total", "counter",
               "Objects allocated by threads holding the label set.",
               OBJECTS);
    put_family(f, rows, n, "cpprof_lock_wait_seconds_total", "counter",
               "Time threads holding the label set waited for contended "
               "locks (while block or mutex profiling is on).", LOCK_WAIT);
    put_family(f, rows, n, "cpprof_threads", "gauge",
               "Threads holding the label set now.", THREADS);
    size_t nnames;
    const char *const *names = accounting_user_names(&nnames);
    for (size_t i = 0; i < nnames; i++)
        put_user_family(f, rows, n, names[i], i);
    int64_t inuse, allocated;
    heap_internal_stats(&inuse, &allocated);
    fprintf(f, "# HELP cpprof_internal_heap_bytes Bytes in use by cpprof "
               "itself (symbolizer, profile building, HTTP server), "
               "estimated from samples; not in the heap profile.\n"
               "# TYPE cpprof_internal_heap_bytes gauge\n"
               "cpprof_internal_heap_bytes %lld\n"
               "# HELP cpprof_internal_heap_alloc_bytes_total Bytes "
               "allocated by cpprof itself, estimated from samples.\n"
               "# TYPE cpprof_internal_heap_alloc_bytes_total counter\n"
               "cpprof_internal_heap_alloc_bytes_total %lld\n",
            (long long)inuse, (long long)allocated);
    fprintf(f, "# HELP cpprof_labelsets_folded_total Label sets folded into "
               "the overflow set by the label cap.\n"
               "# TYPE cpprof_labelsets_folded_total counter\n"
               "cpprof_labelsets_folded_total %lu\n",
            cpprof_labelsets_folded());
    fprintf(f, "# HELP cpprof_accounting_tick_yielded 1 when the program "
               "set its own action for the accounting tick's signal, so "
               "CPU is charged only at label switches and thread exit.\n"
               "# TYPE cpprof_accounting_tick_yielded gauge\n"
               "cpprof_accounting_tick_yielded %d\n",
            accounting_tick_yielded());
}

int http_metrics(http_req *r)
{
    acct_row *rows;
    size_t n;
    int rc = accounting_rows(&rows, &n);
    if (rc)
        return http_error(r, 500, "%s", cpprof_strerror(rc));
    text t = {0};
    t.f = open_memstream(&t.buf, &t.len);
    if (!t.f) {
        accounting_rows_free(rows, n);
        return http_error(r, 500, "%s", cpprof_strerror(-ENOMEM));
    }
    put_exposition(t.f, rows, n);
    accounting_rows_free(rows, n);
    rc = fclose(t.f) == 0
             ? http_reply(r, "text/plain; version=0.0.4; charset=utf-8", NULL,
                          t.buf, t.len)
             : http_error(r, 500, "%s", cpprof_strerror(-ENOMEM));
    free(t.buf);
    return rc;
}

/* ---- JSON ------------------------------------------------------------------ */

static json_t *row_json(const acct_row *row, const char *const *names,
                        size_t nnames)
{
    json_t *labels = json_object(), *user = json_object();
    for (size_t i = 0; i < cpprof_labelset_size(row->set); i++)
        json_object_set_new(labels, labelset_key(row->set, i),
                            json_string(labelset_value(row->set, i)));
    for (size_t i = 0; i < nnames; i++)
        if (row->user[i])
            json_object_set_new(user, names[i],
                                json_integer((json_int_t)row->user[i]));
    static const char *const kinds[] = {"set", "unlabelled", "retired"};
    return json_pack(
        "{s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:o}", "kind", kinds[row->kind],
        "labels", labels, "cpu_nanoseconds", (json_int_t)row->cpu_ns,
        "alloc_bytes", (json_int_t)row->alloc_bytes, "alloc_objects",
        (json_int_t)row->alloc_objects, "lock_wait_nanoseconds",
        (json_int_t)row->lock_wait_ns, "threads", (json_int_t)row->threads,
        "user", user);
}

int http_accounting(http_req *r)
{
    acct_row *rows;
    size_t n;
    int rc = accounting_rows(&rows, &n);
    if (rc)
        return http_error(r, 500, "%s", cpprof_strerror(rc));
    size_t nnames;
    const char *const *names = accounting_user_names(&nnames);
    json_t *sets = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(sets, row_json(&rows[i], names, nnames));
    accounting_rows_free(rows, n);
    json_t *doc = json_pack("{s:b, s:I, s:b, s:o}", "enabled",
                            accounting_enabled(), "labelsets_folded",
                            (json_int_t)cpprof_labelsets_folded(),
                            "tick_yielded", accounting_tick_yielded(), "sets",
                            sets);
    char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    rc = body ? http_reply(r, "application/json", NULL, body, strlen(body))
              : http_error(r, 500, "%s", cpprof_strerror(-ENOMEM));
    free(body);
    return rc;
}
