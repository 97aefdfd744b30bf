/*
 * otel_tlsdesc.c -- the TLS descriptors fleet profilers find labels by.
 *
 * A reader outside the process locates a shared library's thread-local
 * variable through the variable's R_X86_64_TLSDESC relocation (custom-labels
 * v1 requires it; OTEP 4947 recommends it): once resolved, the descriptor in
 * the GOT holds the variable's offset from the thread pointer.  gcc emits
 * that relocation only for code compiled with -mtls-dialect=gnu2, so this
 * file alone is built with it (Makefile.am) and takes the two addresses
 * that way; otel.c writes the variables through cheaper initial-exec
 * accesses.  Calling it also makes the dynamic linker resolve descriptors
 * that it binds lazily.
 */
#include "otel.h"

extern __thread const void *volatile otel_thread_ctx_v1;
extern __thread const void *volatile custom_labels_current_set;

void otel_resolve_descriptors(void)
{
    const void *volatile *volatile sink;
    sink = &otel_thread_ctx_v1;
    sink = &custom_labels_current_set;
    (void)sink;
}
