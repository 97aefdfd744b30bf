/*
 * gotext.c -- Go's text forms: the record loop every debug=1 profile
 * shares and the frame lines of a stack (gotext.h).
 *
 * A record is Go's: "HEAD @ 0xPC 0xPC ...", a "# labels: {...}" line when
 * the record has labels, one "#\t0xPC\tFUNC+0xOFF\tFILE:LINE" line per
 * frame, and a blank line.  Symbolizing happens here, one session for all
 * the records of a profile, so the symbolizer's lock and libdw's opening
 * costs are paid once a request.
 *
 * debug=2's goroutine blocks are written here too (text_write_goroutine),
 * symbolized, in the lines every dump and the crash report share
 * (godump.c).
 */
#define _GNU_SOURCE
#include "gotext.h"
#include "labels.h"
#include "stacktab.h"
#include "symbolize.h"
#include "unwind.h"

#include <stdbool.h>
#include <stdlib.h>

/* The frames at pc (exact or already one byte back), taken in generation
 * `gen`: from the object that was mapped there then (unwind.h), or NULL
 * when that is no longer known (*why says so).  Within a session; *path
 * is the caller's to free. */
static const symbolize_result *frames_at(uint64_t gen, uintptr_t pc,
                                         char **path, const char **why)
{
    unwind_gone g;
    int where = unwind_gone_at(gen, pc, &g);
    *path = NULL;
    *why = where == UNWIND_PC_FORGOTTEN ? "[unloaded]" : "[out of memory]";
    if (where == UNWIND_PC_CURRENT)
        return symbolize_pc(pc);
    if (where != UNWIND_PC_GONE)
        return NULL;
    *path = (char *)g.path;
    symbolize_gone o = {g.path, g.dev, g.ino, g.bias};
    const char *build_id;
    return symbolize_gone_pc(&o, pc, &build_id);
}

void text_write_frames(FILE *f, const uintptr_t *pcs, size_t depth,
                       unsigned flags, uint64_t gen)
{
    for (size_t i = 0; i <= depth; i++) {
        if ((flags & STACK_GUESSED) && i == STACK_GUESS_AT(flags))
            fprintf(f, "#\t0x0\t%s+0x0\t?:0\n", STACK_GUESSED_FRAME);
        if (i == depth)
            break;
        bool exact = i == 0 && (flags & STACK_LEAF_EXACT);
        uintptr_t pc = exact || pcs[i] == 0 ? pcs[i] : pcs[i] - 1;
        char *path;
        const char *why;
        const symbolize_result *r = frames_at(gen, pc, &path, &why);
        if (!r)
            fprintf(f, "#\t%#lx\t%s+0x0\t:0\n", (unsigned long)pc, why);
        for (size_t j = 0; r && j < r->nframes; j++) {
            const symbolize_frame *fr = &r->frames[j];
            fprintf(f, "#\t%#lx\t", (unsigned long)pc);
            text_put_escaped(f, fr->name, false);
            fprintf(f, "+%#lx\t", (unsigned long)r->sym_offset);
            text_put_escaped(f, fr->file[0] ? fr->file : "?", false);
            fprintf(f, ":%lld\n", (long long)fr->line);
        }
        free(path);
    }
}

/* "# labels: {...}" when the set has labels. */
static void write_labels(FILE *f, const cpprof_labelset *labels)
{
    if (!cpprof_labelset_size(labels))
        return;
    int need = cpprof_labelset_format(labels, NULL, 0);
    char *text = need >= 0 ? malloc((size_t)need + 1) : NULL;
    if (!text)
        return;
    cpprof_labelset_format(labels, text, (size_t)need + 1);
    fprintf(f, "# labels: %s\n", text);
    free(text);
}

static void write_record(FILE *f, const text_record *rec)
{
    fputs(" @", f);
    for (size_t i = 0; i < rec->depth && !rec->pseudo_frame; i++)
        fprintf(f, " %#lx", (unsigned long)rec->pcs[i]);
    fputc('\n', f);
    write_labels(f, rec->labels);
    if (rec->pseudo_frame)
        fprintf(f, "#\t0x0\t%s\n", rec->pseudo_frame);
    else
        text_write_frames(f, rec->pcs, rec->depth, rec->flags, rec->gen);
    fputc('\n', f);
}

void text_write_records(FILE *f, size_t n,
                        void (*head)(FILE *f, size_t i, void *arg,
                                     text_record *rec),
                        void *arg)
{
    symbolize_begin();
    for (size_t i = 0; i < n; i++) {
        text_record rec = {0};
        head(f, i, arg, &rec);
        write_record(f, &rec);
    }
    symbolize_end();
}

/* ---- debug=2: goroutine blocks ------------------------------------------ */

/* Writes one of godump.h's lines and its newline: `write` fills a buffer
 * of `len` and returns what the whole line needs, as snprintf. */
#define PUT_LINE(f, write, ...)                                              \
    do {                                                                     \
        char small_[512];                                                    \
        size_t need_ = write(small_, sizeof small_, __VA_ARGS__);            \
        char *big_ = need_ < sizeof small_ ? NULL : malloc(need_ + 1);       \
        if (big_)                                                            \
            write(big_, need_ + 1, __VA_ARGS__);                             \
        fputs(big_ ? big_ : small_, f);                                      \
        fputc('\n', f);                                                      \
        free(big_);                                                          \
    } while (0)

static void write_go_frame(FILE *f, const char *name, const char *file,
                           int64_t line, uintptr_t off)
{
    PUT_LINE(f, godump_function, name);
    PUT_LINE(f, godump_file, file, line, true, off);
}

/* The frames of the PC at stack index i. */
static void write_go_frames_at(FILE *f, const text_goroutine *g, size_t i)
{
    bool exact = i == 0 && (g->flags & STACK_LEAF_EXACT);
    uintptr_t pc = exact || g->pcs[i] == 0 ? g->pcs[i] : g->pcs[i] - 1;
    char *path;
    const char *why;
    const symbolize_result *r = frames_at(g->gen, pc, &path, &why);
    if (!r)
        write_go_frame(f, why, "", 0, 0);
    for (size_t j = 0; r && j < r->nframes; j++)
        write_go_frame(f, r->frames[j].name, r->frames[j].file,
                       r->frames[j].line, r->sym_offset);
    free(path);
}

/* "created by FUNC in goroutine N" and the creating call's line. */
static void write_created_by(FILE *f, const text_goroutine *g)
{
    const symbolize_result *r = symbolize_pc(g->created_at - 1);
    const symbolize_frame *fr = r && r->nframes ? &r->frames[0] : NULL;
    PUT_LINE(f, godump_created_by, fr ? fr->name : "?", g->creator);
    PUT_LINE(f, godump_file, fr ? fr->file : "", fr ? fr->line : 0, true,
             r ? r->sym_offset : 0);
}

void text_write_goroutine(FILE *f, const text_goroutine *g)
{
    PUT_LINE(f, godump_header, &g->head);
    if (g->pseudo_frame)
        write_go_frame(f, g->pseudo_frame, "", 0, 0);
    for (size_t i = 0; !g->pseudo_frame && i <= g->depth; i++) {
        if ((g->flags & STACK_GUESSED) && i == STACK_GUESS_AT(g->flags))
            write_go_frame(f, STACK_GUESSED_FRAME, "", 0, 0);
        if (i < g->depth)
            write_go_frames_at(f, g, i);
    }
    if (g->creator)
        write_created_by(f, g);
}
