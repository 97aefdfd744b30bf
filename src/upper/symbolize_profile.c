/*
 * symbolize_profile.c -- the symbolization pass over a built profile, as
 * google/pprof symbolizes a profile after it is built: the builder
 * (builder.c) records locations by address and the object they lie in,
 * and this pass, a level above it, asks the symbolizer (symbolize.h) for
 * their frames and gives the profile its mappings.
 *
 * One symbolizer session for the whole profile: symbolization is the slow
 * part and needs the symbolizer's lock.  A location in an object unloaded
 * since its sample was taken is symbolized from that object's file
 * (symbolize_gone_pc), under a Mapping of its own after the symbolizer's:
 * never as the function at that address now.  A mapping's has_* flags are
 * what every one of its locations has.
 */
#include "symbolize_profile.h"
#include "own.h"
#include "symbolize.h"

#include <errno.h>
#include <stdlib.h>

/* What the pass keeps per mapping: the symbolizer's first (index i),
 * then the gone objects' (nlive + their index). */
struct pass {
    builder *b;
    size_t nlive, n;
    builder_mapping *maps;
};

/* The symbolizer's result for location i at address, and its mapping in
 * *mapping: from the object mapped there now, or for a location in a gone
 * object, from that object. */
static const symbolize_result *symbolize_at(struct pass *p, uintptr_t address,
                                            size_t gone, int *mapping)
{
    if (!gone) {
        const symbolize_result *r = symbolize_pc(address);
        *mapping = r->mapping;
        return r;
    }
    const unwind_gone *g = builder_gone(p->b, gone - 1);
    symbolize_gone o = {g->path, g->dev, g->ino, g->bias};
    *mapping = (int)(p->nlive + gone - 1);
    return symbolize_gone_pc(&o, address, &p->maps[*mapping].build_id);
}

/* Gives location i its mapping and (once) lines, and lowers the flags of
 * that mapping to what the location has. */
static int symbolize_location(struct pass *p, size_t i)
{
    uintptr_t address;
    size_t gone;
    if (!builder_location(p->b, i, &address, &gone))
        return 0; /* a pseudo-frame has its line */
    int mapping;
    const symbolize_result *r = symbolize_at(p, address, gone, &mapping);
    builder_location_set_mapping(p->b, i, mapping);
    if (mapping >= 0) {
        builder_mapping *m = &p->maps[mapping];
        m->has_functions &= r->has_function;
        m->has_filenames &= r->has_file;
        m->has_line_numbers &= r->has_line;
        m->has_inline_frames &= r->has_inline_frames;
    }
    if (builder_location_has_lines(p->b, i))
        return 0;
    for (size_t j = 0; j < r->nframes; j++) {
        const symbolize_frame *f = &r->frames[j];
        builder_line line = {f->name, f->system_name, f->file, f->start_line,
                             f->line};
        int rc = builder_location_add_line(p->b, i, &line);
        if (rc)
            return rc;
    }
    return 0;
}

/* The mappings' places and names, before their locations lower the flags;
 * a gone object's build id comes with its first symbolized location. */
static void describe_mappings(struct pass *p)
{
    for (size_t i = 0; i < p->n; i++) {
        builder_mapping *m = &p->maps[i];
        *m = (builder_mapping){.has_functions = true,
                               .has_filenames = true,
                               .has_line_numbers = true,
                               .has_inline_frames = true,
                               .build_id = ""};
        if (i < p->nlive) {
            const symbolize_mapping *sm = symbolize_mapping_at(i);
            m->start = sm->start;
            m->limit = sm->limit;
            m->offset = sm->offset;
            m->file = sm->file;
            m->build_id = sm->build_id;
        } else {
            const unwind_gone *g = builder_gone(p->b, i - p->nlive);
            m->start = g->start;
            m->limit = g->limit;
            m->offset = g->offset;
            m->file = g->path;
        }
    }
}

static int run(struct pass *p)
{
    describe_mappings(p);
    int rc = 0;
    size_t nlocs = builder_location_count(p->b);
    for (size_t i = 0; rc == 0 && i < nlocs; i++)
        rc = symbolize_location(p, i);
    builder_clear_mappings(p->b);
    for (size_t i = 0; rc == 0 && i < p->n; i++)
        rc = builder_add_mapping(p->b, &p->maps[i]);
    return rc;
}

int symbolize_profile(builder *b)
{
    own_work_enter(); /* the symbolizer's memory is cpprof's */
    symbolize_begin();
    struct pass p = {b, symbolize_mapping_count(), 0, NULL};
    p.n = p.nlive + builder_gone_count(b);
    p.maps = malloc((p.n ? p.n : 1) * sizeof *p.maps);
    int rc = p.maps ? run(&p) : -ENOMEM;
    symbolize_end();
    free(p.maps);
    own_work_leave();
    return rc;
}

int symbolize_and_encode(builder *b, unsigned char **buf, size_t *len)
{
    int rc = symbolize_profile(b);
    return rc != 0 ? rc : builder_encode(b, buf, len);
}
