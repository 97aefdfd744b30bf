/*
 * unwind_cfi.c -- DWARF call-frame information (.eh_frame, .debug_frame)
 * compiled into the compact rows the signal-safe walker applies.
 *
 * Why ahead of time.  libgcc and libunwind interpret CFA programs inside
 * the unwind, which in a profiling signal handler means finding .eh_frame
 * through dl_iterate_phdr (the loader lock), allocating, and running a
 * bytecode interpreter on data that a concurrent dlclose may unmap.  Here
 * each image is parsed once, on a thread that may block and allocate, and
 * every FDE's program is run to the end, emitting one row each time the
 * rule for the CFA, the return address or the frame pointer changes.  The
 * walker then does a binary search and at most three loads per frame
 * (the fleet profilers' design: Parca agent, OpenTelemetry's eBPF
 * profiler; async-profiler's DwarfParser).
 *
 * What is kept.  Only the three registers a profile walk needs: the CFA
 * (register + offset; the x86-64 PLT's one expression; a sigreturn
 * trampoline, recognised by its CIE's 'S' augmentation), the return address
 * and the frame pointer (saved at CFA + offset, unchanged, or undefined for
 * the return address of the outermost frame).  Anything else a program
 * says about those three (DW_CFA_register, DW_CFA_expression, other
 * expressions) makes the row "unsupported": the walker falls back to frame
 * pointers for that frame and flags the sample.  Other registers' rules
 * are parsed and dropped.  Rows are 12 bytes; addresses are the image's own
 * ELF addresses (32 bits: an image whose code ends above 4 GiB gets no
 * table, and says so through -EFBIG).
 *
 * Every read of the image is bounds-checked (a truncated or hostile file
 * yields fewer rows, never a read outside it).
 */
#define _GNU_SOURCE
#include "unwind_cfi.h"

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#define ELF_MACHINE EM_X86_64
enum { DW_SP = 7, DW_FP = 6, DW_RA = 16 };
#elif defined(__aarch64__)
#define ELF_MACHINE EM_AARCH64
enum { DW_SP = 31, DW_FP = 29, DW_RA = 30 };
#else
#define ELF_MACHINE EM_NONE
enum { DW_SP = -1, DW_FP = -1, DW_RA = -1 };
#endif

/* ---- Bounded reads -------------------------------------------------- */

struct cursor {
    const uint8_t *p, *end;
    uint64_t vaddr_of_base; /* ELF address of `base`, for pc-relative */
    const uint8_t *base;
    bool bad;
};

static bool need(struct cursor *c, size_t n)
{
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        return false;
    }
    return true;
}

static uint64_t read_uN(struct cursor *c, size_t n)
{
    if (!need(c, n))
        return 0;
    uint64_t v = 0;
    memcpy(&v, c->p, n); /* little-endian hosts only (x86-64, aarch64) */
    c->p += n;
    return v;
}

static int64_t read_sN(struct cursor *c, size_t n)
{
    uint64_t v = read_uN(c, n);
    unsigned shift = 64 - 8 * n;
    return (int64_t)(v << shift) >> shift;
}

static uint64_t read_uleb(struct cursor *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0; need(c, 1); shift += 7) {
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    return 0;
}

static int64_t read_sleb(struct cursor *c)
{
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    do {
        if (!need(c, 1))
            return 0;
        b = *c->p++;
        if (shift < 64)
            v |= (int64_t)(b & 0x7f) << shift;
        shift += 7;
    } while (b & 0x80);
    if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
    return v;
}

/* A DW_EH_PE-encoded pointer.  Indirect and data/text-relative forms only
 * appear for personality routines and LSDAs, which are skipped by length;
 * for code addresses they mark the value as unusable. */
static uint64_t read_encoded(struct cursor *c, uint8_t enc, bool *usable)
{
    if (enc == 0xff) /* DW_EH_PE_omit */
        return 0;
    uint64_t here = c->vaddr_of_base + (uint64_t)(c->p - c->base);
    int64_t v;
    switch (enc & 0x0f) {
    case 0x00: v = (int64_t)read_uN(c, 8); break; /* absptr */
    case 0x01: v = (int64_t)read_uleb(c); break;
    case 0x02: v = (int64_t)read_uN(c, 2); break;
    case 0x03: v = (int64_t)read_uN(c, 4); break;
    case 0x04: v = (int64_t)read_uN(c, 8); break;
    case 0x09: v = read_sleb(c); break;
    case 0x0a: v = read_sN(c, 2); break;
    case 0x0b: v = read_sN(c, 4); break;
    case 0x0c: v = read_sN(c, 8); break;
    default: c->bad = true; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (int64_t)here; break; /* pcrel */
    default: *usable = false; break;
    }
    if (enc & 0x80)
        *usable = false;
    return (uint64_t)v;
}

/* ---- The rule state of a CFA program -------------------------------- */

struct reg_rule {
    uint8_t kind; /* RULE_* */
    int64_t off;
};
enum { RULE_SAME, RULE_UNDEF, RULE_AT, RULE_OTHER };

struct frame_state {
    uint8_t cfa; /* CFA_* */
    int64_t cfa_off;
    int64_t plt_threshold;
    struct reg_rule ra, fp;
};

struct row_list {
    struct cfi_row *r;
    size_t n, cap;
    size_t unsupported;
};

/* Rows live in their own mappings, not the host's heap: their megabytes
 * must not show in its heap profile or reshape its allocator's arenas.
 * `share` is MAP_PRIVATE for rows still being written, MAP_SHARED for a
 * finished table (table_map). */
static void *rows_map(size_t bytes, int share)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, share | MAP_ANONYMOUS,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static int row_append(struct row_list *l, struct cfi_row row)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 4096;
        struct cfi_row *r =
            l->r ? mremap(l->r, l->cap * sizeof *r, cap * sizeof *r,
                          MREMAP_MAYMOVE)
                 : rows_map(cap * sizeof *r, MAP_PRIVATE);
        if (!r || r == MAP_FAILED)
            return -ENOMEM;
        l->r = r;
        l->cap = cap;
    }
    l->r[l->n++] = row;
    return 0;
}

/* A finished table: never written again, so shared with the children of
 * a fork rather than copied.  fork copies the page-table entries of
 * every private page a process has written, and write-protects the
 * parent's; a server with a hundred objects has megabytes of tables,
 * which made each of its forks about 0.2 ms dearer on a VM (bench/fork),
 * and each child's exit as much.  Shared pages cost a fork nothing; a
 * child that walks stacks faults in the pages it reads. */
static void *table_map(size_t bytes) { return rows_map(bytes, MAP_SHARED); }

static void rows_unmap(struct row_list *l)
{
    if (l->r)
        munmap(l->r, l->cap * sizeof *l->r);
}

/* The compact form of `s`; any rule that does not fit becomes unsupported. */
static struct cfi_row encode_row(uint32_t start, const struct frame_state *s)
{
    struct cfi_row row = {.start = start};
    uint8_t cfa = s->cfa;
    if (s->cfa_off < INT32_MIN || s->cfa_off > INT32_MAX)
        cfa = CFA_UNSUPPORTED;
    row.cfa_off = (int32_t)s->cfa_off;
    if (cfa == CFA_PLT)
        row.fp_off = (int16_t)s->plt_threshold;
    uint8_t ra = RA_UNSUPPORTED;
    if (s->ra.kind == RULE_UNDEF)
        ra = RA_UNDEFINED;
    else if (s->ra.kind == RULE_SAME)
        ra = RA_SAME;
    else if (s->ra.kind == RULE_AT && s->ra.off % 8 == 0 &&
             s->ra.off / 8 >= INT8_MIN && s->ra.off / 8 <= INT8_MAX) {
        ra = RA_AT;
        row.ra_off8 = (int8_t)(s->ra.off / 8);
    }
    uint8_t fp = FP_UNSUPPORTED;
    if (s->fp.kind == RULE_SAME || s->fp.kind == RULE_UNDEF)
        fp = FP_SAME;
    else if (s->fp.kind == RULE_AT && cfa != CFA_PLT &&
             s->fp.off >= INT16_MIN && s->fp.off <= INT16_MAX) {
        fp = FP_AT;
        row.fp_off = (int16_t)s->fp.off;
    }
    uint8_t record = 0;
    if (ra == RA_UNSUPPORTED && fp == FP_AT && s->ra.kind == RULE_AT &&
        s->ra.off == s->fp.off + 8) {
        ra = RA_AT;
        record = CFI_RA_IN_RECORD;
    }
    row.rules = (uint8_t)(cfa | ra | fp | record);
    return row;
}

static bool row_unsupported(const struct cfi_row *r)
{
    return (r->rules & CFI_CFA_MASK) == CFA_UNSUPPORTED ||
           (r->rules & CFI_RA_MASK) == RA_UNSUPPORTED ||
           (r->rules & CFI_FP_MASK) == FP_UNSUPPORTED;
}

static bool rows_alike(const struct cfi_row *a, const struct cfi_row *b)
{
    return a->cfa_off == b->cfa_off && a->fp_off == b->fp_off &&
           a->ra_off8 == b->ra_off8 && a->rules == b->rules;
}

/* Emits the state in force from `loc`, unless the FDE's previous row
 * already says the same (`first` is that FDE's first row index). */
static int emit(struct row_list *l, size_t first, uint64_t loc,
                const struct frame_state *s)
{
    struct cfi_row row = encode_row((uint32_t)loc, s);
    if (l->n > first) {
        struct cfi_row *last = &l->r[l->n - 1];
        if (last->start == row.start) {
            *last = row;
            return 0;
        }
        if (rows_alike(last, &row))
            return 0;
    }
    return row_append(l, row);
}

/* The one DW_CFA_def_cfa_expression compilers and linkers emit for x86-64
 * PLT entries: DW_OP_breg7 (rsp) N; DW_OP_breg16 (rip) 0; DW_OP_lit15;
 * DW_OP_and; DW_OP_litK; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus. */
static bool parse_plt_expression(const uint8_t *e, size_t n,
                                 struct frame_state *s)
{
    if (ELF_MACHINE != EM_X86_64 || n < 11 || e[0] != 0x77)
        return false;
    struct cursor c = {.p = e + 1, .end = e + n};
    int64_t off = read_sleb(&c);
    static const uint8_t mid[] = {0x80, 0x00, 0x3f, 0x1a};
    static const uint8_t tail[] = {0x2a, 0x33, 0x24, 0x22};
    if (c.bad || (size_t)(c.end - c.p) != 9 || memcmp(c.p, mid, 4) != 0 ||
        c.p[4] < 0x30 || c.p[4] > 0x4f || memcmp(c.p + 5, tail, 4) != 0)
        return false;
    s->cfa = CFA_PLT;
    s->cfa_off = off;
    s->plt_threshold = c.p[4] - 0x30;
    return true;
}

/* ---- CIEs and FDEs --------------------------------------------------- */

struct cie {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    bool has_z, signal_frame;
    const uint8_t *insns, *insns_end;
};

static void set_reg(struct frame_state *s, uint64_t reg, uint8_t kind,
                    int64_t off, uint64_t ra_reg)
{
    struct reg_rule r = {kind, off};
    if (reg == ra_reg)
        s->ra = r;
    else if (reg == (uint64_t)DW_FP)
        s->fp = r;
}

static struct reg_rule get_reg(const struct frame_state *s, uint64_t reg,
                               uint64_t ra_reg)
{
    if (reg == ra_reg)
        return s->ra;
    if (reg == (uint64_t)DW_FP)
        return s->fp;
    return (struct reg_rule){RULE_OTHER, 0};
}

static void def_cfa(struct frame_state *s, uint64_t reg, int64_t off)
{
    s->cfa = reg == (uint64_t)DW_SP   ? CFA_SP
             : reg == (uint64_t)DW_FP ? CFA_FP
                                      : CFA_UNSUPPORTED;
    s->cfa_off = off;
}

#define REMEMBER_MAX 16

struct program {
    const struct cie *cie;
    const struct frame_state *initial; /* after the CIE's instructions */
    struct row_list *rows;             /* NULL while running the CIE's */
    size_t first;
    uint64_t loc, end;
};

/* DW_CFA_restore: the rule the CIE's instructions left for `reg`. */
static void restore_reg(const struct program *pg, struct frame_state *s,
                        uint64_t reg)
{
    if (!pg->initial)
        return;
    struct reg_rule r = get_reg(pg->initial, reg, pg->cie->ra_reg);
    set_reg(s, reg, r.kind, r.off, pg->cie->ra_reg);
}

/* Runs one CFA program over `s`.  Returns 0, or -ENOMEM.  A malformed
 * program stops where it goes wrong; the rows emitted so far stand. */
static int run_program(struct program *pg, struct cursor *c,
                       struct frame_state *s)
{
    const struct cie *cie = pg->cie;
    struct frame_state stack[REMEMBER_MAX];
    size_t depth = 0;
    while (!c->bad && c->p < c->end) {
        uint8_t op = *c->p++;
        uint64_t reg, delta = 0;
        int64_t off;
        bool advance = false;
        switch (op >> 6) {
        case 1:
            delta = op & 0x3f;
            advance = true;
            break;
        case 2:
            off = (int64_t)read_uleb(c) * cie->data_align;
            set_reg(s, op & 0x3f, RULE_AT, off, cie->ra_reg);
            continue;
        case 3:
            restore_reg(pg, s, op & 0x3f);
            continue;
        }
        if (!advance) {
            switch (op) {
            case 0x00: /* nop */
                break;
            case 0x02: delta = read_uN(c, 1); advance = true; break;
            case 0x03: delta = read_uN(c, 2); advance = true; break;
            case 0x04: delta = read_uN(c, 4); advance = true; break;
            case 0x01: /* set_loc: rare, and not worth an encoder here */
                return 0;
            case 0x05: /* offset_extended */
                reg = read_uleb(c);
                off = (int64_t)read_uleb(c) * cie->data_align;
                set_reg(s, reg, RULE_AT, off, cie->ra_reg);
                break;
            case 0x11: /* offset_extended_sf */
                reg = read_uleb(c);
                off = read_sleb(c) * cie->data_align;
                set_reg(s, reg, RULE_AT, off, cie->ra_reg);
                break;
            case 0x06: /* restore_extended */
                restore_reg(pg, s, read_uleb(c));
                break;
            case 0x07: set_reg(s, read_uleb(c), RULE_UNDEF, 0, cie->ra_reg); break;
            case 0x08: set_reg(s, read_uleb(c), RULE_SAME, 0, cie->ra_reg); break;
            case 0x09: /* register */
                reg = read_uleb(c);
                read_uleb(c);
                set_reg(s, reg, RULE_OTHER, 0, cie->ra_reg);
                break;
            case 0x0a: /* remember_state */
                if (depth == REMEMBER_MAX)
                    return 0;
                stack[depth++] = *s;
                break;
            case 0x0b: /* restore_state: the CFA rule too, as libgcc does and
                          gcc's epilogues (.cfi_remember_state before a
                          mid-function ret) rely on */
                if (depth == 0)
                    return 0;
                *s = stack[--depth];
                break;
            case 0x0c:
                reg = read_uleb(c);
                def_cfa(s, reg, (int64_t)read_uleb(c));
                break;
            case 0x12:
                reg = read_uleb(c);
                def_cfa(s, reg, read_sleb(c) * cie->data_align);
                break;
            case 0x0d: /* def_cfa_register */
                reg = read_uleb(c);
                if (s->cfa == CFA_SP || s->cfa == CFA_FP)
                    def_cfa(s, reg, s->cfa_off);
                else
                    s->cfa = CFA_UNSUPPORTED;
                break;
            case 0x0e: s->cfa_off = (int64_t)read_uleb(c); break;
            case 0x13: s->cfa_off = read_sleb(c) * cie->data_align; break;
            case 0x0f: { /* def_cfa_expression */
                uint64_t n = read_uleb(c);
                if (!need(c, n))
                    return 0;
                if (!parse_plt_expression(c->p, n, s))
                    s->cfa = CFA_UNSUPPORTED;
                c->p += n;
                break;
            }
            case 0x10:   /* expression */
            case 0x16: { /* val_expression */
                reg = read_uleb(c);
                uint64_t n = read_uleb(c);
                if (!need(c, n))
                    return 0;
                c->p += n;
                set_reg(s, reg, RULE_OTHER, 0, cie->ra_reg);
                break;
            }
            case 0x14: /* val_offset */
                reg = read_uleb(c);
                read_uleb(c);
                set_reg(s, reg, RULE_OTHER, 0, cie->ra_reg);
                break;
            case 0x15: /* val_offset_sf */
                reg = read_uleb(c);
                read_sleb(c);
                set_reg(s, reg, RULE_OTHER, 0, cie->ra_reg);
                break;
            case 0x2e: /* GNU_args_size */
                read_uleb(c);
                break;
            case 0x2f: /* GNU_negative_offset_extended */
                reg = read_uleb(c);
                off = -(int64_t)read_uleb(c) * cie->data_align;
                set_reg(s, reg, RULE_AT, off, cie->ra_reg);
                break;
            case 0x2d: /* AArch64 negate_ra_state: return addresses signed
                          with pointer authentication are not supported */
                s->ra.kind = RULE_OTHER;
                break;
            default: /* unknown opcode: its operands cannot be skipped */
                return 0;
            }
        }
        if (advance && pg->rows) {
            int rc = emit(pg->rows, pg->first, pg->loc, s);
            if (rc)
                return rc;
            pg->loc += delta * cie->code_align;
            if (pg->loc >= pg->end)
                return 0;
        }
    }
    return 0;
}

static bool parse_cie(struct cursor *c, struct cie *cie)
{
    memset(cie, 0, sizeof *cie);
    uint8_t version = (uint8_t)read_uN(c, 1);
    if (version != 1 && version != 3 && version != 4)
        return false;
    const char *aug = (const char *)c->p;
    size_t auglen = strnlen(aug, (size_t)(c->end - c->p));
    if (!need(c, auglen + 1))
        return false;
    c->p += auglen + 1;
    if (version == 4) {
        uint8_t addr_size = (uint8_t)read_uN(c, 1);
        read_uN(c, 1); /* segment selector size */
        if (addr_size != 8)
            return false;
    }
    cie->code_align = read_uleb(c);
    cie->data_align = read_sleb(c);
    cie->ra_reg = version == 1 ? read_uN(c, 1) : read_uleb(c);
    cie->fde_enc = 0x00; /* absptr unless 'R' says otherwise */
    const uint8_t *aug_end = NULL;
    for (size_t i = 0; i < auglen && !c->bad; i++) {
        bool usable = true;
        switch (aug[i]) {
        case 'z': {
            cie->has_z = true;
            uint64_t n = read_uleb(c);
            if (n > (uint64_t)(c->end - c->p))
                return false;
            aug_end = c->p + n; /* counted after the length itself */
            break;
        }
        case 'R': cie->fde_enc = (uint8_t)read_uN(c, 1); break;
        case 'L': read_uN(c, 1); break;
        case 'P': {
            uint8_t enc = (uint8_t)read_uN(c, 1);
            read_encoded(c, enc & 0x7f, &usable);
            break;
        }
        case 'S': cie->signal_frame = true; break;
        case 'B': break; /* AArch64 BTI: no unwinding effect */
        case 'e': /* "eh": GCC 2 era, unsupported */
        default:
            if (!cie->has_z)
                return false;
            i = auglen; /* 'z' gives the data's length: skip the rest */
        }
    }
    if (cie->has_z) {
        if (!aug_end || aug_end > c->end || aug_end < c->p)
            return false;
        c->p = aug_end;
    }
    cie->insns = c->p;
    cie->insns_end = c->end;
    return !c->bad && cie->code_align != 0;
}

struct section {
    const uint8_t *p;
    size_t size;
    uint64_t vaddr;
};

struct parse {
    struct section sec;
    bool eh;
    struct row_list rows;
    size_t fdes;
};

/* Parses the CIE at section offset `off`. */
static bool cie_at(const struct parse *ps, uint64_t off, struct cie *cie)
{
    if (off + 4 > ps->sec.size)
        return false;
    struct cursor c = {.p = ps->sec.p + off, .end = ps->sec.p + ps->sec.size,
                       .base = ps->sec.p, .vaddr_of_base = ps->sec.vaddr};
    uint64_t len = read_uN(&c, 4);
    if (len == 0 || len == 0xffffffff || len > (uint64_t)(c.end - c.p))
        return false;
    c.end = c.p + len;
    uint64_t id = read_uN(&c, 4);
    if (id != (ps->eh ? 0 : 0xffffffffu))
        return false;
    return parse_cie(&c, cie);
}

static int parse_fde(struct parse *ps, struct cursor *c, const struct cie *cie)
{
    bool usable = true;
    uint8_t enc = ps->eh ? cie->fde_enc : 0x00;
    uint64_t pc = read_encoded(c, enc, &usable);
    uint64_t range = read_encoded(c, enc & 0x0f, &usable);
    if (cie->has_z) {
        uint64_t n = read_uleb(c);
        if (!need(c, n))
            return 0;
        c->p += n;
    }
    if (c->bad || !usable || range == 0 || pc + range > UINT32_MAX ||
        pc + range < pc)
        return 0;
    ps->fdes++;
    struct frame_state init = {.cfa = CFA_UNSUPPORTED,
                               .ra = {RULE_SAME, 0},
                               .fp = {RULE_SAME, 0}};
    struct program pg = {.cie = cie};
    struct cursor ci = {.p = cie->insns, .end = cie->insns_end};
    int rc = run_program(&pg, &ci, &init);
    if (rc)
        return rc;
    if (cie->signal_frame)
        init.cfa = CFA_SIGFRAME;
    struct frame_state s = init;
    pg = (struct program){.cie = cie, .initial = &init, .rows = &ps->rows,
                          .first = ps->rows.n, .loc = pc, .end = pc + range};
    if (!cie->signal_frame) {
        rc = run_program(&pg, c, &s);
        if (rc)
            return rc;
    }
    if (pg.loc < pg.end && (rc = emit(&ps->rows, pg.first, pg.loc, &s)))
        return rc;
    /* The end of the range: no CFI until the next FDE says otherwise. */
    return row_append(&ps->rows, (struct cfi_row){.start = (uint32_t)pg.end,
                                                  .rules = CFA_NONE});
}

/* Parses the record at section offset `off`: an FDE's rows, nothing for a
 * CIE (parsed when an FDE refers to it).  Returns the offset after it, or
 * 0 at the section's end or a broken length; *rc gets -ENOMEM. */
static size_t parse_record(struct parse *ps, size_t off, int *rc)
{
    const uint8_t *end = ps->sec.p + ps->sec.size;
    if (off > ps->sec.size || ps->sec.size - off < 8)
        return 0;
    struct cursor c = {.p = ps->sec.p + off, .end = end, .base = ps->sec.p,
                       .vaddr_of_base = ps->sec.vaddr};
    uint64_t len = read_uN(&c, 4);
    if (len == 0) /* .eh_frame's terminator; padding in .debug_frame */
        return ps->eh ? 0 : off + 4;
    if (len == 0xffffffff || len > (uint64_t)(end - c.p))
        return 0; /* 64-bit DWARF is not produced for x86-64/aarch64 code */
    c.end = c.p + len;
    size_t next = (size_t)(c.end - ps->sec.p);
    const uint8_t *id_at = c.p;
    uint64_t id = read_uN(&c, 4);
    if (id == (ps->eh ? 0 : 0xffffffffu))
        return next;
    uint64_t cie_off = ps->eh ? (uint64_t)(id_at - ps->sec.p) - id : id;
    struct cie cie;
    if (cie_off < ps->sec.size && cie_at(ps, cie_off, &cie))
        *rc = parse_fde(ps, &c, &cie);
    return next;
}

/* Walks every record of the section in its order. */
static int parse_section(struct parse *ps)
{
    int rc = 0;
    for (size_t off = 0; rc == 0 && (off = parse_record(ps, off, &rc));)
        ;
    return rc;
}

/* Walks the FDEs in address order through .eh_frame_hdr's search table,
 * so that the rows come out sorted (no sort of hundreds of thousands of
 * rows).  Only the table encoding every linker writes (datarel sdata4) is
 * read; returns false for any other, and the caller scans the section. */
static bool parse_indexed(struct parse *ps, const struct section *hdr,
                          int *rc)
{
    if (hdr->size < 4 || hdr->p[0] != 1 || hdr->p[3] != 0x3b)
        return false;
    struct cursor c = {.p = hdr->p + 4, .end = hdr->p + hdr->size,
                       .base = hdr->p, .vaddr_of_base = hdr->vaddr};
    bool usable = true;
    read_encoded(&c, hdr->p[1], &usable); /* eh_frame_ptr */
    uint64_t count = read_encoded(&c, hdr->p[2], &usable);
    if (c.bad || !usable || count > (uint64_t)(c.end - c.p) / 8)
        return false;
    for (uint64_t i = 0; i < count && *rc == 0; i++) {
        read_sN(&c, 4); /* initial location */
        uint64_t fde = hdr->vaddr + (uint64_t)read_sN(&c, 4);
        if (fde >= ps->sec.vaddr && fde - ps->sec.vaddr < ps->sec.size)
            parse_record(ps, (size_t)(fde - ps->sec.vaddr), rc);
    }
    return true;
}

/* ---- Rows: sorting and compaction ------------------------------------ */

static int compare_rows(const struct cfi_row *x, const struct cfi_row *y)
{
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    /* An FDE's end marker yields to a row that starts there. */
    bool xn = (x->rules & CFI_CFA_MASK) == CFA_NONE;
    bool yn = (y->rules & CFI_CFA_MASK) == CFA_NONE;
    return (int)yn - (int)xn;
}

static void sift_down(struct cfi_row *r, size_t root, size_t n)
{
    for (size_t child; (child = 2 * root + 1) < n; root = child) {
        if (child + 1 < n && compare_rows(&r[child], &r[child + 1]) < 0)
            child++;
        if (compare_rows(&r[root], &r[child]) >= 0)
            return;
        struct cfi_row t = r[root];
        r[root] = r[child];
        r[child] = t;
    }
}

/* Sorts in place: no allocation (glibc's qsort would take megabytes of
 * the host's heap for a large object) and nothing to do when, as usual,
 * the linker laid FDEs out in address order. */
static void sort_rows(struct cfi_row *r, size_t n)
{
    size_t i = 1;
    while (i < n && compare_rows(&r[i - 1], &r[i]) <= 0)
        i++;
    if (i >= n)
        return;
    for (size_t k = n / 2; k-- > 0;)
        sift_down(r, k, n);
    for (size_t end = n; end-- > 1;) {
        struct cfi_row t = r[0];
        r[0] = r[end];
        r[end] = t;
        sift_down(r, 0, end);
    }
}

/* Sorts, keeps the last row of each start, merges rows alike. */
static size_t compact_rows(struct cfi_row *r, size_t n)
{
    sort_rows(r, n);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out > 0 && r[out - 1].start == r[i].start)
            out--;
        if (out > 0 && rows_alike(&r[out - 1], &r[i]))
            continue;
        r[out++] = r[i];
    }
    return out;
}

/* ---- ELF ------------------------------------------------------------- */

/* The section called `name`, or false. */
static bool find_section(const uint8_t *img, size_t size, const char *name,
                         struct section *out)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (eh->e_shoff == 0 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
        eh->e_shoff > size ||
        (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum ||
        eh->e_shstrndx >= eh->e_shnum)
        return false;
    Elf64_Shdr sh[1];
    const uint8_t *shtab = img + eh->e_shoff;
    memcpy(sh, shtab + eh->e_shstrndx * sizeof *sh, sizeof *sh);
    if (sh->sh_offset > size || sh->sh_size > size - sh->sh_offset)
        return false;
    const char *strtab = (const char *)img + sh->sh_offset;
    size_t strsize = sh->sh_size;
    size_t namelen = strlen(name);
    for (size_t i = 0; i < eh->e_shnum; i++) {
        memcpy(sh, shtab + i * sizeof *sh, sizeof *sh);
        if (sh->sh_name >= strsize || strsize - sh->sh_name <= namelen ||
            memcmp(strtab + sh->sh_name, name, namelen + 1) != 0)
            continue;
        if (sh->sh_type == SHT_NOBITS || sh->sh_offset > size ||
            sh->sh_size > size - sh->sh_offset)
            return false;
        *out = (struct section){img + sh->sh_offset, sh->sh_size,
                                sh->sh_addr};
        return true;
    }
    return false;
}

int cfi_build(const void *image, size_t size, struct cfi_table **out,
              struct cfi_stats *stats)
{
    const uint8_t *img = image;
    *out = NULL;
    memset(stats, 0, sizeof *stats);
    if (size < sizeof(Elf64_Ehdr) || memcmp(img, ELFMAG, SELFMAG) != 0 ||
        img[EI_CLASS] != ELFCLASS64 || img[EI_DATA] != ELFDATA2LSB ||
        ((const Elf64_Ehdr *)img)->e_machine != ELF_MACHINE)
        return -ENOEXEC;
    struct parse ps = {.eh = true};
    if (find_section(img, size, ".eh_frame", &ps.sec))
        stats->source = ".eh_frame";
    else if (find_section(img, size, ".debug_frame", &ps.sec)) {
        stats->source = ".debug_frame";
        ps.eh = false;
    } else
        return 0;
    struct section hdr;
    int rc = 0;
    if (!(ps.eh && find_section(img, size, ".eh_frame_hdr", &hdr) &&
          parse_indexed(&ps, &hdr, &rc)))
        rc = parse_section(&ps);
    if (rc) {
        rows_unmap(&ps.rows);
        return rc;
    }
    size_t n = compact_rows(ps.rows.r, ps.rows.n);
    unsigned shift = CFI_PAGE_SHIFT_MIN;
    uint64_t span = n ? ps.rows.r[n - 1].start - ps.rows.r[0].start : 0;
    while ((span >> shift) > n)
        shift++;
    uint32_t base = n ? ps.rows.r[0].start >> shift << shift : 0;
    uint32_t npages = n ? ((ps.rows.r[n - 1].start - base) >> shift) + 1 : 0;
    size_t bytes = sizeof(struct cfi_table) + n * sizeof(struct cfi_row) +
                   (npages + 1) * sizeof(uint32_t);
    struct cfi_table *t = table_map(bytes);
    if (!t) {
        rows_unmap(&ps.rows);
        return -ENOMEM;
    }
    t->nrows = n;
    t->bytes = bytes;
    t->base = base;
    t->npages = npages;
    t->shift = shift;
    if (n)
        memcpy(t->rows, ps.rows.r, n * sizeof t->rows[0]);
    rows_unmap(&ps.rows);
    uint32_t *page = (uint32_t *)(t->rows + n);
    for (size_t i = 0, r = 0; i <= npages; i++) {
        uint64_t at = base + ((uint64_t)i << shift);
        while (r < n && t->rows[r].start < at)
            r++;
        page[i] = (uint32_t)r; /* first row starting at or after page i */
    }
    t->page = page;
    stats->fdes = ps.fdes;
    for (size_t i = 0; i < n; i++)
        stats->unsupported += row_unsupported(&t->rows[i]);
    *out = t;
    return 0;
}

void cfi_free(struct cfi_table *t)
{
    if (t)
        munmap(t, t->bytes);
}

/* SIGNAL-SAFE */
const struct cfi_row *cfi_find(const struct cfi_table *t, uint64_t addr)
{
    if (addr < t->base)
        return NULL;
    uint64_t pg = (addr - t->base) >> t->shift;
    if (pg >= t->npages)
        return t->nrows ? &t->rows[t->nrows - 1] : NULL;
    /* The number of rows starting at or below addr lies between the
     * counts of rows before this page and before the next. */
    size_t lo = t->page[pg], hi = t->page[pg + 1];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->rows[mid].start <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? NULL : &t->rows[lo - 1];
}
