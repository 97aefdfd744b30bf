/*
 * http_folded.c -- fgprof's other form, `format=folded`: Brendan Gregg's
 * folded stacks (FlameGraph's input), one line per distinct stack, its
 * frames' function names root first joined by ';', a space and the
 * number of samples, the lines in the byte order of their stacks, as
 * fgprof writes them (format.go's writeFolded, felixge/fgprof v0.9).
 *
 * It is made from the symbolized profile.proto the endpoint would have
 * sent, as http_json.c's form is, so the two never disagree.  An inlined
 * call is a frame of its own, as in pprof.  The format has no place for
 * labels: samples that differ only in them are one line.  A frame without
 * a function name is its address (0x...).  A name holding ';' or a line
 * break would cut its line into frames or lines that are not the
 * program's: those characters are written as ':' and ' '.
 */
#define _GNU_SOURCE /* open_memstream */
#include "http.h"
#include "profile.pb-c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Location Location;

struct line {
    char *stack;
    int64_t count;
};

static const Location *location_of(const Profile *p, uint64_t id)
{
    /* The builder numbers locations 1..n in order; check, then search. */
    if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id)
        return p->location[id - 1];
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id)
            return p->location[i];
    return NULL;
}

static const char *function_name(const Profile *p, uint64_t id)
{
    const Perftools__Profiles__Function *fn = NULL;
    if (id >= 1 && id <= p->n_function && p->function[id - 1]->id == id)
        fn = p->function[id - 1]; /* numbered in order, as locations */
    for (size_t i = 0; fn == NULL && i < p->n_function; i++)
        if (p->function[i]->id == id)
            fn = p->function[i];
    if (fn == NULL || fn->name <= 0 || (size_t)fn->name >= p->n_string_table)
        return NULL;
    return p->string_table[fn->name];
}

static void put_frame(FILE *f, const char *name, bool first)
{
    if (!first)
        fputc(';', f);
    for (; *name; name++)
        fputc(*name == ';' ? ':' : *name == '\n' || *name == '\r' ? ' '
                                                                    : *name,
              f);
}

/* Sample s's stack, root first, as folded text (malloc'd). */
static char *stack_text(const Profile *p,
                        const Perftools__Profiles__Sample *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL)
        return NULL;
    bool first = true;
    for (size_t i = s->n_location_id; i-- > 0;) {
        const Location *l = location_of(p, s->location_id[i]);
        if (l == NULL)
            continue;
        char addr[24];
        if (l->n_line == 0) {
            snprintf(addr, sizeof addr, "0x%" PRIx64, l->address);
            put_frame(f, addr, first);
            first = false;
        }
        /* The last line is the caller the others were inlined into. */
        for (size_t j = l->n_line; j-- > 0;) {
            const char *name = function_name(p, l->line[j]->function_id);
            if (name == NULL) {
                snprintf(addr, sizeof addr, "0x%" PRIx64, l->address);
                name = addr;
            }
            put_frame(f, name, first);
            first = false;
        }
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static int by_stack(const void *a, const void *b)
{
    return strcmp(((const struct line *)a)->stack,
                  ((const struct line *)b)->stack);
}

/* Sorts the lines and adds up those of one stack. */
static size_t merge(struct line *v, size_t n)
{
    qsort(v, n, sizeof *v, by_stack);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out > 0 && strcmp(v[out - 1].stack, v[i].stack) == 0) {
            v[out - 1].count += v[i].count;
            free(v[i].stack);
        } else {
            v[out++] = v[i];
        }
    }
    return out;
}

int http_profile_folded(const unsigned char *gz, size_t len, char **out,
                        size_t *out_len)
{
    Profile *p = http_profile_unpack(gz, len);
    if (p == NULL)
        return -EINVAL;
    struct line *v = calloc(p->n_sample ? p->n_sample : 1, sizeof *v);
    int rc = v ? 0 : -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; rc == 0 && i < p->n_sample; i++) {
        const Perftools__Profiles__Sample *s = p->sample[i];
        if (s->n_value == 0)
            continue;
        v[n].stack = stack_text(p, s);
        v[n].count = s->value[0];
        if (v[n].stack == NULL)
            rc = -ENOMEM;
        else
            n++;
    }
    FILE *f = rc == 0 ? open_memstream(out, out_len) : NULL;
    if (rc == 0 && f == NULL)
        rc = -ENOMEM;
    if (f != NULL) {
        n = merge(v, n);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%s %" PRId64 "\n", v[i].stack, v[i].count);
        if (fclose(f) != 0) {
            free(*out);
            rc = -ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].stack);
    free(v);
    perftools__profiles__profile__free_unpacked(p, NULL);
    return rc;
}
