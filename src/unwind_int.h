/*
 * unwind_int.h -- what the unwinder's two halves share, and no one else
 * (as SQLite's vdbeInt.h is the VDBE's): the published table of mappings
 * that the writer (unwind_tables.c: the store) builds and the walk
 * (unwind_walk.c) reads, and the one lookup both make in it.  The parse
 * step is unwind_cfi.h; the interface to the rest of cpprof is unwind.h.
 */
#ifndef CPPROF_UNWIND_INT_H
#define CPPROF_UNWIND_INT_H

#include "unwind.h"
#include "unwind_cfi.h"

#include <stdatomic.h>
#include <stdint.h>

#define TLS_IE __attribute__((tls_model("initial-exec")))

/* One object's rows (unwind_tables.c's; the walk never looks inside). */
struct object;

struct region {
    uintptr_t lo, hi;
};

/* An executable mapping: object address = pc - bias. */
struct code {
    uintptr_t lo, hi, bias, offset;
    const struct cfi_table *cfi;
    struct object *obj; /* NULL: not built (no file, not ELF, failed) */
    uint64_t since;     /* generation of the first table listing it */
};

/* The mappings as of one refresh: immutable once published. */
struct maps_table {
    atomic_long readers;
    struct region *stack; /* read+write regions, sorted */
    size_t nstack, capstack;
    struct region main_stack; /* [stack] */
    struct code *code;        /* executable regions, sorted */
    size_t ncode, capcode;
    uint64_t gen;             /* unwind.h, "Generations" */
};

/* The published table (NULL before the first refresh), swapped by the
 * writer; unwind_tables.c, "Lifetime", says when a walk may read one. */
extern _Atomic(struct maps_table *) unwind_current;

/* The calling thread's own stack, [lo, hi), read directly by its walks
 * (0, 0: not known): written by unwind_learn_own_stack outside handlers,
 * read by the walk (unwind_walk.c, "Reads that cannot fault"). */
extern __thread uintptr_t unwind_own_lo TLS_IE, unwind_own_hi TLS_IE;

/* SIGNAL-SAFE: the executable mapping of `t` containing `a`, or NULL. */
const struct code *unwind_code_find(const struct maps_table *t, uintptr_t a);

/* SIGNAL-SAFE: the object's path, as /proc/self/maps gave it; it lives
 * as long as a table that lists the object. */
const char *unwind_object_path(const struct object *o);

#endif
