/*
 * http_heap.c -- GET /debug/pprof/heap, allocs, block, mutex and
 * threadcreate: the profiles Go serves without labels.
 *
 * Each is a named_profile (http_named.h): a snapshot function from its
 * collector (heap.c, contention.c, threadcreate.c), the proto's sample
 * types, period and samples exactly as Go's runtime/pprof writes them, and
 * a head for Go's debug=1 text records (gotext.h).  None carries string
 * labels, even when the work ran inside a labelled scope: in Go these
 * profiles are unlabelled, so `-tagfocus` matches nothing on them
 * (README, "Unlabelled profiles").
 *
 * heap and allocs are one data set (cumulative allocations and what is
 * still in use, per stack and object size) with different default sample
 * types: Go leaves heap's unset, which pprof reads as the last type,
 * inuse_space; allocs' is alloc_space.  `?gc=1` is accepted on heap and
 * does nothing: C has no collector to run, and the in-use figures are
 * already current (Go's are as of the last GC).
 */
#define _GNU_SOURCE
#include "http.h"
#include "config.h"
#include "contention.h"
#include "gotext.h"
#include "http_named.h"
#include "heap.h"
#include "threadcreate.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>

/* ---- heap and allocs -------------------------------------------------- */

/* One heap record, scaled to estimate the totals as Go does; *rate is the
 * sampling rate. */
static int add_heap_record(builder *b, const sampleset_entry *e, void *rate)
{
    int64_t v[HEAP_NVALUES];
    for (size_t j = 0; j < HEAP_NVALUES; j++)
        v[j] = e->values[j];
    heap_scale(&v[HEAP_ALLOC_OBJECTS], &v[HEAP_ALLOC_BYTES], e->num,
               *(long *)rate);
    heap_scale(&v[HEAP_INUSE_OBJECTS], &v[HEAP_INUSE_BYTES], e->num,
               *(long *)rate);
    builder_numlabel size = {"bytes", e->num, "bytes"};
    return builder_add_sample_at_gen(b, e->pcs, e->depth, e->flags, e->gen, v,
                                     NULL, &size, 1);
}

static int heap_build(builder *b, const sampleset *s, const char *dflt)
{
    static const value_type types[HEAP_NVALUES] = {{"alloc_objects", "count"},
                                                   {"alloc_space", "bytes"},
                                                   {"inuse_objects", "count"},
                                                   {"inuse_space", "bytes"}};
    long rate = cfg_int(CFG_MEM_PROFILE_RATE);
    int rc = named_add_types(b, types, HEAP_NVALUES,
                             (value_type){"space", "bytes"}, rate);
    if (rc == 0 && dflt)
        rc = builder_set_default_sample_type(b, dflt);
    const char *unseen = heap_unseen();
    if (rc == 0 && unseen)
        rc = builder_add_comment(b, unseen);
    return rc ? rc : sampleset_build(b, s, add_heap_record, &rate);
}

static int heap_build_inuse(builder *b, const sampleset *s)
{
    return heap_build(b, s, NULL);
}

static int heap_build_alloc(builder *b, const sampleset *s)
{
    return heap_build(b, s, "alloc_space");
}

/* The stack of entry e as a text record. */
static text_record entry_record(const sampleset_entry *e)
{
    return (text_record){e->pcs, e->depth, e->flags, e->gen, NULL, NULL};
}

static void heap_head(FILE *f, size_t i, void *entries, text_record *rec)
{
    const sampleset_entry *e = &((const sampleset_entry *)entries)[i];
    const int64_t *v = e->values;
    fprintf(f, "%lld: %lld [%lld: %lld]", (long long)v[HEAP_INUSE_OBJECTS],
            (long long)v[HEAP_INUSE_BYTES], (long long)v[HEAP_ALLOC_OBJECTS],
            (long long)v[HEAP_ALLOC_BYTES]);
    *rec = entry_record(e);
}

/* Go's legacy heap text (runtime/pprof writeHeapInternal, debug=1): raw
 * sampled counts, largest in-use first; then, where Go prints
 * runtime.MemStats, glibc's mallinfo2 and the profiler's own counters. */
static int heap_text(FILE *f, const sampleset *s, int debug)
{
    (void)debug;
    sampleset_entry *e;
    size_t n;
    int rc = sampleset_sorted(s, HEAP_INUSE_BYTES, &e, &n);
    if (rc != 0)
        return rc;
    int64_t t[HEAP_NVALUES] = {0};
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < HEAP_NVALUES; j++)
            t[j] += e[i].values[j];
    fprintf(f, "heap profile: %lld: %lld [%lld: %lld] @ heap/%ld\n",
            (long long)t[HEAP_INUSE_OBJECTS], (long long)t[HEAP_INUSE_BYTES],
            (long long)t[HEAP_ALLOC_OBJECTS], (long long)t[HEAP_ALLOC_BYTES],
            2 * cfg_int(CFG_MEM_PROFILE_RATE));
    text_write_records(f, n, heap_head, e);
    free(e);
    struct mallinfo2 mi = mallinfo2();
    heap_stats st;
    heap_get_stats(&st);
    fprintf(f, "\n# glibc mallinfo2\n# Arena = %zu\n# InUse = %zu\n"
               "# Free = %zu\n# Mmapped = %zu\n# MmappedChunks = %zu\n",
            mi.arena, mi.uordblks, mi.fordblks, mi.hblkhd, mi.hblks);
    fprintf(f, "\n# cpprof\n# MemProfileRate = %ld\n# SkippedSamples = %lu\n"
               "# SkippedFrees = %lu\n",
            cfg_int(CFG_MEM_PROFILE_RATE), st.skipped_allocs,
            st.skipped_frees);
    const char *unseen = heap_unseen();
    if (unseen)
        fprintf(f, "# Unseen = %s\n", unseen);
    return 0;
}

static const named_profile heap_profile = {
    "heap", true, heap_snapshot, heap_build_inuse, heap_text, false};
static const named_profile allocs_profile = {
    "allocs", true, heap_snapshot, heap_build_alloc, heap_text, false};

/* With the allocation profiler declined (heap_declined), the reason, not
 * an empty profile a reader would take for a program that allocates
 * nothing. */
static int serve_heap(http_req *r, const named_profile *p)
{
    const char *why = heap_declined();
    if (why)
        return http_error(r, 501, "no heap profile: %s", why);
    return http_serve_named(r, p);
}

int http_heap(http_req *r) { return serve_heap(r, &heap_profile); }
int http_allocs(http_req *r) { return serve_heap(r, &allocs_profile); }

/* ---- block and mutex ------------------------------------------------- */

static int64_t events(int64_t count_milli)
{
    return (count_milli + 500) / 1000;
}

static int add_contention_record(builder *b, const sampleset_entry *e,
                                 void *arg)
{
    (void)arg;
    int64_t v[2] = {events(e->values[CONT_COUNT_MILLI]),
                    e->values[CONT_DELAY_NS]};
    return builder_add_sample_at_gen(b, e->pcs, e->depth, e->flags, e->gen, v,
                                     NULL, NULL, 0);
}

/* Go's printCountCycleProfile: contentions/count and delay/nanoseconds,
 * period contentions/count 1. */
static int contention_build(builder *b, const sampleset *s)
{
    static const value_type types[] = {{"contentions", "count"},
                                       {"delay", "nanoseconds"}};
    int rc = named_add_types(b, types, 2, types[0], 1);
    return rc ? rc : sampleset_build(b, s, add_contention_record, NULL);
}

static void contention_head(FILE *f, size_t i, void *entries,
                            text_record *rec)
{
    const sampleset_entry *e = &((const sampleset_entry *)entries)[i];
    fprintf(f, "%lld %lld", (long long)e->values[CONT_DELAY_NS],
            (long long)events(e->values[CONT_COUNT_MILLI]));
    *rec = entry_record(e);
}

/* Go's text form: "CYCLES COUNT @ PCS" per record, largest delay first;
 * our cycles are nanoseconds, so cycles/second is 1e9. */
static int contention_text(FILE *f, const sampleset *s, const char *title,
                           bool mutex)
{
    sampleset_entry *e;
    size_t n;
    int rc = sampleset_sorted(s, CONT_DELAY_NS, &e, &n);
    if (rc != 0)
        return rc;
    fprintf(f, "--- %s:\ncycles/second=1000000000\n", title);
    if (mutex)
        fprintf(f, "sampling period=%ld\n",
                cfg_int(CFG_MUTEX_PROFILE_FRACTION));
    text_write_records(f, n, contention_head, e);
    free(e);
    return 0;
}

static int block_text(FILE *f, const sampleset *s, int debug)
{
    (void)debug;
    return contention_text(f, s, "contention", false);
}

static int mutex_text(FILE *f, const sampleset *s, int debug)
{
    (void)debug;
    return contention_text(f, s, "mutex", true);
}

static const named_profile block_profile = {
    "block", true, block_snapshot, contention_build, block_text, false};
static const named_profile mutex_profile = {
    "mutex", true, mutex_snapshot, contention_build, mutex_text, false};

int http_block(http_req *r) { return http_serve_named(r, &block_profile); }
int http_mutex(http_req *r) { return http_serve_named(r, &mutex_profile); }

/* ---- threadcreate ---------------------------------------------------- */

static int add_threadcreate_record(builder *b, const sampleset_entry *e,
                                   void *arg)
{
    (void)arg;
    return builder_add_sample_at_gen(b, e->pcs, e->depth, e->flags, e->gen,
                                     e->values, NULL, NULL, 0);
}

static int threadcreate_build(builder *b, const sampleset *s)
{
    static const value_type type = {"threadcreate", "count"};
    int rc = named_add_types(b, &type, 1, type, 1);
    return rc ? rc : sampleset_build(b, s, add_threadcreate_record, NULL);
}

static void threadcreate_head(FILE *f, size_t i, void *entries,
                              text_record *rec)
{
    const sampleset_entry *e = &((const sampleset_entry *)entries)[i];
    fprintf(f, "%lld", (long long)e->values[0]);
    *rec = entry_record(e);
}

/* Go's printCountProfile: "threadcreate profile: total N", then "COUNT @
 * PCS" and the frames per stack, most frequent first. */
static int threadcreate_text(FILE *f, const sampleset *s, int debug)
{
    (void)debug;
    sampleset_entry *e;
    size_t n;
    int rc = sampleset_sorted(s, 0, &e, &n);
    if (rc != 0)
        return rc;
    int64_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += e[i].values[0];
    fprintf(f, "threadcreate profile: total %lld\n", (long long)total);
    text_write_records(f, n, threadcreate_head, e);
    free(e);
    return 0;
}

static const named_profile threadcreate_profile = {
    "threadcreate", true, threadcreate_snapshot, threadcreate_build,
    threadcreate_text, false};

int http_threadcreate(http_req *r)
{
    return http_serve_named(r, &threadcreate_profile);
}
