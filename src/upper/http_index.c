/*
 * http_index.c -- GET /debug/pprof/: the index of every endpoint, as HTML
 * (Go's page, plus the labels view) or, with ?format=json, as JSON for ops
 * tooling; the page's own files under /debug/pprof/www/; and the counts the
 * index shows.
 *
 * The list comes from the route table (http_dispatch.c, every row with a
 * description), so a profile added there is listed without touching this
 * file.  The HTML is www/index.html with its table filled in here, on the
 * server, so the page is useful without JavaScript as Go's is; only the
 * labels view needs scripts.  Entries are sorted by name, as Go sorts them.
 * Below the table (and as "cpu_unsampled" in the JSON) the page says what
 * the last CPU profile could not sample and why (sampler.h), as that profile
 * does; and, once the label cap folded a set, that it did (the profiles
 * only show a cpprof_overflow label, which a reader may not look for).
 */
#define _GNU_SOURCE /* open_memstream */
#include "census.h"
#include "census_crew.h"
#include "config.h"
#include "contention.h"
#include "heap.h"
#include "http.h"
#include "http_named.h"
#include "labels.h"
#include "proctasks.h"
#include "sampler.h"
#include "symbolize.h"
#include "task.h"
#include "threadcreate.h"
#include "www.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ENTRIES 32

/* ---- Counts ------------------------------------------------------------- */

/* Go's goroutine count: here the threads and the parked tasks, as the
 * goroutine profile lists them. */
long http_count_threads(void)
{
    int dirfd = proctasks_open();
    if (dirfd < 0)
        return dirfd;
    pid_t tids[PROCTASKS_BATCH_TIDS];
    long n = 0;
    int got;
    while ((got = proctasks_next(dirfd, tids,
                                 sizeof tids / sizeof *tids)) > 0)
        n += got;
    close(dirfd);
    return got < 0 ? got : n + (long)task_parked_count();
}

/* Go's count of a stack-record profile: its records (non-zero entries),
 * or, with `sum`, the total of their first value (threadcreate counts
 * threads, not creation sites). */
static long count_snapshot(int (*snapshot)(sampleset **), bool sum)
{
    sampleset *s;
    sampleset_entry *e;
    size_t n;
    int rc = snapshot(&s);
    if (rc < 0)
        return rc;
    rc = sampleset_sorted(s, SIZE_MAX, &e, &n);
    long count = rc < 0 ? rc : (long)n;
    if (rc == 0 && sum) {
        count = 0;
        for (size_t i = 0; i < n; i++)
            count += (long)e[i].values[0];
    }
    if (rc == 0)
        free(e);
    sampleset_free(s);
    return count;
}

long http_count_heap(void) { return count_snapshot(heap_snapshot, false); }
long http_count_block(void) { return count_snapshot(block_snapshot, false); }
long http_count_mutex(void) { return count_snapshot(mutex_snapshot, false); }
long http_count_threadcreate(void)
{
    return count_snapshot(threadcreate_snapshot, true);
}

/* ---- The list ----------------------------------------------------------- */

typedef struct {
    const char *name, *desc;
    long count;      /* negative: unknown */
    const char *why; /* why the profile is not available, or NULL */
    const char *partial; /* what the profile cannot see, or NULL */
} index_entry;

/* Profiles a collector may decline to take, with the reason it gives. */
static bool of_stacks(const char *name)
{
    static const char *const names[] = {"profile", "goroutine", "heap",
                                        "allocs",  "block",     "mutex",
                                        "threadcreate"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0)
            return true;
    return false;
}

static const char *why_unavailable(const char *name)
{
    const char *no_stacks;
    if (of_stacks(name) && (no_stacks = http_stacks_unavailable()) != NULL)
        return no_stacks;
    if (strcmp(name, "heap") == 0 || strcmp(name, "allocs") == 0)
        return heap_declined();
    if (strcmp(name, "profile") == 0 &&
        sampler_signal_is_programs((int)cfg_int(CFG_CPU_SIGNAL)))
        return "declined: the program has its own handler for the CPU "
               "profiling signal; set CPPROF_CPU_SIGNAL (setting cpu_signal) "
               "to a signal it leaves alone";
    if (strcmp(name, "goroutine") == 0 && census_signal_is_programs())
        return "declined: the program has its own handler for the census's "
               "signal; set CPPROF_CENSUS_SIGNAL (setting census_signal) to "
               "a signal it leaves alone";
    return NULL;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const index_entry *)a)->name,
                  ((const index_entry *)b)->name);
}

/* The listed routes with their counts now, sorted by name. */
static size_t list_entries(index_entry *out)
{
    size_t nroutes, n = 0;
    const http_route *routes = http_routes(&nroutes);
    for (size_t i = 0; i < nroutes && n < MAX_ENTRIES; i++) {
        if (routes[i].desc == NULL)
            continue;
        const char *why = why_unavailable(routes[i].name);
        bool heap = strcmp(routes[i].name, "heap") == 0 ||
                    strcmp(routes[i].name, "allocs") == 0;
        out[n++] = (index_entry){routes[i].name, routes[i].desc,
                                 why ? -1
                                 : routes[i].count ? routes[i].count()
                                                   : 0,
                                 why, heap && !why ? heap_unseen() : NULL};
    }
    qsort(out, n, sizeof *out, by_name);
    return n;
}

/* ---- What the last CPU profile could not sample ------------------------ */

static json_t *unsampled_json(void)
{
    sampler_unsampled u[SAMPLER_NREASONS];
    cpu_profile_last_unsampled(u);
    json_t *list = json_array();
    for (int why = 0; why < SAMPLER_NREASONS; why++)
        if (u[why].threads)
            json_array_append_new(
                list, json_pack("{s:s, s:s, s:I, s:f}", "frame",
                                sampler_reason_frame(why), "reason",
                                sampler_reason_text(why), "threads",
                                (json_int_t)u[why].threads, "cpu_seconds",
                                u[why].cpu_ns / 1e9));
    return list;
}

static void put_unsampled(FILE *f)
{
    sampler_unsampled u[SAMPLER_NREASONS];
    cpu_profile_last_unsampled(u);
    for (int why = 0; why < SAMPLER_NREASONS; why++)
        if (u[why].threads)
            fprintf(f,
                    "<p class=\"note unsampled\">The last CPU profile could "
                    "not sample %ld thread%s (%.3f s of CPU time): %s.</p>\n",
                    u[why].threads, u[why].threads == 1 ? "" : "s",
                    u[why].cpu_ns / 1e9, sampler_reason_text(why));
}

/* ---- The label cap ------------------------------------------------------ */

static json_t *label_cap_json(void)
{
    return json_pack("{s:I, s:I, s:I}", "cap",
                     (json_int_t)cfg_int(CFG_LABEL_CAP), "interned",
                     (json_int_t)labelset_interned_count(), "folded",
                     (json_int_t)cpprof_labelsets_folded());
}

static void put_label_cap(FILE *f)
{
    unsigned long folded = cpprof_labelsets_folded();
    if (folded == 0)
        return;
    fprintf(f,
            "<p class=\"note\" id=\"label-cap\">The label cap is reached: "
            "%lu new label set%s folded into "
            "<code>cpprof_overflow</code>, and the samples taken under "
            "them carry no labels of their own.  The program holds more "
            "distinct label sets at once than <code>label_cap</code> "
            "(CPPROF_LABEL_CAP, %ld; %zu interned now): label with fewer "
            "distinct values, or raise the cap.</p>\n",
            folded, folded == 1 ? " was" : "s were", cfg_int(CFG_LABEL_CAP),
            labelset_interned_count());
}

/* ---- JSON --------------------------------------------------------------- */

/* {"profiles": [{"name", "count" (null when unknown), "description",
 * "path", "unavailable" (why) for a profile that cannot be taken, and
 * "partial" (what it misses) for one that cannot see everything}],
 * "cpprof_internal_heap": {"inuse_bytes", "alloc_bytes"}, "cpu_unsampled",
 * "profiler": {"label", "threads", "cpu_seconds", "windows_open"},
 * "sampler": {"label", "cpu_seconds"}, "census": {"label", "threads",
 * "cpu_seconds"}, "label_cap": {"cap", "interned", "folded"} (sets folded
 * into cpprof_overflow since start), "forked_processes": [...]
 * (http_forks_json), and "forks_declined" (why forks will not serve) where
 * they will not, and "libraries_unisolated" where upper.c could not
 * isolate them}: what
 * the server's own threads cost the process and how
 * many requests wait out a window now, and what the CPU profiler's
 * collector threads and the census's helpers have cost it. */
static int reply_json(http_req *r, const index_entry *e, size_t n)
{
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        char path[96];
        snprintf(path, sizeof path, "/debug/pprof/%s", e[i].name);
        json_t *entry = json_pack(
            "{s:s, s:o, s:s, s:s}", "name", e[i].name, "count",
            e[i].count < 0 ? json_null() : json_integer(e[i].count),
            "description", e[i].desc, "path", path);
        if (entry && e[i].why)
            json_object_set_new(entry, "unavailable", json_string(e[i].why));
        if (entry && e[i].partial)
            json_object_set_new(entry, "partial", json_string(e[i].partial));
        json_array_append_new(list, entry);
    }
    int64_t inuse, allocated;
    heap_internal_stats(&inuse, &allocated);
    double cpu;
    size_t threads;
    http_own_cpu(&cpu, &threads);
    unsigned helpers;
    double census_cpu = census_crew_cpu_ns(&helpers) / 1e9;
    json_t *root = json_pack(
        "{s:o, s:{s:I, s:I}, s:o, s:{s:s, s:I, s:f, s:i}, s:{s:s, s:f},"
        " s:{s:s, s:I, s:f}}",
        "profiles", list, "cpprof_internal_heap", "inuse_bytes",
        (json_int_t)inuse, "alloc_bytes", (json_int_t)allocated,
        "cpu_unsampled", unsampled_json(), "profiler", "label",
        "pprof_internal=http", "threads", (json_int_t)threads, "cpu_seconds",
        cpu, "windows_open", http_windows_open(), "sampler", "label",
        "pprof_internal=sampler", "cpu_seconds",
        sampler_collector_cpu_ns() / 1e9, "census", "label",
        "pprof_internal=census", "threads", (json_int_t)helpers,
        "cpu_seconds", census_cpu);
    json_object_set_new(root, "label_cap", label_cap_json());
    json_object_set_new(root, "forked_processes", http_forks_json());
    const char *declined = http_forks_declined();
    if (declined != NULL)
        json_object_set_new(root, "forks_declined", json_string(declined));
    const char *unisolated = http_libraries_unisolated();
    if (unisolated != NULL)
        json_object_set_new(root, "libraries_unisolated",
                            json_string(unisolated));
    return http_reply_json(r, root, JSON_INDENT(2));
}

/* ---- HTML --------------------------------------------------------------- */

static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&#34;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Go's rows: Count, then the name linking to NAME?debug=1. */
static void put_rows(FILE *f, const index_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fputs("<tr data-profile=\"", f);
        put_escaped(f, e[i].name);
        if (e[i].count < 0)
            fputs("\"><td class=\"num\">?</td>", f);
        else
            fprintf(f, "\"><td class=\"num\">%ld</td>", e[i].count);
        fputs("<td><a href=\"", f);
        put_escaped(f, e[i].name);
        fputs("?debug=1\">", f);
        put_escaped(f, e[i].name);
        fputs("</a></td></tr>\n", f);
    }
}

/* cpprof's own memory, which the heap profile leaves out. */
static void put_internal_heap(FILE *f)
{
    int64_t inuse, allocated;
    heap_internal_stats(&inuse, &allocated);
    fprintf(f, "<li><div class=\"profile-name\">cpprof's own memory: </div> "
               "<span id=\"internal-heap\">%lld</span> bytes in use, %lld "
               "allocated since start, by cpprof itself (symbolizer, "
               "profile building, HTTP server), estimated from samples and "
               "left out of heap and allocs</li>\n",
            (long long)inuse, (long long)allocated);
    fprintf(f, "<li><div class=\"profile-name\">symbolizer tables: </div> "
               "<span id=\"symbolizer-bytes\">%zu</span> bytes of decoded "
               "debug tables, cached results and inflated copies of "
               "compressed debug files (symbolize_max_kb)</li>\n",
            symbolize_own_bytes());
}

static void put_descriptions(FILE *f, const index_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fputs("<li><div class=\"profile-name\">", f);
        put_escaped(f, e[i].name);
        fputs(": </div> ", f);
        put_escaped(f, e[i].desc);
        if (e[i].why) {
            fputs("<div class=\"unavailable\">Not available: ", f);
            put_escaped(f, e[i].why);
            fputs("</div>", f);
        }
        if (e[i].partial) {
            fputs("<div class=\"unavailable\">Partial: ", f);
            put_escaped(f, e[i].partial);
            fputs("</div>", f);
        }
        fputs("</li>\n", f);
    }
    put_internal_heap(f);
    const char *unisolated = http_libraries_unisolated();
    if (unisolated != NULL) {
        fputs("<li><div class=\"unavailable\">cpprof's libraries: ", f);
        put_escaped(f, unisolated);
        fputs("</div></li>\n", f);
    }
}

static const www_file *find_file(const char *name)
{
    for (const www_file *w = www_files; w->name != NULL; w++)
        if (strcmp(w->name, name) == 0)
            return w;
    return NULL;
}

/* Writes the template with each placeholder comment replaced. */
/* What cpprof's own threads cost, and how to leave them out. */
static void put_profiler(FILE *f)
{
    double cpu;
    size_t threads;
    http_own_cpu(&cpu, &threads);
    unsigned helpers;
    double census_cpu = census_crew_cpu_ns(&helpers) / 1e9;
    fprintf(f, "<p class=\"note\" id=\"profiler\">This server's %zu "
               "threads have used %.3f s of CPU; they carry the label "
               "<code>pprof_internal=http</code> (leave them out with "
               "<code>-tagignore pprof_internal=http</code>).  The CPU "
               "profiler's collector threads have used %.3f s; they carry "
               "<code>pprof_internal=sampler</code>.  The thread census's "
               "%u helpers have used %.3f s; they carry "
               "<code>pprof_internal=census</code>.</p>",
            threads, cpu, sampler_collector_cpu_ns() / 1e9, helpers,
            census_cpu);
}

static void put_page(FILE *f, const www_file *page, const index_entry *e,
                     size_t n)
{
    static const char rows[] = "<!--rows-->",
                      descriptions[] = "<!--descriptions-->",
                      unsampled[] = "<!--unsampled-->",
                      label_cap[] = "<!--labelcap-->",
                      profiler[] = "<!--profiler-->",
                      workers[] = "<!--workers-->";
    const char *p = (const char *)page->data, *end = p + page->len;
    while (p < end) {
        const char *mark = memchr(p, '<', (size_t)(end - p));
        if (mark == NULL)
            mark = end;
        fwrite(p, 1, (size_t)(mark - p), f);
        p = mark;
        if (p == end)
            break;
        size_t left = (size_t)(end - p);
        if (left >= sizeof rows - 1 && !memcmp(p, rows, sizeof rows - 1)) {
            put_rows(f, e, n);
            p += sizeof rows - 1;
        } else if (left >= sizeof profiler - 1 &&
                   !memcmp(p, profiler, sizeof profiler - 1)) {
            put_profiler(f);
            p += sizeof profiler - 1;
        } else if (left >= sizeof workers - 1 &&
                   !memcmp(p, workers, sizeof workers - 1)) {
            http_forks_put_html(f);
            p += sizeof workers - 1;
        } else if (left >= sizeof descriptions - 1 &&
                   !memcmp(p, descriptions, sizeof descriptions - 1)) {
            put_descriptions(f, e, n);
            p += sizeof descriptions - 1;
        } else if (left >= sizeof unsampled - 1 &&
                   !memcmp(p, unsampled, sizeof unsampled - 1)) {
            put_unsampled(f);
            p += sizeof unsampled - 1;
        } else if (left >= sizeof label_cap - 1 &&
                   !memcmp(p, label_cap, sizeof label_cap - 1)) {
            put_label_cap(f);
            p += sizeof label_cap - 1;
        } else {
            fputc(*p++, f);
        }
    }
}

static int reply_html(http_req *r, const index_entry *e, size_t n)
{
    const www_file *page = find_file("index.html");
    char *text;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    if (page == NULL || f == NULL)
        return -ENOMEM;
    put_page(f, page, e, n);
    if (fclose(f) != 0)
        return -ENOMEM;
    int rc = http_reply(r, page->content_type, NULL, text, len);
    free(text);
    return rc;
}

int http_index(http_req *r)
{
    const char *format = http_query(r, "format");
    bool json = format != NULL && strcmp(format, "json") == 0;
    if (format != NULL && !json && strcmp(format, "html") != 0)
        return http_error(r, 400,
                          "invalid value for \"format\" - must be html or "
                          "json");
    index_entry e[MAX_ENTRIES];
    size_t n = list_entries(e);
    return json ? reply_json(r, e, n) : reply_html(r, e, n);
}

/* /debug/pprof/www/NAME: the page's stylesheet and script. */
int http_www(http_req *r)
{
    const www_file *w = find_file(http_path(r) + strlen("www/"));
    if (w == NULL)
        return http_error(r, 404, "404 page not found");
    return http_reply(r, w->content_type, NULL, w->data, w->len);
}
