/*
 * gotext.h -- Go's text forms of a profile (gotext.c): the debug=1 record
 * runtime/pprof writes for every named profile (printCountProfile,
 * printCountCycleProfile, writeHeapInternal), written by one loop here so
 * that the heap, block, mutex, threadcreate and goroutine text forms
 * differ only in each record's head.  Symbolizer level: it names frames.
 */
#ifndef CPPROF_GOTEXT_H
#define CPPROF_GOTEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cpprof.h"
#include "godump.h"

#include <sys/types.h>

/* The stack part of one text record. */
typedef struct {
    const uintptr_t *pcs; /* pcs[0] is the leaf, as in stacktab.h */
    size_t depth;
    unsigned flags;       /* STACK_* */
    uint64_t gen;         /* of the stack's mappings (unwind.h); 0: now */
    const cpprof_labelset *labels; /* a "# labels:" line unless empty */
    const char *pseudo_frame; /* not NULL: the stack is this one frame */
} text_record;

/* Writes n records, within one symbolizer session: for record i,
 * head(f, i, arg, &rec) writes its counts and fills rec, then come
 * " @ 0xPC ..." and a newline, the labels line, the frames
 * (text_write_frames) and a blank line. */
void text_write_records(FILE *f, size_t n,
                        void (*head)(FILE *f, size_t i, void *arg,
                                     text_record *rec),
                        void *arg);

/* Writes Go's text-form frame lines for a stack of return addresses:
 * "#\t0xPC\tFUNC+0xOFF\tFILE:LINE" per frame (inlined frames each on a
 * line, "?" for an unknown file), as runtime/pprof's printStackRecord
 * does.  `gen` is the generation the stack was kept under (unwind.h): a
 * PC in an object unloaded since is named after that object (or
 * "[unloaded]" once it is no longer known), never after the one mapped
 * there now.  Within a symbolizer session (symbolize_begin), which a text
 * profile opens once for all its stacks: what they need of libdw, and
 * each unloaded object's file, is then opened once, not once a stack (a
 * session a stack stalled block?debug=1 for seconds with a plugin loaded
 * and unloaded thousands of times). */
void text_write_frames(FILE *f, const uintptr_t *pcs, size_t depth,
                       unsigned flags, uint64_t gen);

/* One goroutine of a debug=2 dump, in godump.h's lines, which Go's
 * parsers (panicparse 2.3.0) read: its header, then per frame FUNC(...)
 * and "\tFILE:LINE +0xOFF" (inlined frames each on their two lines; "??"
 * for a file the parsers do not take, which debug=1 and the proto name),
 * then, when its creator is known, "created by FUNC in goroutine N" with
 * the creating call's file line.  A stack that is missing (pseudo_frame)
 * is that one frame, the reason in the header. */
typedef struct {
    godump_goroutine head;
    const uintptr_t *pcs;
    size_t depth;
    unsigned flags;
    uint64_t gen;
    const char *pseudo_frame; /* not NULL: the stack is this one frame */
    uint64_t creator;         /* its creator's number; 0: not known */
    uintptr_t created_at;     /* the return address of its creation */
} text_goroutine;

/* Writes g, within a symbolizer session (symbolize_begin). */
void text_write_goroutine(FILE *f, const text_goroutine *g);

#endif
