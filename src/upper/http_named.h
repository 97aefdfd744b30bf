/*
 * http_named.h -- the named-profile endpoint (http_named.c): one profile
 * served whole or as Go's `?seconds=N` delta.
 *
 * Go's net/http/pprof serves every named profile (heap, allocs, block,
 * mutex, threadcreate, goroutine) the same way: debug=0 is the proto,
 * debug=N a text form, and seconds=N the difference of two snapshots taken
 * N seconds apart, with fixed errors checked in a fixed order.  A profile
 * type here supplies three functions (take a snapshot, add its sample types
 * and samples to a builder, write the text form) and http_serve_named()
 * does the rest, so the rules live in one place.
 */
#ifndef CPPROF_HTTP_NAMED_H
#define CPPROF_HTTP_NAMED_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "builder.h"
#include "http.h"
#include "sampleset.h"

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

/* Why no profile of stacks can be served now (no /proc, where a daemon
 * jailed itself: neither the walks through code loaded since nor any
 * frame's name can be had), said once on stderr; NULL when they can. */
const char *http_stacks_unavailable(void);

/* Waits `seconds`, waking every 100 ms to see whether the request is
 * ended early (http_request_end); returns HTTP_GOING_ON when the whole
 * window ran, else what ended it. */
http_end http_wait_window(http_req *r, long seconds);
http_end http_wait_window_ns(http_req *r, int64_t ns);

/* Answers a request whose window `end` cut short: `client_gone` (Go's
 * text for the endpoint) when its client went away, which nobody reads;
 * else 503 saying the server is stopping or the program is exiting.  No
 * partial profile is built then: building and symbolizing it may outlast
 * exit's wait for open requests, and what exit tears down next (stdio, the
 * libraries' destructors) would then run under it. */
int http_error_window_ended(http_req *r, http_end end,
                            const char *client_gone);

#endif
