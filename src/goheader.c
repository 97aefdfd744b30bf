/*
 * goheader.c -- Go's goroutine header (goheader.h), for the goroutine
 * profile's debug=2 and the crash handler alike: so it is SIGNAL-SAFE
 * throughout, a buffer filled by hand (text_escape for every string).
 */
#include "goheader.h"
#include "config.h"
#include "labels.h"
#include "upper_calls.h"

/* A header being written: buf[at] is the next byte, counted past len as
 * snprintf counts (text_escape's convention). */
struct out {
    char *buf;
    size_t len, at;
};

/* SIGNAL-SAFE */
static void put(struct out *o, const char *s, bool quoted)
{
    o->at = text_escape(o->buf, o->len, o->at, s, quoted);
}

/* SIGNAL-SAFE: digits by hand, as the crash handler must. */
static void put_number(struct out *o, uint64_t v)
{
    char digits[24];
    size_t n = sizeof digits - 1;
    digits[n] = '\0';
    do {
        digits[--n] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(o, digits + n, false);
}

/* SIGNAL-SAFE: labels:{"k": "v", ...} */
static void put_labels(struct out *o, const cpprof_labelset *labels)
{
    put(o, ", labels:{", false);
    for (size_t i = 0; i < cpprof_labelset_size(labels); i++) {
        if (i)
            put(o, ", ", false);
        put(o, labelset_key(labels, i), true);
        put(o, ": ", false);
        put(o, labelset_value(labels, i), true);
    }
    put(o, "}", false);
}

/* SIGNAL-SAFE: cfg_int is one atomic load. */
size_t goheader_format(char *buf, size_t len, const goheader *h)
{
    struct out o = {buf, len, 0};
    if (len)
        buf[0] = '\0';
    put(&o, "goroutine ", false);
    put_number(&o, h->id);
    put(&o, " [", false);
    put(&o, h->state && h->state[0] ? h->state : "unknown", false);
    if (h->wait && h->wait[0]) {
        put(&o, ", ", false);
        put(&o, h->wait, false);
    }
    if (h->leaked)
        put(&o, " (leaked)", false);
    if (h->thread) {
        put(&o, ", thread ", false);
        put(&o, h->thread, true);
    }
    if (h->missing && h->missing[0]) {
        put(&o, ", stack unavailable: ", false);
        put(&o, h->missing, false);
    }
    if (cfg_int(CFG_TRACEBACKLABELS) && cpprof_labelset_size(h->labels))
        put_labels(&o, h->labels);
    put(&o, "]:", false);
    return o.at;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(goheader_format);
