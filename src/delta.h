/*
 * delta.h -- a profile's samples as a value, and the named-profile endpoint
 * that serves one whole or as Go's `?seconds=N` delta (delta.c).
 *
 * Go's net/http/pprof serves every named profile (heap, allocs, block,
 * mutex, threadcreate, goroutine) the same way: debug=0 is the proto,
 * debug=N a text form, and seconds=N the difference of two snapshots taken
 * N seconds apart, with fixed errors checked in a fixed order.  A profile
 * type here supplies three functions (take a snapshot, add its sample types
 * and samples to a builder, write the text form) and http_serve_named()
 * does the rest, so the rules live in one place.
 */
#ifndef CPPROF_DELTA_H
#define CPPROF_DELTA_H

#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "builder.h"
#include "cpprof.h"
#include "http.h"
#include "stacktab.h"

/* Samples keyed by (stack, flags, generation, label set, one numeric key),
 * each with the same number of int64 values.  The generation is the one
 * the stack's mappings were walked in (unwind.h; 0: resolve against the
 * mappings at build time).  The numeric key is what Go's heap
 * profile keeps per sample besides its stack, the object size (label
 * "bytes"); profiles without one pass 0. */
typedef struct sampleset sampleset;

typedef struct {
    const uintptr_t *pcs; /* pcs[0] is the leaf, as in stacktab.h */
    size_t depth;
    unsigned flags;       /* STACK_* */
    uint64_t gen;         /* of the stack's mappings (unwind.h) */
    const cpprof_labelset *labels;
    int64_t num;
    const int64_t *values;
} sampleset_entry;

sampleset *sampleset_new(size_t nvalues);
void sampleset_free(sampleset *s);

/* Adds values to the entry with this key, creating it (with a reference to
 * labels) when new. */
int sampleset_add(sampleset *s, const uintptr_t *pcs, size_t depth,
                  unsigned flags, uint64_t gen, const cpprof_labelset *labels,
                  int64_t num, const int64_t *values);

/* Adds every entry of a stack table (its values must number as s's), with
 * the numeric key 0. */
int sampleset_add_stacktab(sampleset *s, const stacktab *t);

/* A new sampleset with `nvalues` values, copied from the stack table *tab
 * (NULL: none yet) under the collector's `lock`, with the recursion guard
 * up so that the copy's own allocations are not sampled.  What the
 * collectors' snapshot functions are made of. */
int sampleset_copy_locked(stacktab *const *tab, size_t nvalues,
                          atomic_flag *lock, sampleset **out);

/* s -= earlier, key by key (a key only in `earlier` becomes negative). */
int sampleset_subtract(sampleset *s, const sampleset *earlier);

/* Number of entries (the index page's count of a profile's records). */
size_t sampleset_count(const sampleset *s);

/* The entries whose values are not all zero, sorted by values[by] from the
 * largest down, in a malloc'd array of *n (free it; the entries stay valid
 * while s is unchanged). */
int sampleset_sorted(const sampleset *s, size_t by, sampleset_entry **out,
                     size_t *n);

/* A sample type or the period type of a profile. */
typedef struct {
    const char *type, *unit;
} value_type;

/* The header every named profile's proto starts with: its n sample types,
 * then the period type `period` with value `every`. */
int named_add_types(builder *b, const value_type *types, size_t n,
                    value_type period, int64_t every);

/* Calls add(b, entry, arg) for each entry of s whose values are not all
 * zero, stopping at the first error: the sample loop of every named
 * profile's build. */
int sampleset_build(builder *b, const sampleset *s,
                    int (*add)(builder *b, const sampleset_entry *e,
                               void *arg),
                    void *arg);

/* Writes Go's text-form frame lines for a stack of return addresses:
 * "#\t0xPC\tFUNC+0xOFF\tFILE:LINE" per frame (inlined frames each on a
 * line), as runtime/pprof's printStackRecord does.  `gen` is the
 * generation the stack was kept under (unwind.h): a PC in an object
 * unloaded since is named after that object (or "[unloaded]" once it is
 * no longer known), never after the one mapped there now.  Within a
 * symbolizer session (symbolize_begin), which a text profile opens once
 * for all its stacks: what they need of libdw, and each unloaded object's
 * file, is then opened once, not once a stack (a session a stack stalled
 * block?debug=1 for seconds with a plugin loaded and unloaded thousands
 * of times). */
void text_write_frames(FILE *f, const uintptr_t *pcs, size_t depth,
                       unsigned flags, uint64_t gen);

/* Writes " 0xPC" per stack entry and a newline: the "@ ..." list. */
void text_write_pcs(FILE *f, const uintptr_t *pcs, size_t depth);

/* A named profile type. */
typedef struct {
    const char *name;  /* the path after /debug/pprof/, the file name */
    bool delta;        /* ?seconds= supported */
    /* Takes a snapshot now (cumulative or current, as the type is). */
    int (*snapshot)(sampleset **out);
    /* Adds sample types, period and every non-zero sample of s. */
    int (*build)(builder *b, const sampleset *s);
    /* Writes the debug=N text form of s. */
    int (*text)(FILE *f, const sampleset *s, int debug);
    bool labelled;     /* its samples carry the threads' labels */
} named_profile;

/* Serves `p` for request r: debug=0 the proto (attachment NAME), debug=N
 * the text form, seconds=N the delta (attachment NAME-delta) with Go's
 * errors in Go's order; format=json either proto in its JSON form
 * (http_json.c).  Sends exactly one response. */
int http_serve_named(http_req *r, const named_profile *p);

/* Waits `seconds`, waking every 100 ms to see whether the client has gone;
 * returns whether the whole window ran. */
bool http_wait_window(http_req *r, long seconds);

#endif
