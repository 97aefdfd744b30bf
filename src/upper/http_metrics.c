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
#define _GNU_SOURCE /* hsearch_r, asprintf */
#include "heap.h"
#include "accounting.h"
#include "http.h"
#include "labels.h"
#include "symbolize.h"

#include <errno.h>
#include <jansson.h>
#include <search.h>
#include <stdint.h>
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

/* The Prometheus form of a key without regard to its set: every character
 * outside [a-zA-Z0-9_] becomes '_', and a name that would start with a
 * digit or the reserved "__" gets "label_" in front. */
static char *base_name(const char *k)
{
    bool prefix = !name_char(k[0], true) || (k[0] == '_' && k[1] == '_');
    size_t len = strlen(k), at = prefix ? 6 : 0;
    char *out = malloc(at + len + 1);
    if (out == NULL)
        return NULL;
    memcpy(out, "label_", at);
    for (; *k; k++)
        out[at++] = name_char(*k, false) ? *k : '_';
    out[at] = '\0';
    return out;
}

/* The names a set's keys already took, each with the next suffix to try
 * when another key wants it as its base: a hash table, so that naming a
 * set's keys is linear in their number (a name compared with every earlier
 * one, recursively, made a 40-key set's /metrics never end). */
typedef struct {
    struct hsearch_data table;
    ENTRY *entries; /* one per key: the name and its next suffix */
} taken_names;

/* Takes `name` (malloc'd, owned by the caller's array) or, when it is
 * taken, the first free NAME_2, NAME_3...; returns the name used (the
 * argument or a new malloc'd string, the argument then freed), or NULL. */
static char *take_name(taken_names *t, size_t i, char *name)
{
    ENTRY want = {.key = name}, *found;
    if (!hsearch_r(want, FIND, &found, &t->table))
        found = NULL;
    while (found != NULL) {
        intptr_t suffix = (intptr_t)found->data;
        found->data = (void *)(suffix + 1);
        char *next;
        if (asprintf(&next, "%s_%ld", name, (long)suffix) < 0) {
            free(name);
            return NULL;
        }
        free(name);
        name = next;
        want.key = name;
        if (!hsearch_r(want, FIND, &found, &t->table))
            found = NULL;
    }
    t->entries[i] = (ENTRY){.key = name, .data = (void *)(intptr_t)2};
    if (!hsearch_r(t->entries[i], ENTER, &found, &t->table)) {
        free(name);
        return NULL;
    }
    return name;
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

/* Writes the set's label block, "{k="v",...}", keys sanitised and made
 * unique.  Returns -ENOMEM when it could not name them. */
static int put_set_labels(FILE *f, const cpprof_labelset *set)
{
    size_t n = cpprof_labelset_size(set);
    taken_names t = {.entries = calloc(n ? n : 1, sizeof(ENTRY))};
    int rc = 0;
    if (t.entries == NULL || !hcreate_r(2 * n + 1, &t.table)) {
        free(t.entries);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *name = base_name(labelset_key(set, i));
        if (name == NULL || (name = take_name(&t, i, name)) == NULL) {
            rc = -ENOMEM;
            break;
        }
        fprintf(f, "%s%s=\"", i ? "," : "{", name);
        put_escaped_value(f, labelset_value(set, i));
        fputc('"', f);
    }
    if (n && rc == 0)
        fputc('}', f);
    hdestroy_r(&t.table);
    for (size_t i = 0; i < n; i++)
        free(t.entries[i].key);
    free(t.entries);
    return rc;
}

static void free_label_blocks(char **blocks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(blocks[i]);
    free(blocks);
}

/* Every row's label block, built once: the same block goes on the row's
 * series in every family.  NULL on failure. */
static char **label_blocks(const acct_row *rows, size_t n)
{
    char **blocks = calloc(n ? n : 1, sizeof *blocks);
    for (size_t i = 0; blocks != NULL && i < n; i++) {
        size_t len;
        FILE *f = open_memstream(&blocks[i], &len);
        int rc = f == NULL ? -ENOMEM : 0;
        if (f != NULL && rows[i].kind == ACCT_ROW_RETIRED)
            fputs("{cpprof_retired=\"true\"}", f);
        else if (f != NULL)
            rc = put_set_labels(f, rows[i].set);
        if (f == NULL || fclose(f) != 0 || rc < 0) {
            free_label_blocks(blocks, i + 1);
            blocks = NULL;
        }
    }
    return blocks;
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

/* What a counter that only accounting moves says while accounting is off,
 * so that a dashboard of flat zeros says why in its own HELP text. */
#define OFF_HELP                                                              \
    " Always 0 here: accounting is off (cpprof_accounting_enabled 0); start " \
    "the program with CPPROF_ACCOUNTING=1 or call cpprof_accounting_enable()."

static void put_family(FILE *f, const acct_row *rows,
                       char *const *blocks, size_t n, const char *name,
                       const char *type, const char *help, enum field field)
{
    bool off = field != THREADS && !accounting_enabled();
    fprintf(f, "# HELP %s %s%s\n# TYPE %s %s\n", name, help,
            off ? OFF_HELP : "", name, type);
    for (size_t i = 0; i < n; i++) {
        if (field == THREADS && rows[i].kind == ACCT_ROW_RETIRED)
            continue;
        fprintf(f, "%s%s ", name, blocks[i]);
        put_value(f, &rows[i], field);
        fputc('\n', f);
    }
}

static void put_user_family(FILE *f, const acct_row *rows,
                            char *const *blocks, size_t n, const char *name,
                            size_t slot)
{
    fprintf(f, "# HELP cpprof_user_%s_total cpprof_counter_add(\"%s\") per "
               "label set.\n# TYPE cpprof_user_%s_total counter\n",
            name, name, name);
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].user[slot])
            continue;
        fprintf(f, "cpprof_user_%s_total%s %llu\n", name, blocks[i],
                (unsigned long long)rows[i].user[slot]);
    }
}

static void put_exposition(FILE *f, const acct_row *rows,
                           char *const *blocks, size_t n)
{
    fprintf(f, "# HELP cpprof_accounting_enabled 1 when per-label-set "
               "accounting is on (CPPROF_ACCOUNTING=1 or "
               "cpprof_accounting_enable()); while it is 0 the CPU, "
               "allocation and lock-wait counters below stay 0.\n"
               "# TYPE cpprof_accounting_enabled gauge\n"
               "cpprof_accounting_enabled %d\n",
            accounting_enabled() ? 1 : 0);
    put_family(f, rows, blocks, n, "cpprof_cpu_seconds_total", "counter",
               "CPU time of threads holding the label set.", CPU);
    put_family(f, rows, blocks, n, "cpprof_alloc_bytes_total", "counter",
               "Bytes allocated by threads holding the label set.", BYTES);
    put_family(f, rows, blocks, n, "cpprof_alloc_objects_total", "counter",
               "Objects allocated by threads holding the label set.",
               OBJECTS);
    put_family(f, rows, blocks, n, "cpprof_lock_wait_seconds_total", "counter",
               "Time threads holding the label set waited for contended "
               "locks (while block or mutex profiling is on).", LOCK_WAIT);
    put_family(f, rows, blocks, n, "cpprof_threads", "gauge",
               "Threads holding the label set now.", THREADS);
    size_t nnames;
    const char *const *names = accounting_user_names(&nnames);
    for (size_t i = 0; i < nnames; i++)
        put_user_family(f, rows, blocks, n, names[i], i);
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
    fprintf(f, "# HELP cpprof_symbolizer_bytes Bytes of the symbolizer's "
               "decoded debug tables, cached results and inflated copies "
               "of compressed debug files (libdw's own state not included), "
               "bounded by symbolize_max_kb.\n"
               "# TYPE cpprof_symbolizer_bytes gauge\n"
               "cpprof_symbolizer_bytes %zu\n",
            symbolize_own_bytes());
    fprintf(f, "# HELP cpprof_labelsets_folded_total Label sets folded into "
               "the overflow set by the label cap.\n"
               "# TYPE cpprof_labelsets_folded_total counter\n"
               "cpprof_labelsets_folded_total %lu\n",
            cpprof_labelsets_folded());
    fprintf(f, "# HELP cpprof_http_reply_held_bytes Bytes the HTTP "
               "server's replies hold for clients that have not read them "
               "yet (large ones gzip'd), bounded by http_reply_kb.\n"
               "# TYPE cpprof_http_reply_held_bytes gauge\n"
               "cpprof_http_reply_held_bytes %zu\n"
               "# HELP cpprof_http_replies_refused_total Replies answered "
               "503 because they would have passed http_reply_kb.\n"
               "# TYPE cpprof_http_replies_refused_total counter\n"
               "cpprof_http_replies_refused_total %lu\n",
            http_reply_held_bytes(), http_replies_refused());
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
    char **blocks = label_blocks(rows, n);
    t.f = blocks != NULL ? open_memstream(&t.buf, &t.len) : NULL;
    if (!t.f) {
        if (blocks != NULL)
            free_label_blocks(blocks, n);
        accounting_rows_free(rows, n);
        return http_error(r, 500, "%s", cpprof_strerror(-ENOMEM));
    }
    put_exposition(t.f, rows, blocks, n);
    free_label_blocks(blocks, n);
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
    return http_reply_json(r, doc, JSON_COMPACT);
}
