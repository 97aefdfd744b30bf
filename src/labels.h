/*
 * labels.h -- internal view of label sets (labels.c).
 *
 * Sets are interned: one object per distinct content, so that a set can be
 * compared by pointer, used as a hash key by the collectors and referenced
 * from a signal handler with one atomic increment.  A set whose count drops
 * to zero stays interned (a later cpprof_labels() of the same content
 * revives it) until the cardinality cap needs room; it is then reclaimed
 * under the registry lock, so a census thread that read the pointer of
 * another thread's set under that lock can always take its reference.
 */
#ifndef CPPROF_LABELS_H
#define CPPROF_LABELS_H

#include "cpprof.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Accessors for the builder and the text formats; i < cpprof_labelset_size. */
const char *labelset_key(const cpprof_labelset *set, size_t i);
const char *labelset_value(const cpprof_labelset *set, size_t i);
/* The set's number: given at interning, never given to another set in
 * the process's life (0: the empty set), so that a copy of a set's labels
 * (the trace recorder's) can be known again without a reference to it.
 * Read inline, as labelset_published below: the recorder reads it at
 * every label switch it records. */
#define LABELSET_SERIAL_OFFSET 8
static inline uint64_t labelset_serial(const cpprof_labelset *set)
{
    return set ? *(const uint64_t *)(const void *)((const char *)set +
                                                   LABELSET_SERIAL_OFFSET)
               : 0;
}

/* Every name, label and string cpprof writes into a text form goes through
 * these, so that none can break the line it is on or the form's encoding.
 * text_escape appends s to buf at `at` (counting what does not fit, and
 * NUL-terminating what does, as snprintf) and returns the new `at`: with
 * `quoted`, between double quotes as Go's %q writes a string (\" \\ \n \t
 * \r, \xNN for other control bytes); without, as bare text in which only
 * what could end or break a line or the UTF-8 is escaped (\n \t \r \xNN),
 * for function and file names, which Go prints bare.  Either way a byte
 * that starts no valid UTF-8 sequence is \xNN (as %q does) and valid UTF-8
 * is kept.  SIGNAL-SAFE. */
size_t text_escape(char *buf, size_t len, size_t at, const char *s,
                   bool quoted);
/* The same, written to f.  Not SIGNAL-SAFE (stdio, malloc). */
void text_put_escaped(FILE *f, const char *s, bool quoted);

/* cpprof's own references, counted apart from the program's (labels.c):
 * every module but the public API holds sets through these.  Both accept
 * NULL; hold returns its argument. */
cpprof_labelset *labelset_hold(const cpprof_labelset *set);
void labelset_drop(const cpprof_labelset *set);

/* SIGNAL-SAFE: one atomic increment.  Only for a set known to hold a
 * reference already (a thread's current set, seen from that thread). */
void labelset_ref_signal_safe(const cpprof_labelset *set);

/* Parent plus labels, interned, with a reference; used by cpprof_do(). */
int labelset_merge(cpprof_labelset **out, const cpprof_labelset *parent,
                   const cpprof_labelset *labels);

/* The record otel.c built for the set, or NULL; attaching keeps the first
 * record any thread attached and returns it (the loser frees its own).
 * labels.c frees the attached record with the set.  The record pointer is
 * a set's first member, so that reading it on every label switch (with the
 * OpenTelemetry context on) costs a load, not a call. */
static inline void *labelset_published(const cpprof_labelset *set)
{
    return atomic_load_explicit((_Atomic(void *) *)(void *)set,
                                memory_order_acquire);
}
void *labelset_attach_published(const cpprof_labelset *set, void *record);

/* The set's accounting counters (accounting.c); set must not be NULL. */
struct acct_counters *labelset_counters(const cpprof_labelset *set);

/* Calls fn for every interned set and the overflow set, under the intern
 * lock: fn may take references but must not build or release sets. */
void labelset_foreach_interned(void (*fn)(cpprof_labelset *set, void *arg),
                               void *arg);

/* Number of interned sets now (for tests and the index page). */
size_t labelset_interned_count(void);

/* fork() handlers, called by thread.c's: the intern and registry locks. */
void labels_atfork_prepare(void);
void labels_atfork_parent(void);
void labels_atfork_child(void);

/* The registry lock: unreferenced sets are freed under it, and thread.c's
 * registry of threads is read and changed under it, so that whoever reads
 * a thread's current set under it (the census) can take a reference
 * before the set can be freed.  The label core's, so that both of its
 * halves use it without calling each other. */
void labels_registry_lock(void);
void labels_registry_unlock(void);

#endif
