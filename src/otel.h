/*
 * otel.h -- labels published for out-of-process profilers (otel.c).
 *
 * When the OpenTelemetry context is on, every label set applied to a thread
 * is mirrored into the thread-local pointers that fleet profilers read
 * (otel_thread_ctx_v1, custom_labels_current_set), and the label keys into
 * the OTEL_CTX process context.  Enabling registers otel.c's hooks with
 * the label core (labelhooks.h), which calls them wherever a set becomes
 * current or is reclaimed; before that, the off state costs a predictable
 * branch.
 */
#ifndef CPPROF_OTEL_H
#define CPPROF_OTEL_H

/* Runs the TLS descriptor sequences readers find the two thread-local
 * pointers through (otel_tlsdesc.c), so the dynamic linker has resolved
 * them before the first record is published. */
void otel_resolve_descriptors(void);

#endif
