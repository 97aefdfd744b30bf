/*
 * builder.c -- the profile builder: samples in, gzip'd profile.proto out.
 *
 * Shape: everything the profile refers to by index or id (strings,
 * functions, locations, samples, labels) is kept in growable arrays, each
 * with a hash index where lookups are needed, so that building a profile of
 * N distinct stacks costs O(N) and a few dozen allocations.  The protobuf-c
 * messages are the array elements themselves; only the arrays of pointers
 * protobuf-c wants are made at encode time, when nothing moves any more.
 *
 * Locations are made per address (and the object they lie in) as samples
 * come in, without lines: as in google/pprof, symbolization is a pass over
 * the built profile, made by the symbolizer above this level
 * (symbolize_profile.c) through the small API at the end of builder.h,
 * before the encoding.  Every rule pprof's strict parser has (see
 * profile.proto) is enforced here rather than by callers: string 0 is "",
 * ids are index + 1, at least one mapping exists.
 *
 * Samples walked under an older generation of the mappings (unwind.h,
 * "Generations"; the stacktab's samples carry theirs) may hold PCs of an
 * object dlclosed since, whose address another object may have taken by
 * now.  Such a PC gets a location of its own, keyed by the gone mapping
 * as well as the address, which the pass symbolizes from the gone
 * object's file under a Mapping of its own: never as the function that is
 * at that address now.
 */
#include "builder.h"
#include "labels.h"
#include "own.h"
#include "profile.pb-c.h"
#include "unwind.h"
#include "util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

/* Root frame added to a stack the unwinder cut short. */
#define TRUNCATED_FRAME "cpprof.truncated"
/* Frame of a PC in an unloaded object no longer known (unwind.h,
 * UNWIND_GONE_KEPT). */
#define UNLOADED_FRAME "[unloaded]"

/* ---- The builder -------------------------------------------------------- */

/* A location before encoding: its lines and mapping are given by the
 * symbolization pass. */
struct loc {
    uintptr_t address; /* 0 for a pseudo-frame */
    uint64_t pseudo_function; /* function id of a pseudo-frame, else 0 */
    size_t gone; /* 1 + index in b->gone: in an object unloaded since */
    size_t lines_at, nlines; /* in b->lines */
    int mapping; /* index in the profile's mappings, -1 for none */
};

/* A mapping of an object unloaded since its samples were taken. */
struct gone_map {
    unwind_gone at; /* at.path points at `path` */
    char *path;
};

struct sample {
    size_t locs_at, nlocs;     /* in b->location_ids */
    size_t values_at;          /* in b->values */
    size_t labels_at, nlabels; /* in b->labels */
};

/* The labels of a label set, made once and shared by its samples. */
struct set_labels {
    const cpprof_labelset *set; /* a reference of the builder's */
    size_t labels_at, nlabels;
};

struct builder {
    char **strings;
    size_t nstrings, capstrings;
    struct hashindex string_index;

    ValueType *sample_types;
    size_t nsample_types, capsample_types;
    ValueType period_type;
    bool has_period;
    int64_t period, time_nanos, duration_nanos, default_sample_type;
    int64_t comments[4]; /* string indexes */
    size_t ncomments;

    Function *functions;
    size_t nfunctions, capfunctions;
    struct hashindex function_index;

    struct loc *locs;
    size_t nlocs, caplocs;
    struct hashindex loc_index;
    Line *lines;
    size_t nlines, caplines;

    struct sample *samples;
    size_t nsamples, capsamples;
    uint64_t *location_ids;
    size_t nlocation_ids, caplocation_ids;
    int64_t *values;
    size_t nvalues, capvalues;
    Label *labels;
    size_t nlabels, caplabels;
    struct set_labels *sets;
    size_t nsets, capsets;
    struct hashindex set_index;

    struct gone_map *gone;
    size_t ngone, capgone;

    Mapping *mappings; /* the symbolization pass's */
    size_t nmappings, capmappings;
};

/* ---- Strings ------------------------------------------------------------ */

static bool same_string(const void *ctx, size_t item, const void *key)
{
    const builder *b = ctx;
    return strcmp(b->strings[item], key) == 0;
}

/* Index of s in the string table, added when new; negative on error. */
static int64_t string_id(builder *b, const char *s)
{
    uint64_t hash = hash_string(s);
    struct hashindex_slot *slot =
        hashindex_find(&b->string_index, hash, same_string, b, s);
    if (!slot)
        return -ENOMEM;
    if (slot->item)
        return (int64_t)slot->item - 1;
    char *copy = strdup(s);
    if (!copy ||
        ARRAY_RESERVE(b->strings, b->nstrings, b->capstrings, 1) != 0) {
        free(copy);
        return -ENOMEM;
    }
    b->strings[b->nstrings] = copy;
    hashindex_set(&b->string_index, slot, hash, b->nstrings);
    return (int64_t)b->nstrings++;
}

builder *builder_new(void)
{
    builder *b = calloc(1, sizeof *b);
    if (!b || string_id(b, "") != 0) { /* pprof wants string 0 empty */
        builder_free(b);
        return NULL;
    }
    return b;
}

void builder_free(builder *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->nstrings; i++)
        free(b->strings[i]);
    for (size_t i = 0; i < b->nsets; i++)
        labelset_drop(b->sets[i].set);
    free(b->strings);
    hashindex_free(&b->string_index);
    free(b->sample_types);
    free(b->functions);
    hashindex_free(&b->function_index);
    free(b->locs);
    hashindex_free(&b->loc_index);
    free(b->lines);
    free(b->samples);
    free(b->location_ids);
    free(b->values);
    free(b->labels);
    free(b->sets);
    hashindex_free(&b->set_index);
    for (size_t i = 0; i < b->ngone; i++)
        free(b->gone[i].path);
    free(b->gone);
    free(b->mappings);
    free(b);
}

/* ---- Profile header ----------------------------------------------------- */

static int make_value_type(builder *b, const char *type, const char *unit,
                           ValueType *out)
{
    if (!type || !unit)
        return -EINVAL;
    int64_t t = string_id(b, type), u = string_id(b, unit);
    if (t < 0 || u < 0)
        return -ENOMEM;
    *out = (ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
    out->type = t;
    out->unit = u;
    return 0;
}

int builder_add_sample_type(builder *b, const char *type, const char *unit)
{
    if (b->nsamples) /* every sample must have a value per type */
        return -EINVAL;
    ValueType vt;
    int rc = make_value_type(b, type, unit, &vt);
    if (rc == 0)
        rc = ARRAY_RESERVE(b->sample_types, b->nsample_types,
                           b->capsample_types, 1);
    if (rc == 0)
        b->sample_types[b->nsample_types++] = vt;
    return rc;
}

int builder_set_period(builder *b, const char *type, const char *unit,
                       int64_t period)
{
    int rc = make_value_type(b, type, unit, &b->period_type);
    if (rc == 0) {
        b->has_period = true;
        b->period = period;
    }
    return rc;
}

void builder_set_time(builder *b, int64_t time_nanos, int64_t duration_nanos)
{
    b->time_nanos = time_nanos;
    b->duration_nanos = duration_nanos;
}

int builder_set_default_sample_type(builder *b, const char *type)
{
    if (!type)
        return -EINVAL;
    int64_t t = string_id(b, type);
    if (t < 0)
        return (int)t;
    b->default_sample_type = t;
    return 0;
}

int builder_add_comment(builder *b, const char *text)
{
    if (b->ncomments == sizeof b->comments / sizeof b->comments[0])
        return -ENOSPC;
    int64_t t = string_id(b, text);
    if (t < 0)
        return (int)t;
    b->comments[b->ncomments++] = t;
    return 0;
}

/* ---- Functions and locations -------------------------------------------- */

static uint64_t function_hash(const Function *f)
{
    return hash_mix(hash_mix(hash_mix(hash_mix(0, (uint64_t)f->name), (uint64_t)f->system_name),
                   (uint64_t)f->filename),
               (uint64_t)f->start_line);
}

static bool same_function(const void *ctx, size_t item, const void *key)
{
    const builder *b = ctx;
    const Function *f = &b->functions[item], *k = key;
    return f->name == k->name && f->system_name == k->system_name &&
           f->filename == k->filename && f->start_line == k->start_line;
}

/* Id of the function so named, added when new; 0 when out of memory. */
static uint64_t function_id(builder *b, const char *name,
                            const char *system_name, const char *file,
                            int64_t start_line)
{
    Function key = PERFTOOLS__PROFILES__FUNCTION__INIT;
    key.name = string_id(b, name);
    key.system_name = string_id(b, system_name);
    key.filename = string_id(b, file);
    key.start_line = start_line;
    if (key.name < 0 || key.system_name < 0 || key.filename < 0)
        return 0;
    uint64_t hash = function_hash(&key);
    struct hashindex_slot *slot =
        hashindex_find(&b->function_index, hash, same_function, b, &key);
    if (!slot)
        return 0;
    if (slot->item)
        return slot->item;
    if (ARRAY_RESERVE(b->functions, b->nfunctions, b->capfunctions, 1) != 0)
        return 0;
    key.id = b->nfunctions + 1;
    b->functions[b->nfunctions] = key;
    hashindex_set(&b->function_index, slot, hash, b->nfunctions++);
    return key.id;
}

/* Locations are keyed by address and the gone mapping it was in, if any,
 * or for pseudo-frames (address 0) by their function. */
struct loc_key {
    uintptr_t address;
    uint64_t pseudo_function;
    size_t gone;
};

static bool same_loc(const void *ctx, size_t item, const void *key)
{
    const builder *b = ctx;
    const struct loc *l = &b->locs[item];
    const struct loc_key *k = key;
    return l->address == k->address &&
           l->pseudo_function == k->pseudo_function && l->gone == k->gone;
}

/* Id of the location for key, added (unsymbolized) when new; 0 when out
 * of memory. */
static uint64_t location_id(builder *b, struct loc_key key)
{
    uint64_t hash = hash_mix(hash_mix(key.address, key.pseudo_function), key.gone);
    struct hashindex_slot *slot =
        hashindex_find(&b->loc_index, hash, same_loc, b, &key);
    if (!slot)
        return 0;
    if (slot->item)
        return slot->item;
    if (ARRAY_RESERVE(b->locs, b->nlocs, b->caplocs, 1) != 0)
        return 0;
    b->locs[b->nlocs] = (struct loc){.address = key.address,
                                     .pseudo_function = key.pseudo_function,
                                     .gone = key.gone,
                                     .mapping = -1};
    hashindex_set(&b->loc_index, slot, hash, b->nlocs++);
    return b->nlocs;
}

static int add_line(builder *b, uint64_t function, int64_t line)
{
    if (!function || ARRAY_RESERVE(b->lines, b->nlines, b->caplines, 1) != 0)
        return -ENOMEM;
    Line *l = &b->lines[b->nlines++];
    *l = (Line)PERFTOOLS__PROFILES__LINE__INIT;
    l->function_id = function;
    l->line = line;
    return 0;
}

static uint64_t pseudo_location_id(builder *b, const char *frame)
{
    uint64_t fn = function_id(b, frame, frame, "", 0);
    if (!fn)
        return 0;
    uint64_t id = location_id(b, (struct loc_key){0, fn, 0});
    struct loc *l = id ? &b->locs[id - 1] : NULL;
    if (l && !l->nlines) {
        l->lines_at = b->nlines;
        if (add_line(b, fn, 0) != 0)
            return 0;
        l->nlines = 1;
    }
    return id;
}

/* ---- Samples ------------------------------------------------------------ */

/* Whether two gone mappings are one object at one place: a plugin
 * dlclosed and reopened in a loop, at the same address each time, is one
 * Mapping in the profile, not one per dlclose. */
static bool same_gone(const unwind_gone *a, const unwind_gone *b)
{
    return a->start == b->start && a->limit == b->limit &&
           a->offset == b->offset && a->bias == b->bias &&
           a->dev == b->dev && a->ino == b->ino &&
           strcmp(a->path, b->path) == 0;
}

/* 1 + the index in b->gone of the mapping that held pc in generation
 * `gen` and has gone away since, in *gone; 0 there when pc is in the
 * mapping there now (or gen is 0, unknown).  Returns UNWIND_PC_*
 * (unwind.h) or -ENOMEM. */
static int gone_mapping(builder *b, uint64_t gen, uintptr_t pc, size_t *gone)
{
    unwind_gone g;
    *gone = 0;
    int r = unwind_gone_at(gen, pc, &g);
    if (r != UNWIND_PC_GONE)
        return r;
    for (size_t i = 0; i < b->ngone && !*gone; i++)
        if (same_gone(&b->gone[i].at, &g))
            *gone = i + 1;
    if (*gone) {
        free((char *)g.path);
        return r;
    }
    if (ARRAY_RESERVE(b->gone, b->ngone, b->capgone, 1) != 0) {
        free((char *)g.path);
        return -ENOMEM;
    }
    b->gone[b->ngone] = (struct gone_map){.at = g, .path = (char *)g.path};
    *gone = ++b->ngone;
    return r;
}

/* The location of pc (exact or already one byte back) in a stack walked
 * in generation `gen`, or 0 when out of memory.  A PC whose gone
 * mapping's record was dropped for room is one "[unloaded]" frame: what
 * it was is no longer known, and what is there now is not it. */
static uint64_t stack_location_id(builder *b, uint64_t gen, uintptr_t pc)
{
    size_t gone;
    int r = gone_mapping(b, gen, pc, &gone);
    if (r == UNWIND_PC_FORGOTTEN)
        return pseudo_location_id(b, UNLOADED_FRAME);
    return r < 0 ? 0 : location_id(b, (struct loc_key){pc, 0, gone});
}

/* Appends the location ids of a stack walked in generation `gen` to
 * b->location_ids.  A return address is looked up one byte back so that
 * its line is the call's, not the next statement's. */
static int add_stack(builder *b, const uintptr_t *pcs, size_t depth,
                     unsigned flags, uint64_t gen)
{
    bool truncated = flags & STACK_TRUNCATED;
    bool guessed = flags & STACK_GUESSED;
    if (ARRAY_RESERVE(b->location_ids, b->nlocation_ids, b->caplocation_ids,
                depth + truncated + guessed) != 0)
        return -ENOMEM;
    for (size_t i = 0; i <= depth; i++) {
        if (guessed && i == STACK_GUESS_AT(flags)) {
            uint64_t id = pseudo_location_id(b, STACK_GUESSED_FRAME);
            if (!id)
                return -ENOMEM;
            b->location_ids[b->nlocation_ids++] = id;
        }
        if (i == depth)
            break;
        bool exact = i == 0 && (flags & STACK_LEAF_EXACT);
        uintptr_t pc = exact || pcs[i] == 0 ? pcs[i] : pcs[i] - 1;
        uint64_t id = stack_location_id(b, gen, pc);
        if (!id)
            return -ENOMEM;
        b->location_ids[b->nlocation_ids++] = id;
    }
    if (truncated) {
        uint64_t id = pseudo_location_id(b, TRUNCATED_FRAME);
        if (!id)
            return -ENOMEM;
        b->location_ids[b->nlocation_ids++] = id;
    }
    return 0;
}

static int add_label(builder *b, const char *key, const char *str,
                     int64_t num, const char *unit)
{
    if (ARRAY_RESERVE(b->labels, b->nlabels, b->caplabels, 1) != 0)
        return -ENOMEM;
    Label l = PERFTOOLS__PROFILES__LABEL__INIT;
    l.key = string_id(b, key);
    if (str)
        l.str = string_id(b, str);
    l.num = num;
    if (unit)
        l.num_unit = string_id(b, unit);
    if (l.key < 0 || l.str < 0 || l.num_unit < 0)
        return -ENOMEM;
    b->labels[b->nlabels++] = l;
    return 0;
}

/* Appends one string label per pair of the set. */
static int add_set_labels(builder *b, const cpprof_labelset *set)
{
    size_t n = cpprof_labelset_size(set);
    for (size_t i = 0; i < n; i++) {
        int rc = add_label(b, labelset_key(set, i), labelset_value(set, i), 0,
                           NULL);
        if (rc)
            return rc;
    }
    return 0;
}

static bool same_set(const void *ctx, size_t item, const void *key)
{
    const builder *b = ctx;
    return b->sets[item].set == key;
}

/* The labels of a set, made on its first sample and shared afterwards (the
 * builder holds a reference so the pointer cannot be reused meanwhile). */
static const struct set_labels *set_labels(builder *b,
                                           const cpprof_labelset *set)
{
    uint64_t hash = hash_mix(0, (uintptr_t)set);
    struct hashindex_slot *slot =
        hashindex_find(&b->set_index, hash, same_set, b, set);
    if (!slot)
        return NULL;
    if (slot->item)
        return &b->sets[slot->item - 1];
    size_t at = b->nlabels;
    if (ARRAY_RESERVE(b->sets, b->nsets, b->capsets, 1) != 0 ||
        add_set_labels(b, set) != 0)
        return NULL;
    struct set_labels *s = &b->sets[b->nsets];
    *s = (struct set_labels){labelset_hold(set), at, b->nlabels - at};
    hashindex_set(&b->set_index, slot, hash, b->nsets++);
    return s;
}

/* Sets the labels of sample s: the set's shared run when there are no
 * numeric labels, else a run of its own. */
static int add_sample_labels(builder *b, struct sample *s,
                             const cpprof_labelset *labels,
                             const builder_numlabel *num, size_t nnum)
{
    for (size_t i = 0; i < nnum; i++)
        if (!num[i].key || !num[i].unit || !num[i].unit[0]) /* pprof needs it */
            return -EINVAL;
    if (!nnum) {
        const struct set_labels *sl = set_labels(b, labels);
        if (!sl)
            return -ENOMEM;
        s->labels_at = sl->labels_at;
        s->nlabels = sl->nlabels;
        return 0;
    }
    s->labels_at = b->nlabels;
    int rc = add_set_labels(b, labels);
    for (size_t i = 0; rc == 0 && i < nnum; i++)
        rc = add_label(b, num[i].key, NULL, num[i].value, num[i].unit);
    s->nlabels = b->nlabels - s->labels_at;
    return rc;
}

/* Adds a sample whose locations are b->location_ids[locs_at ...]. */
static int finish_sample(builder *b, size_t locs_at, const int64_t *values,
                         const cpprof_labelset *labels,
                         const builder_numlabel *num, size_t nnum)
{
    if (ARRAY_RESERVE(b->samples, b->nsamples, b->capsamples, 1) != 0 ||
        ARRAY_RESERVE(b->values, b->nvalues, b->capvalues,
                      b->nsample_types) != 0)
        return -ENOMEM;
    struct sample s = {.locs_at = locs_at,
                       .nlocs = b->nlocation_ids - locs_at,
                       .values_at = b->nvalues};
    int rc = add_sample_labels(b, &s, labels, num, nnum);
    if (rc)
        return rc;
    if (b->nsample_types)
        memcpy(&b->values[b->nvalues], values,
               b->nsample_types * sizeof *values);
    b->nvalues += b->nsample_types;
    b->samples[b->nsamples++] = s;
    return 0;
}

int builder_add_sample_at_gen(builder *b, const uintptr_t *pcs, size_t depth,
                              unsigned flags, uint64_t gen,
                              const int64_t *values,
                              const cpprof_labelset *labels,
                              const builder_numlabel *num, size_t nnum)
{
    if ((depth && !pcs) || (b->nsample_types && !values) || (nnum && !num))
        return -EINVAL;
    size_t locs_at = b->nlocation_ids;
    int rc = add_stack(b, pcs, depth, flags, gen);
    if (rc == 0)
        rc = finish_sample(b, locs_at, values, labels, num, nnum);
    if (rc)
        b->nlocation_ids = locs_at;
    return rc;
}

int builder_add_sample(builder *b, const uintptr_t *pcs, size_t depth,
                       unsigned flags, const int64_t *values,
                       const cpprof_labelset *labels,
                       const builder_numlabel *num, size_t nnum)
{
    return builder_add_sample_at_gen(b, pcs, depth, flags, 0, values, labels,
                                     num, nnum);
}

int builder_add_pseudo_sample(builder *b, const char *frame,
                              const int64_t *values)
{
    return builder_add_labelled_pseudo_sample(b, frame, values, NULL);
}

int builder_add_labelled_pseudo_sample(builder *b, const char *frame,
                                       const int64_t *values,
                                       const cpprof_labelset *labels)
{
    if (!frame || !frame[0] || (b->nsample_types && !values))
        return -EINVAL;
    size_t locs_at = b->nlocation_ids;
    uint64_t id = pseudo_location_id(b, frame);
    if (!id || ARRAY_RESERVE(b->location_ids, b->nlocation_ids,
                             b->caplocation_ids, 1) != 0)
        return -ENOMEM;
    b->location_ids[b->nlocation_ids++] = id;
    int rc = finish_sample(b, locs_at, values, labels, NULL, 0);
    if (rc)
        b->nlocation_ids = locs_at;
    return rc;
}

struct add_stacktab_ctx {
    builder *b;
    int rc;
};

static void add_stacktab_entry(const uintptr_t *pcs, size_t depth,
                               unsigned flags, uint64_t gen,
                               const cpprof_labelset *labels,
                               const int64_t *values, void *arg)
{
    struct add_stacktab_ctx *ctx = arg;
    if (ctx->rc == 0)
        ctx->rc = builder_add_sample_at_gen(ctx->b, pcs, depth, flags, gen,
                                            values, labels, NULL, 0);
}

int builder_add_stacktab(builder *b, const stacktab *t)
{
    struct add_stacktab_ctx ctx = {b, 0};
    stacktab_foreach(t, add_stacktab_entry, &ctx);
    return ctx.rc;
}

/* ---- Symbolization ------------------------------------------------------ */

size_t builder_location_count(const builder *b)
{
    return b->nlocs;
}

bool builder_location(const builder *b, size_t i, uintptr_t *address,
                      size_t *gone)
{
    const struct loc *l = &b->locs[i];
    *address = l->address;
    *gone = l->gone;
    return !l->pseudo_function;
}

const unwind_gone *builder_gone(const builder *b, size_t i)
{
    return &b->gone[i].at;
}

size_t builder_gone_count(const builder *b)
{
    return b->ngone;
}

void builder_location_set_mapping(builder *b, size_t i, int mapping)
{
    b->locs[i].mapping = mapping;
}

bool builder_location_has_lines(const builder *b, size_t i)
{
    return b->locs[i].nlines != 0;
}

int builder_location_add_line(builder *b, size_t i, const builder_line *line)
{
    struct loc *l = &b->locs[i];
    if (l->nlines && l->lines_at + l->nlines != b->nlines)
        return -EINVAL; /* a location's lines are one run */
    size_t at = b->nlines;
    int rc = add_line(b, function_id(b, line->name, line->system_name,
                                     line->file, line->start_line),
                      line->line);
    if (rc)
        return rc;
    if (!l->nlines)
        l->lines_at = at;
    l->nlines++;
    return 0;
}

void builder_clear_mappings(builder *b)
{
    b->nmappings = 0;
}

int builder_add_mapping(builder *b, const builder_mapping *bm)
{
    if (ARRAY_RESERVE(b->mappings, b->nmappings, b->capmappings, 1) != 0)
        return -ENOMEM;
    Mapping *m = &b->mappings[b->nmappings];
    *m = (Mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
    m->id = b->nmappings + 1;
    m->memory_start = bm->start;
    m->memory_limit = bm->limit;
    m->file_offset = bm->offset;
    m->filename = string_id(b, bm->file);
    m->build_id = string_id(b, bm->build_id);
    if (m->filename < 0 || m->build_id < 0)
        return -ENOMEM;
    m->has_functions = bm->has_functions;
    m->has_filenames = bm->has_filenames;
    m->has_line_numbers = bm->has_line_numbers;
    m->has_inline_frames = bm->has_inline_frames;
    b->nmappings++;
    return 0;
}

/* ---- Encoding ----------------------------------------------------------- */

/* The pointer arrays protobuf-c wants, pointing into the builder's arrays. */
struct message_arrays {
    Mapping *maps; /* the builder's, or `none` */
    size_t nmaps;
    Mapping none;
    ValueType **sample_types;
    Sample *samples;
    Sample **sample_ptrs;
    Label **label_ptrs;
    Mapping **map_ptrs;
    Location *locations;
    Location **location_ptrs;
    Line **line_ptrs;
    Function **function_ptrs;
};

static void free_arrays(struct message_arrays *a)
{
    free(a->sample_types);
    free(a->samples);
    free(a->sample_ptrs);
    free(a->label_ptrs);
    free(a->map_ptrs);
    free(a->locations);
    free(a->location_ptrs);
    free(a->line_ptrs);
    free(a->function_ptrs);
}

/* The mappings the symbolization pass made; a process whose mappings
 * cannot be read still gets the one mapping pprof insists on, empty. */
static void map_array(builder *b, struct message_arrays *a)
{
    a->maps = b->mappings;
    a->nmaps = b->nmappings;
    if (a->nmaps == 0) {
        a->none = (Mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
        a->none.id = 1;
        a->maps = &a->none;
        a->nmaps = 1;
    }
}

/* malloc that never returns NULL for a zero size, so NULL means failure. */
static void *alloc_array(size_t n, size_t size)
{
    return malloc(n ? n * size : 1);
}

static int make_arrays(builder *b, struct message_arrays *a)
{
    a->sample_types = alloc_array(b->nsample_types, sizeof(void *));
    a->samples = alloc_array(b->nsamples, sizeof(Sample));
    a->sample_ptrs = alloc_array(b->nsamples, sizeof(void *));
    a->label_ptrs = alloc_array(b->nlabels, sizeof(void *));
    a->map_ptrs = alloc_array(a->nmaps, sizeof(void *));
    a->locations = alloc_array(b->nlocs, sizeof(Location));
    a->location_ptrs = alloc_array(b->nlocs, sizeof(void *));
    a->line_ptrs = alloc_array(b->nlines, sizeof(void *));
    a->function_ptrs = alloc_array(b->nfunctions, sizeof(void *));
    if (!a->sample_types || !a->samples || !a->sample_ptrs || !a->label_ptrs ||
        !a->map_ptrs || !a->locations || !a->location_ptrs || !a->line_ptrs ||
        !a->function_ptrs)
        return -ENOMEM;
    for (size_t i = 0; i < b->nsample_types; i++)
        a->sample_types[i] = &b->sample_types[i];
    for (size_t i = 0; i < b->nlabels; i++)
        a->label_ptrs[i] = &b->labels[i];
    for (size_t i = 0; i < b->nsamples; i++) {
        const struct sample *s = &b->samples[i];
        Sample *m = &a->samples[i];
        *m = (Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
        m->n_location_id = s->nlocs;
        m->location_id = &b->location_ids[s->locs_at];
        m->n_value = b->nsample_types;
        m->value = &b->values[s->values_at];
        m->n_label = s->nlabels;
        m->label = &a->label_ptrs[s->labels_at];
        a->sample_ptrs[i] = m;
    }
    for (size_t i = 0; i < a->nmaps; i++)
        a->map_ptrs[i] = &a->maps[i];
    for (size_t i = 0; i < b->nlines; i++)
        a->line_ptrs[i] = &b->lines[i];
    for (size_t i = 0; i < b->nlocs; i++) {
        const struct loc *l = &b->locs[i];
        Location *m = &a->locations[i];
        *m = (Location)PERFTOOLS__PROFILES__LOCATION__INIT;
        m->id = i + 1;
        m->mapping_id = (uint64_t)(l->mapping + 1);
        m->address = l->address;
        m->n_line = l->nlines;
        m->line = &a->line_ptrs[l->lines_at];
        a->location_ptrs[i] = m;
    }
    for (size_t i = 0; i < b->nfunctions; i++)
        a->function_ptrs[i] = &b->functions[i];
    return 0;
}

static void fill_profile(builder *b, struct message_arrays *a, Profile *p)
{
    *p = (Profile)PERFTOOLS__PROFILES__PROFILE__INIT;
    p->n_sample_type = b->nsample_types;
    p->sample_type = a->sample_types;
    p->n_sample = b->nsamples;
    p->sample = a->sample_ptrs;
    p->n_mapping = a->nmaps;
    p->mapping = a->map_ptrs;
    p->n_location = b->nlocs;
    p->location = a->location_ptrs;
    p->n_function = b->nfunctions;
    p->function = a->function_ptrs;
    p->n_string_table = b->nstrings;
    p->string_table = b->strings;
    p->time_nanos = b->time_nanos;
    p->duration_nanos = b->duration_nanos;
    p->period_type = b->has_period ? &b->period_type : NULL;
    p->period = b->period;
    p->default_sample_type = b->default_sample_type;
    p->n_comment = b->ncomments;
    p->comment = b->comments;
}

/* gzip at best speed, as Go writes profiles (and the JSON form of them). */
int builder_gzip(const unsigned char *in, size_t len,
                 unsigned char **out, size_t *outlen)
{
    z_stream z = {0};
    if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    size_t cap = deflateBound(&z, len);
    unsigned char *buf = malloc(cap);
    if (!buf) {
        deflateEnd(&z);
        return -ENOMEM;
    }
    z.next_in = (unsigned char *)in;
    z.avail_in = len;
    z.next_out = buf;
    z.avail_out = cap;
    int zrc = deflate(&z, Z_FINISH);
    deflateEnd(&z);
    if (zrc != Z_STREAM_END) {
        free(buf);
        return -EIO;
    }
    *out = buf;
    *outlen = cap - z.avail_out;
    return 0;
}

int builder_encode(builder *b, unsigned char **out, size_t *len)
{
    struct message_arrays a = {0};
    own_work_enter(); /* the encoding's memory is cpprof's */
    map_array(b, &a);
    int rc = make_arrays(b, &a);
    if (rc == 0) {
        Profile p;
        fill_profile(b, &a, &p);
        size_t size = perftools__profiles__profile__get_packed_size(&p);
        unsigned char *packed = alloc_array(size, 1);
        if (packed) {
            perftools__profiles__profile__pack(&p, packed);
            rc = builder_gzip(packed, size, out, len);
            free(packed);
        } else {
            rc = -ENOMEM;
        }
    }
    free_arrays(&a);
    own_work_leave();
    return rc;
}
