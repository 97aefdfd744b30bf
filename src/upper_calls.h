/*
 * upper_calls.h -- UPPER_CALLS(fn), after fn's definition: fn is one of
 * the lower layers' functions the upper layers call, and gets its second
 * name, cpprof__fn, there.
 *
 * The upper objects call down by cpprof__ names, so that a program's own
 * function of the same name never takes the call (object_uses.h), and
 * libcpprof.so exports those names, in its private version node
 * (libcpprof.map: CPPROF_PRIVATE; libcpprof.a keeps them local).  The alias
 * is made in the defining object itself, so the same upper objects link
 * into libcpprof-upper.so, against libcpprof.so's exports, and into the
 * tests' library and libcpprof.a, against the lower objects: they are
 * compiled once.  An upper call to a function without it fails
 * libcpprof-upper.so's link (-z defs) and the tests' (an undefined
 * cpprof__ reference).
 */
#ifndef CPPROF_UPPER_CALLS_H
#define CPPROF_UPPER_CALLS_H

#define UPPER_CALLS(fn)                                                      \
    extern __typeof__(fn) cpprof__##fn                                      \
        __attribute__((alias(#fn), visibility("default")))

#endif
