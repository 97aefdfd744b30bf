/*
 * builder.h -- the profile builder (builder.c): pprof's profile.proto,
 * gzip-compressed, shared by every profile type.
 *
 * Like Go's runtime/pprof profileBuilder it is separate from the collectors
 * that feed it: a collector declares sample types, hands over samples
 * (stacks of PCs, values, labels) and asks for the encoding.  The builder
 * owns the string table, functions, locations and mappings.  It does not
 * symbolize: as in google/pprof, that is a pass over the built profile
 * (symbolize_profile.h, a level above), which every caller runs before
 * builder_encode so that pprof never has to symbolize.
 * Never used from a signal handler.
 */
#ifndef CPPROF_BUILDER_H
#define CPPROF_BUILDER_H

#include "cpprof.h"
#include "stacktab.h"
#include "unwind.h"
#include <stdbool.h>
#include <stdint.h>

typedef struct builder builder;

/* A sample type or the period type of a profile. */
typedef struct {
    const char *type, *unit;
} value_type;

/* A numeric label (Go's heap profile: "bytes"); unit is never NULL. */
typedef struct {
    const char *key;
    int64_t value;
    const char *unit;
} builder_numlabel;

builder *builder_new(void);
void builder_free(builder *b);

/* Sample types, in order; every sample then has that many values. */
int builder_add_sample_type(builder *b, const char *type, const char *unit);
int builder_set_period(builder *b, const char *type, const char *unit,
                       int64_t period);
void builder_set_time(builder *b, int64_t time_nanos, int64_t duration_nanos);
int builder_set_default_sample_type(builder *b, const char *type);
/* A line of the profile's comments (what pprof -comments prints). */
int builder_add_comment(builder *b, const char *text);

/* One sample: pcs[0] is the leaf; flags STACK_* of unwind.h.  String labels
 * come from `labels` (may be NULL), numeric ones from num[0..nnum). */
int builder_add_sample(builder *b, const uintptr_t *pcs, size_t depth,
                       unsigned flags, const int64_t *values,
                       const cpprof_labelset *labels,
                       const builder_numlabel *num, size_t nnum);

/* builder_add_sample for a stack kept under generation `gen` (unwind.h,
 * "Generations"): a PC in a mapping gone since is named after the object
 * that was there, never the one there now. */
int builder_add_sample_at_gen(builder *b, const uintptr_t *pcs, size_t depth,
                              unsigned flags, uint64_t gen,
                              const int64_t *values,
                              const cpprof_labelset *labels,
                              const builder_numlabel *num, size_t nnum);

/* A sample whose whole stack is one pseudo-frame naming a cause, e.g.
 * "cpprof.lostProfileEvent" for samples a full buffer dropped. */
int builder_add_pseudo_sample(builder *b, const char *frame,
                              const int64_t *values);
/* The same with string labels from `labels` (may be NULL): the thread
 * census's "stack unavailable" frame keeps its thread's labels. */
int builder_add_labelled_pseudo_sample(builder *b, const char *frame,
                                       const int64_t *values,
                                       const cpprof_labelset *labels);

/* Adds every entry of a stacktab as a sample. */
int builder_add_stacktab(builder *b, const stacktab *t);

/* Encodes the profile: gzip (best speed) of the serialized profile.proto,
 * in a malloc'd buffer the caller frees.  Run the symbolization pass
 * (symbolize_profile) first: until then locations have no lines. */
int builder_encode(builder *b, unsigned char **out, size_t *len);

/* gzip (best speed) of any buffer into a malloc'd one: the encoding's last
 * step, shared with the profiles' JSON form (http_json.c). */
int builder_gzip(const unsigned char *in, size_t len, unsigned char **out,
                 size_t *outlen);

/* ---- The symbolization pass's view (symbolize_profile.c) ---- */

/* Locations are numbered from 0 below builder_location_count.  Location i
 * as the pass sees it: false for a pseudo-frame, which needs nothing;
 * else its address (exact or already one byte back) and *gone, 0 when it
 * lies in the object mapped there now, or 1 + the index (builder_gone) of
 * the object unloaded since that held it. */
size_t builder_location_count(const builder *b);
bool builder_location(const builder *b, size_t i, uintptr_t *address,
                      size_t *gone);

/* The objects unloaded since their samples were taken, numbered from 0. */
size_t builder_gone_count(const builder *b);
const unwind_gone *builder_gone(const builder *b, size_t i);

/* Location i's mapping: an index among those builder_add_mapping made
 * (-1: none). */
void builder_location_set_mapping(builder *b, size_t i, int mapping);

/* One line of a location: a frame, innermost (inlined) first. */
typedef struct {
    const char *name, *system_name, *file;
    int64_t start_line, line;
} builder_line;

/* Whether location i has its lines already (a pass run before). */
bool builder_location_has_lines(const builder *b, size_t i);
/* Appends a line to location i; a location's lines are added in a row. */
int builder_location_add_line(builder *b, size_t i, const builder_line *line);

/* A Mapping of the profile, with what all of its locations have. */
typedef struct {
    uintptr_t start, limit, offset;
    const char *file, *build_id; /* never NULL */
    bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
} builder_mapping;

/* Forgets the mappings a previous pass added. */
void builder_clear_mappings(builder *b);
/* Adds the next mapping (its id: its index + 1). */
int builder_add_mapping(builder *b, const builder_mapping *m);

#endif
