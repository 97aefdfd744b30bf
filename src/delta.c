/*
 * delta.c -- sample sets, Go's text-form helpers, and the one function that
 * serves every named profile (heap, allocs, block, mutex, threadcreate,
 * goroutine) whole or as a `?seconds=N` delta.
 *
 * A delta is computed on the raw snapshot values, before any scaling the
 * profile type applies when building: Go subtracts scaled profiles with
 * profile.Merge, which gives the same result up to rounding.  Entries whose
 * difference is all zero are left out, as Merge leaves them out.
 *
 * Go's order of checks (net/http/pprof serveDeltaProfile) is kept exactly:
 * a bad seconds value, then a profile without delta support, then debug.
 * Like Go, `seconds=` with an empty value is no delta at all.  Unlike Go,
 * which reads `debug` with strconv.Atoi and takes anything unparsable as
 * 0, a `debug` that is not 0, 1 or 2 is a 400: a bad value of a known
 * parameter is never a silent default here.
 */
#define _GNU_SOURCE
#include "delta.h"
#include "collect.h"
#include "own.h"
#include "labels.h"
#include "stacktab.h"
#include "symbolize.h"
#include "unwind.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sset_entry {
    uint64_t hash;
    uintptr_t *pcs;
    size_t depth;
    unsigned flags;
    uint64_t gen;
    const cpprof_labelset *labels;
    int64_t num;
    int64_t *values;
};

struct sampleset {
    size_t nvalues;
    struct sset_entry *e;
    size_t n, cap;
    size_t *slots; /* entry index + 1; 0 is empty */
    size_t nslots;
};

/* ---- Sample sets ----------------------------------------------------- */

sampleset *sampleset_new(size_t nvalues)
{
    sampleset *s = calloc(1, sizeof *s);
    if (s)
        s->nvalues = nvalues;
    return s;
}

void sampleset_free(sampleset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        free(s->e[i].pcs);
        free(s->e[i].values);
        labelset_drop(s->e[i].labels);
    }
    free(s->e);
    free(s->slots);
    free(s);
}

/* A sample's key: what find_or_add looks up. */
struct key {
    const uintptr_t *pcs;
    size_t depth;
    unsigned flags;
    uint64_t gen;
    const cpprof_labelset *labels;
    int64_t num;
};

static uint64_t key_hash(const struct key *k)
{
    uint64_t h = 1469598103934665603ull;
    uint64_t words[] = {k->depth, k->flags, k->gen, (uintptr_t)k->labels,
                        (uint64_t)k->num};
    enum { NWORDS = sizeof words / sizeof words[0] };
    for (size_t i = 0; i < NWORDS + k->depth; i++) {
        h ^= i < NWORDS ? words[i] : k->pcs[i - NWORDS];
        h *= 1099511628211ull;
        h ^= h >> 29;
    }
    return h;
}

static bool key_equal(const struct sset_entry *e, uint64_t hash,
                      const struct key *k)
{
    return e->hash == hash && e->depth == k->depth && e->flags == k->flags &&
           e->gen == k->gen && e->labels == k->labels && e->num == k->num &&
           memcmp(e->pcs, k->pcs, k->depth * sizeof *k->pcs) == 0;
}

static int grow_slots(sampleset *s)
{
    size_t nslots = s->nslots ? 2 * s->nslots : 64;
    size_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < s->n; i++) {
        size_t j = s->e[i].hash & (nslots - 1);
        while (slots[j])
            j = (j + 1) & (nslots - 1);
        slots[j] = i + 1;
    }
    free(s->slots);
    s->slots = slots;
    s->nslots = nslots;
    return 0;
}

static int append_entry(sampleset *s, uint64_t hash, const struct key *k)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 32;
        struct sset_entry *e = realloc(s->e, cap * sizeof *e);
        if (!e)
            return -ENOMEM;
        s->e = e;
        s->cap = cap;
    }
    struct sset_entry *e = &s->e[s->n];
    e->pcs = malloc((k->depth ? k->depth : 1) * sizeof *k->pcs);
    e->values = calloc(s->nvalues ? s->nvalues : 1, sizeof *e->values);
    if (!e->pcs || !e->values) {
        free(e->pcs);
        free(e->values);
        return -ENOMEM;
    }
    memcpy(e->pcs, k->pcs, k->depth * sizeof *k->pcs);
    e->hash = hash;
    e->depth = k->depth;
    e->flags = k->flags;
    e->gen = k->gen;
    e->labels = labelset_hold(k->labels);
    e->num = k->num;
    return (int)s->n++;
}

/* The index of the entry with this key, created when missing. */
static int find_or_add(sampleset *s, const struct key *k)
{
    if ((s->n + 1) * 2 > s->nslots && grow_slots(s) != 0)
        return -ENOMEM;
    uint64_t hash = key_hash(k);
    size_t j = hash & (s->nslots - 1);
    for (; s->slots[j]; j = (j + 1) & (s->nslots - 1))
        if (key_equal(&s->e[s->slots[j] - 1], hash, k))
            return (int)(s->slots[j] - 1);
    int i = append_entry(s, hash, k);
    if (i >= 0)
        s->slots[j] = (size_t)i + 1;
    return i;
}

int sampleset_add(sampleset *s, const uintptr_t *pcs, size_t depth,
                  unsigned flags, uint64_t gen, const cpprof_labelset *labels,
                  int64_t num, const int64_t *values)
{
    int i = find_or_add(s, &(struct key){pcs, depth, flags, gen, labels, num});
    if (i < 0)
        return i;
    for (size_t v = 0; v < s->nvalues; v++)
        s->e[i].values[v] += values[v];
    return 0;
}

struct add_ctx {
    sampleset *s;
    int rc;
};

static void add_stacktab_entry(const uintptr_t *pcs, size_t depth,
                               unsigned flags, uint64_t gen,
                               const cpprof_labelset *labels,
                               const int64_t *values, void *arg)
{
    struct add_ctx *c = arg;
    if (c->rc == 0)
        c->rc = sampleset_add(c->s, pcs, depth, flags, gen, labels, 0,
                              values);
}

int sampleset_add_stacktab(sampleset *s, const stacktab *t)
{
    struct add_ctx c = {s, 0};
    stacktab_foreach(t, add_stacktab_entry, &c);
    return c.rc;
}

int sampleset_copy_locked(stacktab *const *tab, size_t nvalues,
                          atomic_flag *lock, sampleset **out)
{
    sampleset *s = sampleset_new(nvalues);
    if (!s)
        return -ENOMEM;
    int rc = 0;
    own_busy = 1;
    collect_spin_lock(lock);
    if (*tab)
        rc = sampleset_add_stacktab(s, *tab);
    collect_spin_unlock(lock);
    own_busy = 0;
    if (rc != 0) {
        sampleset_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* The negated values on the heap, not in a variable-length array: no
 * frame of the library's grows with its data (configure.ac). */
int sampleset_subtract(sampleset *s, const sampleset *earlier)
{
    int64_t *neg = malloc((s->nvalues ? s->nvalues : 1) * sizeof *neg);
    if (!neg)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < earlier->n && rc == 0; i++) {
        const struct sset_entry *e = &earlier->e[i];
        for (size_t v = 0; v < s->nvalues; v++)
            neg[v] = -e->values[v];
        rc = sampleset_add(s, e->pcs, e->depth, e->flags, e->gen, e->labels,
                           e->num, neg);
    }
    free(neg);
    return rc;
}

static int by_value_desc(const void *a, const void *b, void *by)
{
    int64_t x = ((const sampleset_entry *)a)->values[*(size_t *)by];
    int64_t y = ((const sampleset_entry *)b)->values[*(size_t *)by];
    return x > y ? -1 : x < y;
}

size_t sampleset_count(const sampleset *s)
{
    return s->n;
}

static bool all_zero(const int64_t *values, size_t n)
{
    for (size_t v = 0; v < n; v++)
        if (values[v] != 0)
            return false;
    return true;
}

int sampleset_sorted(const sampleset *s, size_t by, sampleset_entry **out,
                     size_t *n)
{
    sampleset_entry *list = malloc((s->n ? s->n : 1) * sizeof *list);
    if (!list)
        return -ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct sset_entry *e = &s->e[i];
        if (all_zero(e->values, s->nvalues))
            continue;
        list[k++] = (sampleset_entry){e->pcs,    e->depth, e->flags, e->gen,
                                      e->labels, e->num,   e->values};
    }
    if (by < s->nvalues)
        qsort_r(list, k, sizeof *list, by_value_desc, &by);
    *out = list;
    *n = k;
    return 0;
}

int named_add_types(builder *b, const value_type *types, size_t n,
                    value_type period, int64_t every)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = builder_add_sample_type(b, types[i].type, types[i].unit);
    return rc ? rc : builder_set_period(b, period.type, period.unit, every);
}

int sampleset_build(builder *b, const sampleset *s,
                    int (*add)(builder *b, const sampleset_entry *e,
                               void *arg),
                    void *arg)
{
    sampleset_entry *e = NULL;
    size_t n = 0;
    int rc = sampleset_sorted(s, SIZE_MAX, &e, &n);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = add(b, &e[i], arg);
    free(e);
    return rc;
}

/* Whether pc lies in an executable mapping (a session is open). */
static bool mapped(uintptr_t pc)
{
    size_t lo = 0, hi = symbolize_mapping_count();
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const symbolize_mapping *m = symbolize_mapping_at(mid);
        if (pc < m->start)
            hi = mid;
        else if (pc >= m->limit)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/* The event collectors walk frame pointers without the CPU walker's table
 * of executable regions (collect.c), so a walk through code without frame
 * pointers can end in a word that is no return address: each stack is cut
 * at its first address outside every executable mapping, here, outside
 * the allocator. */
static void trim_unmapped(sampleset *s)
{
    symbolize_begin();
    for (size_t i = 0; i < s->n; i++)
        for (size_t d = 1; d < s->e[i].depth; d++)
            if (!mapped(s->e[i].pcs[d])) {
                s->e[i].depth = d;
                break;
            }
    symbolize_end();
}

/* ---- Text forms ------------------------------------------------------ */

void text_write_pcs(FILE *f, const uintptr_t *pcs, size_t depth)
{
    for (size_t i = 0; i < depth; i++)
        fprintf(f, " %#lx", (unsigned long)pcs[i]);
    fputc('\n', f);
}

/* The frames at pc (exact or already one byte back), taken in generation
 * `gen`: from the object that was mapped there then (unwind.h), or NULL
 * when that is no longer known (*why says so).  Within a session; *path
 * is the caller's to free. */
static const symbolize_result *frames_at(uint64_t gen, uintptr_t pc,
                                         char **path, const char **why)
{
    unwind_gone g;
    int where = unwind_gone_at(gen, pc, &g);
    *path = NULL;
    *why = where == UNWIND_PC_FORGOTTEN ? "[unloaded]" : "[out of memory]";
    if (where == UNWIND_PC_CURRENT)
        return symbolize_pc(pc);
    if (where != UNWIND_PC_GONE)
        return NULL;
    *path = (char *)g.path;
    symbolize_gone o = {g.path, g.dev, g.ino, g.bias};
    const char *build_id;
    return symbolize_gone_pc(&o, pc, &build_id);
}

void text_write_frames(FILE *f, const uintptr_t *pcs, size_t depth,
                       unsigned flags, uint64_t gen)
{
    for (size_t i = 0; i < depth; i++) {
        bool exact = i == 0 && (flags & STACK_LEAF_EXACT);
        uintptr_t pc = exact || pcs[i] == 0 ? pcs[i] : pcs[i] - 1;
        char *path;
        const char *why;
        const symbolize_result *r = frames_at(gen, pc, &path, &why);
        if (!r)
            fprintf(f, "#\t%#lx\t%s+0x0\t:0\n", (unsigned long)pc, why);
        for (size_t j = 0; r && j < r->nframes; j++) {
            const symbolize_frame *fr = &r->frames[j];
            fprintf(f, "#\t%#lx\t", (unsigned long)pc);
            text_put_escaped(f, fr->name, false);
            fprintf(f, "+%#lx\t", (unsigned long)r->sym_offset);
            text_put_escaped(f, fr->file, false);
            fprintf(f, ":%lld\n", (long long)fr->line);
        }
        free(path);
    }
}

/* ---- Serving a named profile ----------------------------------------- */

#define POLL_NS 100000000L

bool http_wait_window(http_req *r, long seconds)
{
    struct timespec now, end, next;
    clock_gettime(CLOCK_MONOTONIC, &now);
    end = now;
    end.tv_sec += seconds;
    next = now;
    for (;;) {
        next.tv_nsec += POLL_NS;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        bool last = next.tv_sec > end.tv_sec ||
                    (next.tv_sec == end.tv_sec && next.tv_nsec >= end.tv_nsec);
        if (last)
            next = end;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) ==
               EINTR)
            ;
        if (last)
            return true;
        if (http_client_gone(r))
            return false;
    }
}

/* Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits, no
 * overflow.  Returns 0 and *out, or -EINVAL. */
static int parse_int64(const char *s, int64_t *out)
{
    bool neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return -EINVAL;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*s - '0');
        if (v > (limit - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* `debug` into *debug: absent is 0; 0, 1 or 2; anything else -EINVAL. */
static int debug_level(http_req *r, long *debug)
{
    *debug = 0;
    return http_query_long(r, "debug", 0, 2, debug) < 0 ? -EINVAL : 0;
}

/* Builds and encodes the proto of snapshot s. */
static int encode(const named_profile *p, const sampleset *s, int64_t time_ns,
                  int64_t duration_ns, unsigned char **buf, size_t *len)
{
    builder *b = builder_new();
    if (!b)
        return -ENOMEM;
    builder_set_time(b, time_ns, duration_ns);
    int rc = p->build(b, s);
    if (rc == 0)
        rc = builder_encode(b, buf, len);
    builder_free(b);
    return rc;
}

static int reply_proto(http_req *r, const named_profile *p, const sampleset *s,
                       int64_t time_ns, int64_t duration_ns,
                       const char *attachment)
{
    unsigned char *buf;
    size_t len;
    int rc = encode(p, s, time_ns, duration_ns, &buf, &len);
    if (rc != 0)
        return http_error(r, 500, "failed to build profile: %s",
                          cpprof_strerror(rc));
    rc = http_reply_profile(r, attachment, p->labelled, buf, len);
    free(buf);
    return rc;
}

static int reply_text(http_req *r, const named_profile *p, const sampleset *s,
                      int debug)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return http_error(r, 500, "out of memory");
    int rc = p->text(f, s, debug);
    if (fclose(f) != 0 && rc == 0)
        rc = -ENOMEM;
    if (rc == 0)
        rc = http_reply(r, "text/plain; charset=utf-8", NULL, text, len);
    else
        rc = http_error(r, 500, "failed to write profile: %s",
                        cpprof_strerror(rc));
    free(text);
    return rc;
}

static int serve_delta(http_req *r, const named_profile *p, const char *sec)
{
    int64_t seconds;
    if (parse_int64(sec, &seconds) != 0 || seconds <= 0)
        return http_error(r, 400, "invalid value for \"seconds\" - must be "
                                  "a positive integer");
    if (!p->delta)
        return http_error(r, 400, "\"seconds\" parameter is not supported "
                                  "for this profile type");
    long debug;
    if (debug_level(r, &debug) != 0 || debug != 0)
        return http_error(r, 400, "seconds and debug params are incompatible");
    sampleset *x, *y = NULL;
    int rc = p->snapshot(&x);
    if (rc != 0)
        return http_error(r, 500, "failed to collect profile: %s",
                          cpprof_strerror(rc));
    int64_t t0 = clock_ns(CLOCK_REALTIME);
    if (!http_wait_window(r, (long)seconds)) {
        sampleset_free(x);
        return http_error(r, 500, "context canceled");
    }
    int64_t t1 = clock_ns(CLOCK_REALTIME);
    rc = p->snapshot(&y);
    if (rc == 0)
        rc = sampleset_subtract(y, x);
    sampleset_free(x);
    if (rc != 0) {
        sampleset_free(y);
        return http_error(r, 500, "failed to collect profile: %s",
                          cpprof_strerror(rc));
    }
    trim_unmapped(y);
    char name[128];
    snprintf(name, sizeof name, "%s-delta", p->name);
    rc = reply_proto(r, p, y, t1, t1 - t0, name);
    sampleset_free(y);
    return rc;
}

int http_serve_named(http_req *r, const named_profile *p)
{
    const char *format_error = http_profile_format_error(r);
    if (format_error != NULL)
        return http_error(r, 400, "%s", format_error);
    const char *sec = http_query(r, "seconds");
    if (sec && *sec)
        return serve_delta(r, p, sec);
    long debug;
    if (debug_level(r, &debug) != 0)
        return http_error(r, 400,
                          "invalid value for \"debug\" - must be 0, 1 or 2");
    sampleset *s;
    int64_t t0 = clock_ns(CLOCK_REALTIME);
    int rc = p->snapshot(&s);
    if (rc != 0)
        return http_error(r, 500, "failed to collect profile: %s",
                          cpprof_strerror(rc));
    trim_unmapped(s);
    if (debug != 0)
        rc = reply_text(r, p, s, (int)debug);
    else /* a snapshot has no window: Go leaves duration_nanos 0, and
          * pprof then prints no Duration (a delta's is its window) */
        rc = reply_proto(r, p, s, t0, 0, p->name);
    sampleset_free(s);
    return rc;
}
