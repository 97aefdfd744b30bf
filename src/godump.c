/*
 * godump.c -- the lines of Go's goroutine dumps (godump.h), for the
 * goroutine profile's debug=2 and the crash handler alike: so they are
 * SIGNAL-SAFE throughout, a buffer filled by hand (text_escape for every
 * string, numbers by hand).
 */
#include "godump.h"
#include "config.h"
#include "labels.h"
#include "upper_calls.h"

/* A line being written: buf[at] is the next byte, counted past len as
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

/* SIGNAL-SAFE: v in `base` (10, or 16 after "0x"). */
static void put_number(struct out *o, uint64_t v, unsigned base)
{
    char digits[24];
    size_t n = sizeof digits - 1;
    digits[n] = '\0';
    do {
        digits[--n] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    if (base == 16)
        put(o, "0x", false);
    put(o, digits + n, false);
}

/* SIGNAL-SAFE: an empty buffer to write into. */
static struct out start(char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    return (struct out){buf, len, 0};
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
size_t godump_header(char *buf, size_t len, const godump_goroutine *g)
{
    struct out o = start(buf, len);
    put(&o, "goroutine ", false);
    put_number(&o, g->id, 10);
    put(&o, " [", false);
    put(&o, g->state && g->state[0] ? g->state : "unknown", false);
    if (g->wait && g->wait[0]) {
        put(&o, ", ", false);
        put(&o, g->wait, false);
    }
    if (g->leaked)
        put(&o, " (leaked)", false);
    if (g->thread) {
        put(&o, ", thread ", false);
        put(&o, g->thread, true);
    }
    if (g->missing && g->missing[0]) {
        put(&o, ", stack unavailable: ", false);
        put(&o, g->missing, false);
    }
    if (cfg_int(CFG_TRACEBACKLABELS) && cpprof_labelset_size(g->labels))
        put_labels(&o, g->labels);
    put(&o, "]:", false);
    return o.at;
}

/* SIGNAL-SAFE */
size_t godump_function(char *buf, size_t len, const char *function)
{
    struct out o = start(buf, len);
    put(&o, function, false);
    put(&o, "(...)", false);
    return o.at;
}

/* SIGNAL-SAFE.  Whether Go's dump parsers take `file` as a frame's
 * source file: panicparse 2.3.0 takes a name ending .c, .go or .s (Go's
 * sources, cgo's C, Go's assembly) and stops at any other. */
static bool parsers_take(const char *file)
{
    size_t n = 0;
    while (file[n])
        n++;
    return (n > 2 && file[n - 2] == '.' &&
            (file[n - 1] == 'c' || file[n - 1] == 's')) ||
           (n > 3 && file[n - 3] == '.' && file[n - 2] == 'g' &&
            file[n - 1] == 'o');
}

/* SIGNAL-SAFE */
size_t godump_file(char *buf, size_t len, const char *file, int64_t line,
                   bool has_offset, uintptr_t offset)
{
    struct out o = start(buf, len);
    /* The tab as itself: text_escape would write it \t. */
    if (len > 1) {
        buf[0] = '\t';
        buf[1] = '\0';
    }
    o.at = 1;
    put(&o, parsers_take(file) ? file : "??", false);
    put(&o, ":", false);
    if (line < 0) {
        put(&o, "-", false);
        line = -line;
    }
    put_number(&o, (uint64_t)line, 10);
    if (has_offset) {
        put(&o, " +", false);
        put_number(&o, offset, 16);
    }
    return o.at;
}

/* SIGNAL-SAFE */
size_t godump_created_by(char *buf, size_t len, const char *function,
                         uint64_t creator)
{
    struct out o = start(buf, len);
    put(&o, "created by ", false);
    put(&o, function, false);
    put(&o, " in goroutine ", false);
    put_number(&o, creator, 10);
    return o.at;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(godump_created_by);
UPPER_CALLS(godump_file);
UPPER_CALLS(godump_function);
UPPER_CALLS(godump_header);
