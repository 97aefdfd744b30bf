/*
 * symbolize_lines.c -- compact line tables decoded from .debug_line (see
 * symbolize_lines.h for why).
 *
 * Shape: the header (DWARF 2 to 5) gives the directory and file tables,
 * copied into one block of joined names, exactly as libdw joins them (a
 * relative name after its directory and "/"; DWARF 2-4's directory 0 is
 * the unit's compilation directory; index 0 of a DWARF 2-4 file table is
 * "???").  The line-number program then runs twice: once to count its
 * rows, their address span and whether they come in order, once to write
 * them into three arrays of exactly that size (address minus the lowest,
 * line, file; a row ending a sequence has no file).  Rows out of order (a
 * unit with several sequences) are sorted as libdw sorts them (address,
 * end of sequence first, then program order), and of the rows at one
 * address only the last is kept: it is the one dwarf_getsrc_die() answers.
 * Two passes over bytes already in memory cost less than holding the
 * rows at their full size even for a moment.
 *
 * Every read goes through a reader that checks the bytes left; the first
 * out-of-bounds read, overlong number or unknown form marks the reader bad
 * and the table is refused (-EINVAL), never partly kept.  Numbers are read
 * in the host's byte order: only the process's own objects are read.
 */
#define _GNU_SOURCE
#include "symbolize_lines.h"
#include "util.h"

#include <dwarf.h>
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The file of a row that ends a sequence: lookups there find no line. */
#define NO_FILE UINT32_MAX

struct symln_table {
    uint64_t base;    /* address of a row whose offset is 0 */
    uint32_t *offs;   /* rows, by address: address minus base */
    int32_t *lines;
    uint32_t *files;  /* file table index, or NO_FILE */
    size_t nrows;
    const char **names; /* the file table, into blob */
    size_t nfiles;
    size_t bytes;
};

/* ---- Reading bytes ------------------------------------------------------ */

struct reader {
    const unsigned char *p, *end;
    bool bad;
};

static bool have(struct reader *r, size_t n)
{
    if (!r->bad && (size_t)(r->end - r->p) >= n)
        return true;
    r->bad = true;
    return false;
}

static uint64_t read_fixed(struct reader *r, size_t n)
{
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64 = 0;
    if (!have(r, n))
        return 0;
    switch (n) {
    case 1: memcpy(&u8, r->p, 1); u64 = u8; break;
    case 2: memcpy(&u16, r->p, 2); u64 = u16; break;
    case 4: memcpy(&u32, r->p, 4); u64 = u32; break;
    case 8: memcpy(&u64, r->p, 8); break;
    default: r->bad = true; return 0;
    }
    r->p += n;
    return u64;
}

static void skip(struct reader *r, uint64_t n)
{
    if (n > SIZE_MAX || !have(r, (size_t)n))
        return;
    r->p += n;
}

/* LEB128, at most 10 bytes; bits past 64 must be zero (or sign). */
static uint64_t read_leb(struct reader *r, bool is_signed)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (!have(r, 1))
            return 0;
        uint8_t b = *r->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (is_signed && shift + 7 < 64 && (b & 0x40))
                v |= ~(uint64_t)0 << (shift + 7);
            return v;
        }
    }
    r->bad = true;
    return 0;
}

static uint64_t read_uleb(struct reader *r)
{
    return read_leb(r, false);
}

static int64_t read_sleb(struct reader *r)
{
    return (int64_t)read_leb(r, true);
}

/* A NUL-terminated string in the bytes left. */
static const char *read_cstr(struct reader *r)
{
    const unsigned char *nul =
        r->bad ? NULL : memchr(r->p, '\0', (size_t)(r->end - r->p));
    if (!nul) {
        r->bad = true;
        return NULL;
    }
    const char *s = (const char *)r->p;
    r->p = nul + 1;
    return s;
}

/* The string at offset in a string section, or NULL (reader marked bad). */
static const char *string_at(struct reader *r, const unsigned char *sec,
                             size_t size, uint64_t offset)
{
    if (!sec || offset >= size || !memchr(sec + offset, '\0', size - offset)) {
        r->bad = true;
        return NULL;
    }
    return (const char *)sec + offset;
}

/* ---- The header --------------------------------------------------------- */

struct header {
    unsigned version, offset_size, address_size;
    uint8_t min_inst, max_ops, default_is_stmt, line_range, opcode_base;
    int8_t line_base;
    const uint8_t *opcode_lengths; /* [i - 1]: operands of opcode i */
    const unsigned char *program, *end;
};

struct dir {
    const char *name; /* NULL: unknown (no compilation directory) */
};

struct file {
    const char *name;
    uint64_t dir; /* index into the directories; UINT64_MAX: take as is */
};

/* The tables being read, before they are joined into names. */
struct lists {
    struct dir *dirs;
    struct file *files;
    size_t ndirs, nfiles, capdirs, capfiles;
    bool nomem;
};

static void add_dir(struct lists *l, const char *name)
{
    if (ARRAY_RESERVE(l->dirs, l->ndirs, l->capdirs, 1) != 0)
        l->nomem = true;
    else
        l->dirs[l->ndirs++] = (struct dir){name};
}

static void add_file(struct lists *l, const char *name, uint64_t dir)
{
    if (ARRAY_RESERVE(l->files, l->nfiles, l->capfiles, 1) != 0)
        l->nomem = true;
    else
        l->files[l->nfiles++] = (struct file){name, dir};
}

/* DWARF 2-4: directories, then files, each list ended by an empty name. */
static void read_lists_v4(struct reader *r, const char *comp_dir,
                          struct lists *l)
{
    add_dir(l, comp_dir);
    for (const char *d = read_cstr(r); d && d[0]; d = read_cstr(r))
        add_dir(l, d);
    add_file(l, "???", UINT64_MAX);
    for (const char *f = read_cstr(r); f && f[0]; f = read_cstr(r)) {
        uint64_t dir = read_uleb(r);
        read_uleb(r); /* modification time */
        read_uleb(r); /* length */
        add_file(l, f, dir);
    }
}

/* DWARF 5: one value of an entry; a path is given as a string, an index
 * as a number.  Forms that need the unit's other sections (strx) are
 * refused. */
static void read_form(struct reader *r, const struct header *h,
                      const symln_sections *sec, uint64_t form,
                      const char **str, uint64_t *num)
{
    switch (form) {
    case DW_FORM_string: *str = read_cstr(r); break;
    case DW_FORM_line_strp:
        *str = string_at(r, sec->line_str, sec->line_str_size,
                         read_fixed(r, h->offset_size));
        break;
    case DW_FORM_strp:
        *str = string_at(r, sec->str, sec->str_size,
                         read_fixed(r, h->offset_size));
        break;
    case DW_FORM_udata: *num = read_uleb(r); break;
    case DW_FORM_sdata: *num = (uint64_t)read_sleb(r); break;
    case DW_FORM_data1: *num = read_fixed(r, 1); break;
    case DW_FORM_data2: *num = read_fixed(r, 2); break;
    case DW_FORM_data4: *num = read_fixed(r, 4); break;
    case DW_FORM_data8: *num = read_fixed(r, 8); break;
    case DW_FORM_data16: skip(r, 16); break;
    case DW_FORM_block: skip(r, read_uleb(r)); break;
    case DW_FORM_block1: skip(r, read_fixed(r, 1)); break;
    case DW_FORM_block2: skip(r, read_fixed(r, 2)); break;
    case DW_FORM_block4: skip(r, read_fixed(r, 4)); break;
    default: r->bad = true; break;
    }
}

/* DWARF 5: an entry format, then count entries of it; each entry's path
 * and directory index (UINT64_MAX when it has none).  The format's pairs
 * are read again for each entry rather than kept: up to 255 of them took
 * 4 KiB of the stack of the thread building a profile, which may be the
 * program's and small. */
static void read_entries_v5(struct reader *r, const struct header *h,
                            const symln_sections *sec, struct lists *l,
                            bool files)
{
    size_t nformat = (size_t)read_fixed(r, 1);
    const struct reader format = *r;
    for (size_t i = 0; i < 2 * nformat; i++)
        read_uleb(r); /* content type and form */
    uint64_t count = read_uleb(r);
    /* Each entry takes a byte at least: a count past the bytes left is
     * malformed, and would otherwise loop long over nothing. */
    if (r->bad || (nformat == 0 && count != 0) ||
        count > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        return;
    }
    for (uint64_t n = 0; n < count && !r->bad && !l->nomem; n++) {
        const char *path = NULL;
        uint64_t dir = UINT64_MAX;
        struct reader pairs = format;
        for (size_t i = 0; i < nformat; i++) {
            const char *str = NULL;
            uint64_t num = UINT64_MAX;
            uint64_t content = read_uleb(&pairs);
            read_form(r, h, sec, read_uleb(&pairs), &str, &num);
            if (content == DW_LNCT_path)
                path = str;
            else if (content == DW_LNCT_directory_index)
                dir = num;
        }
        if (!path || (files && dir == UINT64_MAX)) {
            r->bad = true;
            return;
        }
        if (files)
            add_file(l, path, dir);
        else
            add_dir(l, path);
    }
    if (files && l->nfiles == 0)
        add_file(l, "???", UINT64_MAX); /* as libdw: index 0 exists */
}

/* The header at r (which spans the whole table on return: the unit's
 * length), with its directory and file lists. */
static void read_header(struct reader *r, const symln_sections *sec,
                        unsigned address_size, const char *comp_dir,
                        struct header *h, struct lists *l)
{
    *h = (struct header){.offset_size = 4, .address_size = address_size};
    uint64_t length = read_fixed(r, 4);
    if (length == 0xffffffff) {
        h->offset_size = 8;
        length = read_fixed(r, 8);
    } else if (length >= 0xfffffff0) {
        r->bad = true;
    }
    if (r->bad || length > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        return;
    }
    r->end = h->end = r->p + length;
    h->version = (unsigned)read_fixed(r, 2);
    if (h->version < 2 || h->version > 5)
        r->bad = true;
    if (h->version >= 5 && (read_fixed(r, 1) != address_size ||
                            read_fixed(r, 1) != 0 /* segment selector */))
        r->bad = true;
    uint64_t header_length = read_fixed(r, h->offset_size);
    if (r->bad || header_length > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        return;
    }
    h->program = r->p + header_length;
    h->min_inst = (uint8_t)read_fixed(r, 1);
    h->max_ops = h->version >= 4 ? (uint8_t)read_fixed(r, 1) : 1;
    h->default_is_stmt = (uint8_t)read_fixed(r, 1);
    h->line_base = (int8_t)read_fixed(r, 1);
    h->line_range = (uint8_t)read_fixed(r, 1);
    h->opcode_base = (uint8_t)read_fixed(r, 1);
    if (h->max_ops == 0 || h->opcode_base == 0)
        r->bad = true;
    h->opcode_lengths = r->p;
    skip(r, h->opcode_base - 1u);
    if (h->version < 5) {
        read_lists_v4(r, comp_dir, l);
    } else {
        read_entries_v5(r, h, sec, l, false);
        read_entries_v5(r, h, sec, l, true);
    }
    if (r->p > h->program) /* the lists ran past the header */
        r->bad = true;
}

/* ---- The program -------------------------------------------------------- */

/* What a pass over the program does with its rows: the first counts them
 * (and their span, and whether they come sorted), the second stores. */
struct rows {
    bool store;
    size_t n, cap; /* cap: rows the second pass has room for */
    bool sorted, any;
    uint64_t lo, hi, last_addr;
    bool last_end;
    uint64_t base;
    uint32_t *offs, *files;
    int32_t *lines;
};

static void put_row(struct rows *w, struct reader *r, uint64_t addr,
                    uint64_t file, int64_t line, bool end)
{
    if (line < INT32_MIN || line > INT32_MAX || file >= NO_FILE) {
        r->bad = true; /* as libdw, which refuses what its rows cannot hold */
        return;
    }
    if (w->store) {
        if (w->n == w->cap || addr < w->base ||
            addr - w->base > UINT32_MAX) { /* the bytes changed under us */
            r->bad = true;
            return;
        }
        w->offs[w->n] = (uint32_t)(addr - w->base);
        w->lines[w->n] = (int32_t)line;
        w->files[w->n] = end ? NO_FILE : (uint32_t)file;
        w->n++;
        return;
    }
    if (w->any && (addr < w->last_addr ||
                   (addr == w->last_addr && end && !w->last_end)))
        w->sorted = false;
    if (!w->any || addr < w->lo)
        w->lo = addr;
    if (!w->any || addr > w->hi)
        w->hi = addr;
    w->any = true;
    w->last_addr = addr;
    w->last_end = end;
    w->n++;
}

/* The registers the rows need (DWARF 5, 6.2.2). */
struct state {
    uint64_t addr, file;
    uint64_t line; /* modular, so that no operand can overflow it; read as
                    * signed at each row */
    unsigned op_index;
};

static void reset(struct state *s)
{
    *s = (struct state){.file = 1, .line = 1};
}

static void advance(struct state *s, const struct header *h, uint64_t ops)
{
    uint64_t total = s->op_index + ops;
    s->addr += h->min_inst * (total / h->max_ops);
    s->op_index = (unsigned)(total % h->max_ops);
}

/* An extended opcode (after its 0): its length, then what it says; the
 * reader continues after the length, whatever the opcode read. */
static void extended_opcode(struct reader *r, const struct header *h,
                            struct state *s, struct rows *w, struct lists *l)
{
    uint64_t len = read_uleb(r);
    if (len == 0 || r->bad || len > (uint64_t)(r->end - r->p)) {
        r->bad = true;
        return;
    }
    struct reader op = {r->p, r->p + len, false};
    r->p += len;
    switch (read_fixed(&op, 1)) {
    case DW_LNE_end_sequence:
        put_row(w, r, s->addr, s->file, (int64_t)s->line, true);
        reset(s);
        break;
    case DW_LNE_set_address:
        s->addr = read_fixed(&op, h->address_size);
        s->op_index = 0;
        break;
    case DW_LNE_define_file: {
        const char *name = read_cstr(&op);
        uint64_t dir = read_uleb(&op);
        if (!w->store && !op.bad)
            add_file(l, name, dir); /* once: the first pass builds lists */
        break;
    }
    default: /* discriminator, vendors' opcodes: nothing a lookup needs */
        break;
    }
    if (op.bad)
        r->bad = true;
}

/* A standard opcode's effect; false for one this decoder does not know,
 * whose operands the caller skips. */
static bool standard_opcode(struct reader *r, const struct header *h,
                            struct state *s, struct rows *w, uint8_t opcode)
{
    switch (opcode) {
    case DW_LNS_copy:
        put_row(w, r, s->addr, s->file, (int64_t)s->line, false);
        break;
    case DW_LNS_advance_pc: advance(s, h, read_uleb(r)); break;
    case DW_LNS_advance_line: s->line += (uint64_t)read_sleb(r); break;
    case DW_LNS_set_file: s->file = read_uleb(r); break;
    case DW_LNS_set_column: read_uleb(r); break;
    case DW_LNS_negate_stmt:
    case DW_LNS_set_basic_block:
    case DW_LNS_set_prologue_end:
    case DW_LNS_set_epilogue_begin: break;
    case DW_LNS_const_add_pc:
        advance(s, h, (255u - h->opcode_base) / h->line_range);
        break;
    case DW_LNS_fixed_advance_pc:
        s->addr += read_fixed(r, 2);
        s->op_index = 0;
        break;
    case DW_LNS_set_isa: read_uleb(r); break;
    default: return false;
    }
    return true;
}

/* One pass over the program. */
static void run_program(const struct header *h, struct rows *w,
                        struct lists *l, bool *bad)
{
    struct reader r = {h->program, h->end, false};
    struct state s;
    reset(&s);
    while (r.p < r.end && !r.bad && !l->nomem) {
        uint8_t opcode = *r.p++;
        if (opcode >= h->opcode_base) {
            if (h->line_range == 0) {
                r.bad = true;
                break;
            }
            unsigned adjusted = opcode - h->opcode_base;
            s.line += (uint64_t)(int64_t)(h->line_base +
                                          (int)(adjusted % h->line_range));
            advance(&s, h, adjusted / h->line_range);
            put_row(w, &r, s.addr, s.file, (int64_t)s.line, false);
        } else if (opcode == 0) {
            extended_opcode(&r, h, &s, w, l);
        } else if (!standard_opcode(&r, h, &s, w, opcode)) {
            for (uint8_t n = h->opcode_lengths[opcode - 1]; n > 0; n--)
                read_uleb(&r);
        }
    }
    *bad = r.bad;
}

/* ---- The table ---------------------------------------------------------- */

/* Joins the lists into t's file names, in one block after t's rows. */
static int join_names(symln_table *t, const struct lists *l)
{
    size_t size = 0;
    for (size_t i = 0; i < l->nfiles; i++) {
        const struct file *f = &l->files[i];
        if (f->dir != UINT64_MAX && f->dir >= l->ndirs)
            return -EINVAL; /* libdw refuses the table too */
        const char *dir = f->name[0] == '/' || f->dir == UINT64_MAX
                              ? NULL
                              : l->dirs[f->dir].name;
        size += (dir ? strlen(dir) + 1 : 0) + strlen(f->name) + 1;
    }
    char *blob = malloc(l->nfiles * sizeof *t->names + size);
    if (!blob)
        return -ENOMEM;
    t->names = (const char **)blob;
    t->nfiles = l->nfiles;
    char *at = blob + l->nfiles * sizeof *t->names;
    for (size_t i = 0; i < l->nfiles; i++) {
        const struct file *f = &l->files[i];
        const char *dir = f->name[0] == '/' || f->dir == UINT64_MAX
                              ? NULL
                              : l->dirs[f->dir].name;
        t->names[i] = at;
        if (dir)
            at = stpcpy(stpcpy(at, dir), "/");
        at = stpcpy(at, f->name) + 1;
    }
    t->bytes += l->nfiles * sizeof *t->names + size;
    return 0;
}

/* libdw's order: address, a sequence's end before a row at the same
 * address, then program order. */
static int by_address(const void *a, const void *b, void *table)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    const symln_table *t = table;
    if (t->offs[i] != t->offs[j])
        return t->offs[i] < t->offs[j] ? -1 : 1;
    bool ei = t->files[i] == NO_FILE, ej = t->files[j] == NO_FILE;
    if (ei != ej)
        return ei ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* Of the rows at each address (rows sorted) keeps the last, then makes
 * the last row end a sequence, as libdw does. */
static void keep_last_per_address(symln_table *t)
{
    size_t out = 0;
    for (size_t k = 0; k < t->nrows; k++) {
        if (k + 1 < t->nrows && t->offs[k + 1] == t->offs[k])
            continue;
        t->offs[out] = t->offs[k];
        t->lines[out] = t->lines[k];
        t->files[out] = t->files[k];
        out++;
    }
    t->nrows = out;
    if (out)
        t->files[out - 1] = NO_FILE;
}

/* Puts rows that came out of order (several sequences) in libdw's
 * order: an index sorted, then the rows gathered into new arrays. */
static int sort_rows(symln_table *t)
{
    if (t->nrows > UINT32_MAX)
        return -EINVAL;
    uint32_t *order = malloc(t->nrows * sizeof *order);
    uint32_t *offs = malloc(t->nrows * sizeof *offs);
    int32_t *lines = malloc(t->nrows * sizeof *lines);
    uint32_t *files = malloc(t->nrows * sizeof *files);
    if (!order || !offs || !lines || !files) {
        free(order);
        free(offs);
        free(lines);
        free(files);
        return -ENOMEM;
    }
    for (size_t i = 0; i < t->nrows; i++)
        order[i] = (uint32_t)i;
    qsort_r(order, t->nrows, sizeof *order, by_address, t);
    for (size_t k = 0; k < t->nrows; k++) {
        offs[k] = t->offs[order[k]];
        lines[k] = t->lines[order[k]];
        files[k] = t->files[order[k]];
    }
    free(order);
    free(t->offs);
    free(t->lines);
    free(t->files);
    t->offs = offs;
    t->lines = lines;
    t->files = files;
    return 0;
}

/* Gives the rows' arrays back what deduplication left unused. */
static void shrink_rows(symln_table *t)
{
    size_t n = t->nrows ? t->nrows : 1;
    uint32_t *offs = realloc(t->offs, n * sizeof *offs);
    if (offs)
        t->offs = offs;
    int32_t *lines = realloc(t->lines, n * sizeof *lines);
    if (lines)
        t->lines = lines;
    uint32_t *files = realloc(t->files, n * sizeof *files);
    if (files)
        t->files = files;
    t->bytes += t->nrows * (sizeof *offs + sizeof *lines + sizeof *files);
}

static int store_rows(symln_table *t, const struct header *h,
                      struct lists *l, const struct rows *count)
{
    if (count->any && count->hi - count->lo > UINT32_MAX)
        return -EINVAL; /* offsets are 32 bits: a unit within 4 GiB */
    size_t n = count->n ? count->n : 1;
    struct rows w = {.store = true, .cap = count->n, .base = count->lo};
    w.offs = malloc(n * sizeof *w.offs);
    w.lines = malloc(n * sizeof *w.lines);
    w.files = malloc(n * sizeof *w.files);
    t->offs = w.offs;
    t->lines = w.lines;
    t->files = w.files;
    t->base = count->lo;
    if (!w.offs || !w.lines || !w.files)
        return -ENOMEM;
    bool bad;
    run_program(h, &w, l, &bad);
    if (bad || w.n != count->n)
        return -EINVAL;
    t->nrows = w.n;
    int rc = count->sorted ? 0 : sort_rows(t);
    if (rc == 0) {
        keep_last_per_address(t);
        shrink_rows(t);
    }
    return rc;
}

int symln_decode(const symln_sections *sec, uint64_t offset,
                 unsigned address_size, const char *comp_dir,
                 symln_table **out)
{
    if (!sec->line || offset >= sec->line_size ||
        (address_size != 4 && address_size != 8))
        return -EINVAL;
    struct reader r = {sec->line + offset, sec->line + sec->line_size, false};
    struct header h;
    struct lists l = {0};
    read_header(&r, sec, address_size, comp_dir, &h, &l);
    struct rows count = {.sorted = true};
    bool bad = r.bad;
    if (!bad && !l.nomem)
        run_program(&h, &count, &l, &bad);
    symln_table *t = calloc(1, sizeof *t);
    int rc = l.nomem || !t ? -ENOMEM : bad ? -EINVAL : 0;
    if (rc == 0)
        rc = join_names(t, &l);
    if (rc == 0)
        rc = store_rows(t, &h, &l, &count);
    free(l.dirs);
    free(l.files);
    if (rc != 0) {
        symln_free(t);
        return rc;
    }
    t->bytes += sizeof *t;
    *out = t;
    return 0;
}

/* ---- Lookups ------------------------------------------------------------ */

int symln_lookup(const symln_table *t, uint64_t addr, const char **file,
                 int64_t *line)
{
    if (!t->nrows || addr < t->base)
        return -1;
    uint64_t off = addr - t->base;
    size_t lo = 0, hi = t->nrows; /* first row above off */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->offs[mid] <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || t->files[lo - 1] == NO_FILE)
        return -1;
    *file = symln_file(t, t->files[lo - 1]);
    *line = t->lines[lo - 1];
    return 0;
}

const char *symln_file(const symln_table *t, int64_t idx)
{
    return idx >= 0 && (uint64_t)idx < t->nfiles ? t->names[idx] : NULL;
}

size_t symln_rows(const symln_table *t)
{
    return t->nrows;
}

size_t symln_bytes(const symln_table *t)
{
    return t->bytes;
}

void symln_free(symln_table *t)
{
    if (!t)
        return;
    free(t->offs);
    free(t->lines);
    free(t->files);
    free(t->names);
    free(t);
}

/* ---- Sections ----------------------------------------------------------- */

/* Whether name is .debug_<what> or GNU's compressed .zdebug_<what>. */
static bool is_section(const char *name, const char *what)
{
    if (!name)
        return false;
    size_t skip = strncmp(name, ".debug_", 7) == 0    ? 7
                  : strncmp(name, ".zdebug_", 8) == 0 ? 8
                                                      : 0;
    return skip && strcmp(name + skip, what) == 0;
}

/* A section's bytes, when libdw left them readable (inflated). */
static void section_data(Elf_Scn *scn, const GElf_Shdr *shdr,
                         const unsigned char **buf, size_t *size)
{
    Elf_Data *data = shdr->sh_type != SHT_NOBITS &&
                             !(shdr->sh_flags & SHF_COMPRESSED)
                         ? elf_getdata(scn, NULL)
                         : NULL;
    if (!data || !data->d_buf ||
        (data->d_size >= 4 && memcmp(data->d_buf, "ZLIB", 4) == 0))
        return; /* still compressed: libdw did not load it */
    *buf = data->d_buf;
    *size = data->d_size;
}

int symln_sections_of(Dwarf *dw, symln_sections *out)
{
    *out = (symln_sections){0};
    Elf *elf = dw ? dwarf_getelf(dw) : NULL;
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
        return -ENOENT;
    for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn;
         scn = elf_nextscn(elf, scn)) {
        GElf_Shdr shdr;
        if (!gelf_getshdr(scn, &shdr))
            continue;
        const char *name = elf_strptr(elf, shstrndx, shdr.sh_name);
        if (is_section(name, "line"))
            section_data(scn, &shdr, &out->line, &out->line_size);
        else if (is_section(name, "line_str"))
            section_data(scn, &shdr, &out->line_str, &out->line_str_size);
        else if (is_section(name, "str"))
            section_data(scn, &shdr, &out->str, &out->str_size);
    }
    return out->line ? 0 : -ENOENT;
}
