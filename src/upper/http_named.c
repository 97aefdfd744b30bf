/*
 * http_named.c -- the one function that serves every named profile (heap,
 * allocs, block, mutex, threadcreate, goroutine) whole or as a
 * `?seconds=N` delta, as Go's net/http/pprof does (http_named.h).
 *
 * A delta is computed on the raw snapshot values (sampleset.h), before any
 * scaling the profile type applies when building: Go subtracts scaled
 * profiles with profile.Merge, which gives the same result up to rounding.
 * Entries whose difference is all zero are left out, as Merge leaves them
 * out.
 *
 * Go's order of checks (net/http/pprof serveDeltaProfile) is kept exactly:
 * a bad seconds value, then a profile without delta support, then debug.
 * Like Go, `seconds=` with an empty value is no delta at all.  Unlike Go,
 * which reads `debug` with strconv.Atoi and takes anything unparsable as
 * 0, a `debug` that is not 0, 1 or 2 is a 400: a bad value of a known
 * parameter is never a silent default here.
 */
#define _GNU_SOURCE /* open_memstream */
#include "http_named.h"
#include "util.h"
#include "procmaps.h"
#include "warn.h"
#include "symbolize.h"
#include "symbolize_profile.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int named_add_types(builder *b, const value_type *types, size_t n,
                    value_type period, int64_t every)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = builder_add_sample_type(b, types[i].type, types[i].unit);
    return rc ? rc : builder_set_period(b, period.type, period.unit, every);
}

int sampleset_build(builder *b, const sampleset *s,
                    int (*add)(builder *b, const sampleset_entry *e,
                               void *arg),
                    void *arg)
{
    sampleset_entry *e = NULL;
    size_t n = 0;
    int rc = sampleset_sorted(s, SIZE_MAX, &e, &n);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = add(b, &e[i], arg);
    free(e);
    return rc;
}

/* Whether pc lies in an executable mapping (a session is open). */
static bool mapped(uintptr_t pc)
{
    size_t lo = 0, hi = symbolize_mapping_count();
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const symbolize_mapping *m = symbolize_mapping_at(mid);
        if (pc < m->start)
            hi = mid;
        else if (pc >= m->limit)
            lo = mid + 1;
        else
            return true;
    }
    return false;
}

/* The event collectors walk frame pointers without the CPU walker's table
 * of executable regions (collect.c), so a walk through code without frame
 * pointers can end in a word that is no return address: each stack is cut
 * at its first address outside every executable mapping, here, outside
 * the allocator. */
static void trim_unmapped(sampleset *s)
{
    symbolize_begin();
    sampleset_trim(s, mapped);
    symbolize_end();
}

const char *http_stacks_unavailable(void)
{
    static atomic_bool said;
    int rc = procmaps_check();
    if (rc == 0)
        return NULL;
    if (!atomic_exchange(&said, true))
        warn_stderr("cpprof: no profile of stacks: %s\n",
                    cpprof_strerror(rc));
    return cpprof_strerror(rc);
}

#define POLL_NS 100000000L

/* A delta's seconds are any positive int64, as Go takes them: past
 * INT64_MAX nanoseconds (292 years) the window is as long as that, which
 * only the client's leaving ends (fuzz_http found the overflow). */
http_end http_wait_window(http_req *r, long seconds)
{
    int64_t ns;
    if (__builtin_mul_overflow((int64_t)seconds, (int64_t)1000000000, &ns))
        ns = INT64_MAX;
    return http_wait_window_ns(r, ns);
}

http_end http_wait_window_ns(http_req *r, int64_t ns)
{
    struct timespec now, end, next;
    clock_gettime(CLOCK_MONOTONIC, &now);
    end = now;
    end.tv_sec += ns / 1000000000;
    end.tv_nsec += ns % 1000000000;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_nsec -= 1000000000L;
        end.tv_sec++;
    }
    next = now;
    for (;;) {
        next.tv_nsec += POLL_NS;
        if (next.tv_nsec >= 1000000000L) {
            next.tv_nsec -= 1000000000L;
            next.tv_sec++;
        }
        bool last = next.tv_sec > end.tv_sec ||
                    (next.tv_sec == end.tv_sec && next.tv_nsec >= end.tv_nsec);
        if (last)
            next = end;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) ==
               EINTR)
            ;
        if (last)
            return HTTP_GOING_ON;
        http_end end = http_request_end(r);
        if (end != HTTP_GOING_ON)
            return end;
    }
}

int http_error_window_ended(http_req *r, http_end end,
                            const char *client_gone)
{
    if (end == HTTP_PROGRAM_EXITING)
        return http_error(r, 503, "the program is exiting: the profile's "
                                  "window ended early and no profile is "
                                  "built during exit");
    if (end == HTTP_SERVER_STOPPING)
        return http_error(r, 503, "the profiling server is stopping: the "
                                  "profile's window ended early");
    return http_error(r, 500, "%s", client_gone);
}

/* Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits, no
 * overflow.  Returns 0 and *out, or -EINVAL. */
static int parse_int64(const char *s, int64_t *out)
{
    bool neg = *s == '-';
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return -EINVAL;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : INT64_MAX;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        unsigned d = (unsigned)(*s - '0');
        if (v > (limit - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* `debug` into *debug: absent is 0; 0, 1 or 2; anything else -EINVAL. */
static int debug_level(http_req *r, long *debug)
{
    *debug = 0;
    return http_query_long(r, "debug", 0, 2, debug) < 0 ? -EINVAL : 0;
}

/* Builds and encodes the proto of snapshot s. */
static int encode(const named_profile *p, const sampleset *s, int64_t time_ns,
                  int64_t duration_ns, unsigned char **buf, size_t *len)
{
    builder *b = builder_new();
    if (!b)
        return -ENOMEM;
    builder_set_time(b, time_ns, duration_ns);
    int rc = p->build(b, s);
    if (rc == 0)
        rc = symbolize_and_encode(b, buf, len);
    builder_free(b);
    return rc;
}

static int reply_proto(http_req *r, const named_profile *p, const sampleset *s,
                       int64_t time_ns, int64_t duration_ns,
                       const char *attachment)
{
    unsigned char *buf;
    size_t len;
    int rc = encode(p, s, time_ns, duration_ns, &buf, &len);
    if (rc != 0)
        return http_error(r, 500, "failed to build profile: %s",
                          cpprof_strerror(rc));
    rc = http_reply_profile(r, attachment, p->labelled, buf, len);
    free(buf);
    return rc;
}

static int reply_text(http_req *r, const named_profile *p, const sampleset *s,
                      int debug)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return http_error(r, 500, "out of memory");
    int rc = p->text(f, s, debug);
    if (fclose(f) != 0 && rc == 0)
        rc = -ENOMEM;
    if (rc == 0)
        rc = http_reply(r, "text/plain; charset=utf-8", NULL, text, len);
    else
        rc = http_error(r, 500, "failed to write profile: %s",
                        cpprof_strerror(rc));
    free(text);
    return rc;
}

static int serve_delta(http_req *r, const named_profile *p, const char *sec)
{
    int64_t seconds;
    if (parse_int64(sec, &seconds) != 0 || seconds <= 0)
        return http_error(r, 400, "invalid value for \"seconds\" - must be "
                                  "a positive integer");
    if (!p->delta)
        return http_error(r, 400, "\"seconds\" parameter is not supported "
                                  "for this profile type");
    long debug;
    if (debug_level(r, &debug) != 0 || debug != 0)
        return http_error(r, 400, "seconds and debug params are incompatible");
    sampleset *x, *y = NULL;
    int rc = p->snapshot(&x);
    if (rc != 0)
        return http_error(r, 500, "failed to collect profile: %s",
                          cpprof_strerror(rc));
    int64_t t0 = clock_ns(CLOCK_REALTIME);
    http_end end = http_wait_window(r, (long)seconds);
    if (end != HTTP_GOING_ON) {
        sampleset_free(x);
        return http_error_window_ended(r, end, "context canceled");
    }
    int64_t t1 = clock_ns(CLOCK_REALTIME);
    rc = p->snapshot(&y);
    if (rc == 0)
        rc = sampleset_subtract(y, x);
    sampleset_free(x);
    if (rc != 0) {
        sampleset_free(y);
        return http_error(r, 500, "failed to collect profile: %s",
                          cpprof_strerror(rc));
    }
    trim_unmapped(y);
    char name[128];
    snprintf(name, sizeof name, "%s-delta", p->name);
    rc = reply_proto(r, p, y, t1, t1 - t0, name);
    sampleset_free(y);
    return rc;
}

int http_serve_named(http_req *r, const named_profile *p)
{
    const char *format_error = http_profile_format_error(r);
    if (format_error != NULL)
        return http_error(r, 400, "%s", format_error);
    /* Not an empty profile, nor stacks cut to one nameless frame. */
    const char *why = http_stacks_unavailable();
    if (why)
        return http_error(r, 500, "Could not collect the %s profile: %s",
                          p->name, why);
    const char *sec = http_query(r, "seconds");
    if (sec && *sec)
        return serve_delta(r, p, sec);
    long debug;
    if (debug_level(r, &debug) != 0)
        return http_error(r, 400,
                          "invalid value for \"debug\" - must be 0, 1 or 2");
    sampleset *s;
    int64_t t0 = clock_ns(CLOCK_REALTIME);
    int rc = p->snapshot(&s);
    if (rc != 0)
        return http_error(r, 500, "failed to collect profile: %s",
                          cpprof_strerror(rc));
    trim_unmapped(s);
    if (debug != 0)
        rc = reply_text(r, p, s, (int)debug);
    else /* a snapshot has no window: Go leaves duration_nanos 0, and
          * pprof then prints no Duration (a delta's is its window) */
        rc = reply_proto(r, p, s, t0, 0, p->name);
    sampleset_free(s);
    return rc;
}
