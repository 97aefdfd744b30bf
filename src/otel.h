/*
 * otel.h -- labels published for out-of-process profilers (otel.c).
 *
 * When the OpenTelemetry context is on, every label set applied to a thread
 * is mirrored into the thread-local pointers that fleet profilers read
 * (otel_thread_ctx_v1, custom_labels_current_set), and the label keys into
 * the OTEL_CTX process context.  thread.c calls otel_publish() wherever a
 * set becomes current, behind one test of otel_enabled, so the off state
 * costs a predictable branch.
 */
#ifndef CPPROF_OTEL_H
#define CPPROF_OTEL_H

#include "cpprof.h"
#include <stdatomic.h>
#include <stdbool.h>

/* Set once by cpprof_otel_context_enable(); never cleared. */
extern atomic_bool otel_enabled __attribute__((visibility("hidden")));

/* Points the calling thread's published pointers at `set`'s record (built
 * on the set's first publication), or clears them for NULL.  Call it
 * before releasing the reference of the set it replaces. */
void otel_publish(const cpprof_labelset *set);

/* Runs the TLS descriptor sequences readers find the two thread-local
 * pointers through (otel_tlsdesc.c), so the dynamic linker has resolved
 * them before the first record is published. */
void otel_resolve_descriptors(void);

/* Frees a record otel_publish() attached to a set (labels.c, when the set
 * itself is freed).  Accepts NULL. */
void otel_record_free(void *record);

#endif
