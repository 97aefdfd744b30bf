/*
 * http_json.c -- the JSON form of the proto profiles: `format=json` on
 * /debug/pprof/profile, goroutine, heap, allocs, block, mutex and
 * threadcreate, for the index page's flame graphs and for scripts
 * (README, "JSON profile").
 *
 * It is made from the gzip'd profile.proto the endpoint would have sent,
 * unpacked with protobuf-c's generated parser, so it holds exactly the
 * proto's samples, values and labels, symbolized once by the builder:
 * nothing here knows a collector or a symbol table.  Frames are objects,
 * {"function", "file", "line"}, one per line of a location (an inlined
 * call is a frame of its own, as pprof shows it), interned by their JSON
 * text into one table that the stacks index, which keeps 100,000 stacks
 * to a few megabytes.
 *
 * The text is written with stdio into memory rather than built as a
 * jansson tree, which for 100,000 samples would cost a few hundred
 * megabytes for a moment.  So strings are escaped here: the JSON escapes,
 * <, > and & as \u escapes (the text comes from the program and its
 * binaries, and is never markup), and invalid UTF-8 as U+FFFD, so that
 * the answer always parses.
 */
#define _GNU_SOURCE /* open_memstream */
#include "cpprof.h"
#include "http.h"
#include "profile.pb-c.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef Perftools__Profiles__Profile Profile;

/* ---- Unpacking ---------------------------------------------------------- */

/* Inflates gzip data into a malloc'd buffer. */
static int gunzip(const unsigned char *in, size_t len, unsigned char **out,
                  size_t *out_len)
{
    z_stream z = {.next_in = (unsigned char *)in, .avail_in = (uInt)len};
    size_t cap = len * 4 + 4096, n = 0;
    unsigned char *buf = NULL;
    int zrc = inflateInit2(&z, 16 + MAX_WBITS);
    while (zrc == Z_OK) {
        unsigned char *grown = realloc(buf, cap);
        if (grown == NULL)
            break;
        buf = grown;
        z.next_out = buf + n;
        z.avail_out = (uInt)(cap - n);
        zrc = inflate(&z, Z_NO_FLUSH);
        n = cap - z.avail_out;
        cap *= 2;
    }
    inflateEnd(&z);
    if (zrc != Z_STREAM_END) {
        free(buf);
        return zrc == Z_MEM_ERROR || buf == NULL ? -ENOMEM : -EIO;
    }
    *out = buf;
    *out_len = n;
    return 0;
}

Profile *http_profile_unpack(const unsigned char *gz, size_t len)
{
    unsigned char *raw;
    size_t raw_len;
    if (gunzip(gz, len, &raw, &raw_len) < 0)
        return NULL;
    Profile *p = perftools__profiles__profile__unpack(NULL, raw_len, raw);
    free(raw);
    return p;
}

/* ---- Strings ------------------------------------------------------------ */

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 when it is
 * not one (stray or overlong bytes, surrogates, past U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len = c < 0x80                ? 1
                 : c >= 0xc2 && c <= 0xdf ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) ||
        (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
        return 0;
    return len;
}

static void put_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    fputc('"', f);
    while (n > 0) {
        size_t len = utf8_len(p, n);
        if (len == 0) {
            fputs("\\ufffd", f);
            len = 1;
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&') {
            fprintf(f, "\\u%04x", *p);
        } else {
            fwrite(p, 1, len, f);
        }
        p += len;
        n -= len;
    }
    fputc('"', f);
}

static void put_base64(FILE *f, const unsigned char *in, size_t len)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    fputc('"', f);
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        char quad[4] = {digits[v >> 18], digits[(v >> 12) & 63],
                        i + 1 < len ? digits[(v >> 6) & 63] : '=',
                        i + 2 < len ? digits[v & 63] : '='};
        fwrite(quad, 1, 4, f);
    }
    fputc('"', f);
}

/* ---- Frames ------------------------------------------------------------- */

/* The profile being written: its frame texts, interned, and each
 * location's frames.  The builder numbers functions, locations and
 * mappings 1..n in order, so an id is an index plus one; anything else
 * (an index out of range) marks the profile `bad`. */
typedef struct {
    const Profile *p;
    bool bad;
    char **names;      /* distinct frame texts, in order of first use */
    size_t nnames, capnames;
    struct hashindex index; /* of the names */
    size_t *loc_first; /* location i's frames: flat[loc_first[i] ..
                          loc_first[i + 1]), innermost first */
    size_t *flat;
} frames;

static const char *str(frames *t, int64_t i)
{
    if (i < 0 || (size_t)i >= t->p->n_string_table) {
        t->bad = true;
        return "";
    }
    return t->p->string_table[i];
}

static bool same_name(const void *ctx, size_t item, const void *key)
{
    const frames *t = ctx;
    return strcmp(t->names[item], key) == 0;
}

/* The index of frame `text` (malloc'd; taken over), interned on first use;
 * -ENOMEM. */
static ssize_t intern(frames *t, char *text)
{
    if (text == NULL)
        return -ENOMEM;
    uint64_t hash = hash_string(text);
    struct hashindex_slot *slot =
        hashindex_find(&t->index, hash, same_name, t, text);
    if (slot != NULL && slot->item != 0) {
        free(text);
        return (ssize_t)(slot->item - 1);
    }
    if (slot == NULL || ARRAY_RESERVE(t->names, t->nnames, t->capnames, 1)) {
        free(text);
        return -ENOMEM;
    }
    t->names[t->nnames] = text;
    hashindex_set(&t->index, slot, hash, t->nnames);
    return (ssize_t)t->nnames++;
}

/* A frame as the JSON object it is written as (and interned by):
 * {"function": NAME, "file": FILE, "line": N}, file and line left out when
 * unknown.  Objects, not one "function (file:line)" string, because a
 * name may itself end in " (...)" (cpprof's own pseudo-frames do). */
static char *line_json(frames *t, const Perftools__Profiles__Line *l)
{
    const char *name = "", *file = "";
    if (l->function_id == 0 || l->function_id > t->p->n_function) {
        t->bad = true;
    } else {
        const Perftools__Profiles__Function *fn =
            t->p->function[l->function_id - 1];
        name = str(t, fn->name);
        file = str(t, fn->filename);
    }
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    fputs("{\"function\":", f);
    put_string(f, name);
    if (*file) {
        fputs(",\"file\":", f);
        put_string(f, file);
    }
    if (*file && l->line > 0)
        fprintf(f, ",\"line\":%" PRId64, l->line);
    fputc('}', f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* An unsymbolized location: {"address": "0xADDR", "object": OBJECT},
 * the object left out when unknown. */
static char *address_json(frames *t, const Perftools__Profiles__Location *l)
{
    const char *object = "";
    if (l->mapping_id > 0 && l->mapping_id <= t->p->n_mapping)
        object = str(t, t->p->mapping[l->mapping_id - 1]->filename);
    char *text = NULL;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    fprintf(f, "{\"address\":\"%#" PRIx64 "\"", l->address);
    if (*object) {
        fputs(",\"object\":", f);
        put_string(f, object);
    }
    fputc('}', f);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int add_frame(frames *t, size_t *n, char *text)
{
    ssize_t i = intern(t, text);
    if (i < 0)
        return (int)i;
    t->flat[(*n)++] = (size_t)i;
    return 0;
}

/* Fills t's frames from the profile's locations. */
static int build_frames(frames *t)
{
    const Profile *p = t->p;
    size_t total = 0;
    for (size_t i = 0; i < p->n_location; i++)
        total += p->location[i]->n_line ? p->location[i]->n_line : 1;
    t->loc_first = malloc((p->n_location + 1) * sizeof *t->loc_first);
    t->flat = malloc((total ? total : 1) * sizeof *t->flat);
    if (t->loc_first == NULL || t->flat == NULL)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < p->n_location; i++) {
        const Perftools__Profiles__Location *l = p->location[i];
        if (l->id != i + 1)
            t->bad = true;
        t->loc_first[i] = n;
        int rc = 0;
        for (size_t j = 0; j < l->n_line && rc == 0; j++)
            rc = add_frame(t, &n, line_json(t, l->line[j]));
        if (l->n_line == 0)
            rc = add_frame(t, &n, address_json(t, l));
        if (rc != 0)
            return rc;
    }
    t->loc_first[p->n_location] = n;
    return 0;
}

static void free_frames(frames *t)
{
    for (size_t i = 0; i < t->nnames; i++)
        free(t->names[i]);
    free(t->names);
    hashindex_free(&t->index);
    free(t->loc_first);
    free(t->flat);
}

/* ---- Writing ------------------------------------------------------------ */

static void put_value_type(FILE *f, frames *t,
                           const Perftools__Profiles__ValueType *v)
{
    if (v == NULL) {
        fputs("null", f);
        return;
    }
    fputs("{\"type\":", f);
    put_string(f, str(t, v->type));
    fputs(",\"unit\":", f);
    put_string(f, str(t, v->unit));
    fputc('}', f);
}

/* Every sample's frames, leaf first (each location's in turn), in one
 * array: sample i's are frames[first[i] .. first[i + 1]). */
typedef struct {
    uint32_t *frames;
    size_t *first;
} stacks;

static int expand_stacks(frames *t, stacks *st)
{
    const Profile *p = t->p;
    size_t total = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        for (size_t j = 0; j < p->sample[i]->n_location_id; j++) {
            uint64_t id = p->sample[i]->location_id[j];
            if (id == 0 || id > p->n_location)
                t->bad = true;
            else
                total += t->loc_first[id] - t->loc_first[id - 1];
        }
    st->frames = malloc((total ? total : 1) * sizeof *st->frames);
    st->first = malloc((p->n_sample + 1) * sizeof *st->first);
    if (st->frames == NULL || st->first == NULL)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        st->first[i] = n;
        for (size_t j = 0; j < p->sample[i]->n_location_id; j++) {
            uint64_t id = p->sample[i]->location_id[j];
            for (size_t k = id && id <= p->n_location ? t->loc_first[id - 1] : 0;
                 id && id <= p->n_location && k < t->loc_first[id]; k++)
                st->frames[n++] = (uint32_t)t->flat[k];
        }
    }
    st->first[p->n_sample] = n;
    return 0;
}

/* Samples in the order of their stacks read from the root (frame indexes
 * compared, a stack before those it is a prefix of), equal stacks in
 * profile order: samples sharing callers are then adjacent, which lets a
 * reader merge them into a tree without looking nodes up (flame.js). */
static int compare_root_first(const void *a, const void *b, void *arg)
{
    const stacks *st = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    const uint32_t *x = st->frames + st->first[i];
    const uint32_t *y = st->frames + st->first[j];
    size_t nx = st->first[i + 1] - st->first[i];
    size_t ny = st->first[j + 1] - st->first[j];
    for (size_t k = 0; k < nx && k < ny; k++) {
        uint32_t fx = x[nx - 1 - k], fy = y[ny - 1 - k];
        if (fx != fy)
            return fx < fy ? -1 : 1;
    }
    if (nx != ny)
        return nx < ny ? -1 : 1;
    return i < j ? -1 : i > j;
}

static void put_stack(FILE *f, const stacks *st, size_t i)
{
    fputc('[', f);
    for (size_t k = st->first[i]; k < st->first[i + 1]; k++)
        fprintf(f, k > st->first[i] ? ",%" PRIu32 : "%" PRIu32, st->frames[k]);
    fputc(']', f);
}

/* "labels" (string labels) and "numeric_labels", each only when present. */
static void put_labels(FILE *f, frames *t, const Perftools__Profiles__Sample *s)
{
    for (int numeric = 0; numeric <= 1; numeric++) {
        const char *sep = numeric ? ",\"numeric_labels\":{" : ",\"labels\":{";
        for (size_t i = 0; i < s->n_label; i++) {
            const Perftools__Profiles__Label *l = s->label[i];
            if ((l->str != 0) == numeric)
                continue;
            fputs(sep, f);
            sep = ",";
            put_string(f, str(t, l->key));
            fputc(':', f);
            if (numeric)
                fprintf(f, "%" PRId64, l->num);
            else
                put_string(f, str(t, l->str));
        }
        if (*sep == ',' && sep[1] == '\0')
            fputc('}', f);
    }
}

static int put_samples(FILE *f, frames *t)
{
    const Profile *p = t->p;
    stacks st = {0};
    size_t *order = malloc((p->n_sample ? p->n_sample : 1) * sizeof *order);
    int rc = order ? expand_stacks(t, &st) : -ENOMEM;
    if (rc == 0) {
        for (size_t i = 0; i < p->n_sample; i++)
            order[i] = i;
        qsort_r(order, p->n_sample, sizeof *order, compare_root_first, &st);
        fputs(",\"samples\":[", f);
        for (size_t i = 0; i < p->n_sample; i++) {
            const Perftools__Profiles__Sample *s = p->sample[order[i]];
            fputs(i ? ",\n{\"stack\":" : "\n{\"stack\":", f);
            put_stack(f, &st, order[i]);
            fputs(",\"values\":[", f);
            for (size_t j = 0; j < s->n_value; j++)
                fprintf(f, "%s%" PRId64, j ? "," : "", s->value[j]);
            fputc(']', f);
            put_labels(f, t, s);
            fputc('}', f);
        }
        fputs("]", f);
    }
    free(order);
    free(st.frames);
    free(st.first);
    return rc;
}

static int put_profile(FILE *f, frames *t, bool labelled)
{
    const Profile *p = t->p;
    fputs("{\"sample_types\":[", f);
    for (size_t i = 0; i < p->n_sample_type; i++) {
        if (i)
            fputc(',', f);
        put_value_type(f, t, p->sample_type[i]);
    }
    fputs("],\"default_sample_type\":", f);
    put_string(f, str(t, p->default_sample_type));
    fputs(",\"period_type\":", f);
    put_value_type(f, t, p->period_type);
    fprintf(f,
            ",\"period\":%" PRId64 ",\"time_nanos\":%" PRId64
            ",\"duration_nanos\":%" PRId64 ",\"labelled\":%s,\"frames\":[",
            p->period, p->time_nanos, p->duration_nanos,
            labelled ? "true" : "false");
    for (size_t i = 0; i < t->nnames; i++) {
        fputs(i ? ",\n" : "\n", f);
        fputs(t->names[i], f); /* already JSON: line_json, address_json */
    }
    fputc(']', f);
    return put_samples(f, t);
}

int http_profile_json(const unsigned char *gz, size_t len, bool labelled,
                      bool proto, char **out, size_t *out_len)
{
    frames t = {.p = http_profile_unpack(gz, len)};
    if (t.p == NULL)
        return -EINVAL;
    int rc = build_frames(&t);
    FILE *f = rc == 0 ? open_memstream(out, out_len) : NULL;
    if (f != NULL) {
        rc = put_profile(f, &t, labelled);
        if (proto) {
            fputs(",\"proto\":", f);
            put_base64(f, gz, len);
        }
        fputs("}\n", f);
        if (fclose(f) != 0 && rc == 0)
            rc = -ENOMEM;
        if (rc == 0 && t.bad)
            rc = -EINVAL;
        if (rc != 0)
            free(*out);
    } else if (rc == 0) {
        rc = -ENOMEM;
    }
    free_frames(&t);
    perftools__profiles__profile__free_unpacked((Profile *)t.p, NULL);
    return rc;
}

/* ---- Serving ------------------------------------------------------------ */

static bool wants_json(http_req *r)
{
    const char *format = http_query(r, "format");
    return format != NULL && strcmp(format, "json") == 0;
}

const char *http_profile_format_error(http_req *r)
{
    const char *format = http_query(r, "format");
    if (format != NULL && strcmp(format, "json") != 0 &&
        strcmp(format, "proto") != 0)
        return "invalid value for \"format\" - must be json or proto";
    long proto = 0;
    if (http_query_long(r, "proto", 0, 1, &proto) < 0)
        return "invalid value for \"proto\" - must be 0 or 1";
    if (proto && !wants_json(r))
        return "the proto parameter needs format=json";
    const char *debug = http_query(r, "debug");
    if (wants_json(r) && debug != NULL && strcmp(debug, "0") != 0)
        return "format=json and debug params are incompatible";
    return NULL;
}

int http_reply_profile(http_req *r, const char *attachment, bool labelled,
                       const unsigned char *gz, size_t len)
{
    if (!wants_json(r))
        return http_reply(r, "application/octet-stream", attachment, gz,
                          len);
    long proto = 0;
    http_query_long(r, "proto", 0, 1, &proto); /* checked before */
    char *text;
    size_t text_len;
    int rc = http_profile_json(gz, len, labelled, proto == 1, &text,
                               &text_len);
    if (rc != 0)
        return http_error(r, 500, "Could not write the profile as JSON: %s",
                          cpprof_strerror(rc));
    /* Held gzip'd whatever its size: sent so to a client that accepts
     * gzip, inflated as it reads to one that does not. */
    http_out *b;
    rc = http_out_open(&b);
    if (rc == 0)
        rc = http_out_write(b, text, text_len);
    free(text);
    if (rc) {
        http_out_free(b);
        return rc;
    }
    return http_reply_out(r, "application/json", NULL, b);
}
