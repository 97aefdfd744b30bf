/*
 * symbolize_dwarf.c -- inline chains from compact per-compilation-unit
 * tables (see symbolize_dwarf.h for why).
 *
 * Shape: a module's units by address come from its .debug_aranges, read
 * through libdw once and kept as a compact directory (unit start, end and
 * offset) for as long as the decoded units are: libdw's own index of them
 * goes with every session's Dwfl, and for glibc's debug file it is 1.7 MB
 * of allocations, about 10 ms of page faults, paid again by each later
 * session that meets a unit not yet decoded (a census that shows one of
 * cpprof's own threads in `syscall` for the first time).  A module whose
 * directory does not hold the address is asked through libdwfl, which
 * also finds units that .debug_aranges leaves out.  The first
 * lookup in a unit walks its DIE tree once, descending only where code can
 * be (functions, lexical blocks, namespaces), into two arrays:
 *   - functions: name (libdw's string), declaration line, call site, and
 *     the enclosing function (parent index), in tree order;
 *   - ranges: every address range of every function, sorted by start and,
 *     for equal starts, outer before inner.
 * A unit's functions nest and siblings do not overlap, so the range with
 * the greatest start at or below an address belongs to the innermost
 * function holding it or to a descendant of a function holding it: from
 * there, walking up the parents to the first function one of whose ranges
 * holds the address gives the innermost, and its ancestors up to the
 * subprogram are the callers.  Each function's own ranges are kept in a
 * third array, in tree order, for that check.
 *
 * The same walk copies what the lookups will need out of libdw: the
 * functions' names (each distinct string once, in one block per unit)
 * and the compilation directory; the unit's line table is decoded into
 * compact rows with its file table (symbolize_lines.c).  A decoded unit
 * therefore holds no pointer into libdw, which symbolize.c closes at the
 * end of every session: units are found again by their module's load
 * address and their offset in .debug_info, which stay the same while the
 * mappings do (symdw_flush() runs when they change).
 */
#define _GNU_SOURCE
#include "symbolize_dwarf.h"
#include "symbolize_lines.h"
#include "util.h"
#include "warn.h"

#include <dwarf.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* DIE nesting deeper than this is not walked (code is never that deep;
 * the bound keeps a malformed file from exhausting the stack). */
#define MAX_DIE_DEPTH 128

/* A name offset for "no name". */
#define NO_NAME UINT32_MAX

struct fn {
    uint32_t name;       /* offset in the unit's names, or NO_NAME */
    int32_t parent;      /* index of the enclosing function, or -1 */
    uint32_t depth;      /* 0 for a subprogram at the unit's top */
    uint32_t first_span; /* its ranges: spans[first_span..+nspans] */
    uint32_t nspans;
    int32_t start_line, call_line;
    int32_t call_file; /* -1: none */
    bool subprogram;
};

struct span {
    Dwarf_Addr lo, hi;
};

struct range {
    Dwarf_Addr lo; /* where it starts: its end is the span's (fn_covers) */
    uint32_t fn, depth;
};

struct symdw_unit {
    uintptr_t module; /* the module's load address */
    Dwarf_Off offset; /* the unit's in .debug_info */
    Dwarf_Addr bias;  /* process address minus the unit's */
    struct fn *fns;
    struct span *spans;
    struct range *ranges;
    size_t nfns, nspans, capfns, capspans;
    char *names; /* functions' names and the compilation directory */
    size_t names_size, names_cap;
    uint32_t comp_dir; /* offset in names, or NO_NAME */
    symln_table *lines; /* NULL: the unit has no usable line table */
    /* While decoding: libdw's strings already copied, by address. */
    struct copied *copied;
    size_t ncopied, capcopied;
    struct hashindex copied_index;
};

struct copied {
    const char *libdw;
    uint32_t name;
};

typedef struct symdw_unit unit;

/* An address range of a decoded unit, in the process's addresses. */
struct unit_range {
    uintptr_t lo, hi;
    const unit *u;
};

/* A unit's address range in its module (before the bias), from
 * .debug_aranges, and the offset of its DIE. */
struct dir_entry {
    Dwarf_Addr lo, hi;
    Dwarf_Off die;
};

/* A module's directory of units, sorted by lo; n 0 when it has no
 * .debug_aranges. */
struct unit_dir {
    uintptr_t module; /* the module's load address */
    struct dir_entry *entries;
    size_t n;
};

static struct {
    struct unit_dir *dirs;
    size_t ndirs, capdirs;
    unit **units; /* decoded, in order of decoding */
    size_t nunits, capunits;
    struct hashindex index; /* of the units, by (module, offset) */
    struct unit_range *ranges; /* of every decoded unit */
    size_t nranges, capranges;
    bool ranges_sorted;
    size_t bytes;
} U;

/* ---- Decoding a unit ---------------------------------------------------- */

/* Linkage name when there is one (what the symbol table says, demangled
 * later), else the plain name; through abstract origins and
 * specifications. */
static const char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute attr;
    const char *name = dwarf_formstring(
        dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(
            dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
    return name;
}

static bool same_copied(const void *ctx, size_t item, const void *key)
{
    const unit *u = ctx;
    return u->copied[item].libdw == key;
}

/* Offset in u->names of a copy of libdw's string s (each string, which
 * libdw gives as one address however many DIEs name it, copied once);
 * NO_NAME for NULL.  -1 in *failed when out of memory. */
static uint32_t copy_name(unit *u, const char *s, int *failed)
{
    if (!s)
        return NO_NAME;
    uint64_t hash = hash_mix(0, (uintptr_t)s);
    struct hashindex_slot *slot =
        hashindex_find(&u->copied_index, hash, same_copied, u, s);
    if (slot && slot->item)
        return u->copied[slot->item - 1].name;
    if (!slot || ARRAY_RESERVE(u->copied, u->ncopied, u->capcopied, 1)) {
        *failed = -1;
        return NO_NAME;
    }
    size_t len = strlen(s) + 1;
    while (u->names_size + len > u->names_cap) {
        size_t cap = u->names_cap ? 2 * u->names_cap : 4096;
        char *grown = cap < NO_NAME ? realloc(u->names, cap) : NULL;
        if (!grown) {
            *failed = -1;
            return NO_NAME;
        }
        u->names = grown;
        u->names_cap = cap;
    }
    uint32_t at = (uint32_t)u->names_size;
    memcpy(u->names + at, s, len);
    u->names_size += len;
    u->copied[u->ncopied] = (struct copied){s, at};
    hashindex_set(&u->copied_index, slot, hash, u->ncopied++);
    return at;
}

static int32_t udata_attr(Dwarf_Die *die, int name, int32_t absent)
{
    Dwarf_Attribute attr;
    Dwarf_Word v;
    return dwarf_formudata(dwarf_attr(die, name, &attr), &v) == 0 &&
                   v <= INT32_MAX
               ? (int32_t)v
               : absent;
}

/* Adds the function at die with its ranges.  Returns its index, -1 when
 * it has no code (an abstract or declared-only function), -2 when out of
 * memory. */
static int32_t add_function(unit *u, Dwarf_Die *die, int32_t parent)
{
    size_t first = u->nspans;
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
        if (lo >= hi)
            continue;
        if (ARRAY_RESERVE(u->spans, u->nspans, u->capspans, 1) != 0)
            return -2;
        u->spans[u->nspans++] = (struct span){lo, hi};
    }
    if (u->nspans == first)
        return -1;
    if (u->nfns >= INT32_MAX ||
        ARRAY_RESERVE(u->fns, u->nfns, u->capfns, 1) != 0)
        return -2;
    int decl_line = 0, failed = 0;
    dwarf_decl_line(die, &decl_line);
    bool inlined = dwarf_tag(die) == DW_TAG_inlined_subroutine;
    uint32_t name = copy_name(u, die_name(die), &failed);
    if (failed)
        return -2;
    u->fns[u->nfns] = (struct fn){
        .name = name,
        .parent = parent,
        .depth = parent < 0 ? 0 : u->fns[parent].depth + 1,
        .first_span = (uint32_t)first,
        .nspans = (uint32_t)(u->nspans - first),
        .start_line = decl_line,
        .call_line = inlined ? udata_attr(die, DW_AT_call_line, 0) : 0,
        .call_file = inlined ? udata_attr(die, DW_AT_call_file, -1) : -1,
        .subprogram = !inlined,
    };
    return (int32_t)u->nfns++;
}

/* Whether code can be below a DIE of this tag. */
static bool may_hold_code(int tag)
{
    switch (tag) {
    case DW_TAG_lexical_block:
    case DW_TAG_namespace:
    case DW_TAG_module:
    case DW_TAG_try_block:
    case DW_TAG_catch_block:
        return true;
    default:
        return false;
    }
}

/* Adds the functions below die, whose innermost enclosing function is
 * parent.  0, or -1 when out of memory. */
static int decode_children(unit *u, Dwarf_Die *die, int32_t parent,
                           int depth)
{
    Dwarf_Die child;
    if (depth > MAX_DIE_DEPTH || dwarf_child(die, &child) != 0)
        return 0;
    do {
        int tag = dwarf_tag(&child);
        int32_t inner = parent;
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            inner = add_function(u, &child, parent);
            if (inner == -2)
                return -1;
            if (inner == -1)
                continue; /* no code, nor any below it */
        } else if (!may_hold_code(tag)) {
            continue;
        }
        if (decode_children(u, &child, inner, depth + 1) != 0)
            return -1;
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

static int by_start_outer_first(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    if (x->lo != y->lo)
        return x->lo < y->lo ? -1 : 1;
    return (x->depth > y->depth) - (x->depth < y->depth);
}

/* The sorted ranges of every function of u. */
static int sort_ranges(unit *u)
{
    u->ranges = malloc((u->nspans ? u->nspans : 1) * sizeof *u->ranges);
    if (!u->ranges)
        return -1;
    for (size_t f = 0; f < u->nfns; f++)
        for (uint32_t s = 0; s < u->fns[f].nspans; s++) {
            const struct span *sp = &u->spans[u->fns[f].first_span + s];
            u->ranges[u->fns[f].first_span + s] =
                (struct range){sp->lo, (uint32_t)f, u->fns[f].depth};
        }
    qsort(u->ranges, u->nspans, sizeof *u->ranges, by_start_outer_first);
    return 0;
}

static void free_unit(unit *u)
{
    if (!u)
        return;
    free(u->fns);
    free(u->spans);
    free(u->ranges);
    free(u->names);
    free(u->copied);
    hashindex_free(&u->copied_index);
    symln_free(u->lines);
    free(u);
}

static size_t unit_bytes(const unit *u)
{
    return sizeof *u + u->nfns * sizeof *u->fns +
           u->nspans * (sizeof *u->spans + sizeof *u->ranges) +
           u->names_size + (u->lines ? symln_bytes(u->lines) : 0);
}

/* Gives back what growing by doubling left unused, and the table of
 * copied strings, which only the decoding needs. */
static void shrink_unit(unit *u)
{
    struct fn *fns = realloc(u->fns, (u->nfns ? u->nfns : 1) * sizeof *fns);
    if (fns)
        u->fns = fns;
    struct span *spans =
        realloc(u->spans, (u->nspans ? u->nspans : 1) * sizeof *spans);
    if (spans)
        u->spans = spans;
    char *names = realloc(u->names, u->names_size ? u->names_size : 1);
    if (names)
        u->names = names;
    free(u->copied);
    u->copied = NULL;
    u->ncopied = u->capcopied = 0;
    hashindex_free(&u->copied_index);
}

/* Says once, on stderr, that a unit's line table could not be used. */
static void warn_lines(Dwfl_Module *mod, Dwarf_Off offset, int rc)
{
    static bool warned;
    if (warned || rc == -ENOENT)
        return; /* a unit without a line table is no fault */
    warned = true;
    const char *name =
        dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    warn_stderr(
            "cpprof: symbolizer: the line table of the unit at 0x%llx of %s "
            "is %s; its addresses get no file or line (said once)\n",
            (unsigned long long)offset, name ? name : "?",
            rc == -ENOMEM ? "too large for memory" : "malformed");
}

/* The unit's line table, through DW_AT_stmt_list.  0, or a negative
 * code (-ENOENT: the unit has none). */
static int decode_lines(unit *u, Dwfl_Module *mod, Dwarf_Die *cudie)
{
    Dwarf_Addr bias;
    Dwarf *dw = dwfl_module_getdwarf(mod, &bias);
    Dwarf_Attribute attr;
    Dwarf_Word offset;
    Dwarf_Die cu;
    uint8_t address_size;
    symln_sections sec;
    if (!dw ||
        dwarf_formudata(dwarf_attr(cudie, DW_AT_stmt_list, &attr), &offset) !=
            0 ||
        dwarf_diecu(cudie, &cu, &address_size, NULL) == NULL ||
        symln_sections_of(dw, &sec) != 0)
        return -ENOENT;
    const char *comp_dir =
        u->comp_dir == NO_NAME ? NULL : u->names + u->comp_dir;
    return symln_decode(&sec, offset, address_size, comp_dir, &u->lines);
}

static unit *decode_unit(Dwfl_Module *mod, uintptr_t module,
                         Dwarf_Die *cudie, Dwarf_Addr bias)
{
    unit *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->module = module;
    u->offset = dwarf_dieoffset(cudie);
    u->bias = bias;
    Dwarf_Attribute attr;
    int failed = 0;
    u->comp_dir = copy_name(
        u, dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &attr)),
        &failed);
    if (failed || decode_children(u, cudie, -1, 0) != 0 ||
        sort_ranges(u) != 0) {
        free_unit(u);
        return NULL;
    }
    shrink_unit(u);
    int rc = decode_lines(u, mod, cudie);
    if (rc != 0)
        warn_lines(mod, u->offset, rc);
    return u;
}

/* ---- Units by module and offset ----------------------------------------- */

struct unit_key {
    uintptr_t module;
    Dwarf_Off offset;
};

static bool same_unit(const void *ctx, size_t item, const void *key)
{
    const struct unit_key *k = key;
    (void)ctx;
    return U.units[item]->module == k->module &&
           U.units[item]->offset == k->offset;
}

/* Remembers the unit's own address ranges, by which later sessions find
 * it without libdw (symdw_chain_decoded).  A unit whose ranges could not all be
 * kept is only found through libdw, as before. */
static void add_unit_ranges(const unit *u, Dwarf_Die *cudie)
{
    size_t first = U.nranges;
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(cudie, off, &base, &lo, &hi)) > 0) {
        if (lo >= hi)
            continue;
        if (ARRAY_RESERVE(U.ranges, U.nranges, U.capranges, 1) != 0) {
            U.nranges = first;
            return;
        }
        U.ranges[U.nranges++] =
            (struct unit_range){lo + u->bias, hi + u->bias, u};
    }
    U.ranges_sorted = U.nranges == first && U.ranges_sorted;
}

/* The decoded unit of cudie in mod, decoding it on first use; NULL when
 * out of memory. */
static unit *unit_of(Dwfl_Module *mod, Dwarf_Die *cudie, Dwarf_Addr bias)
{
    Dwarf_Addr low = 0;
    dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL);
    struct unit_key key = {(uintptr_t)low, dwarf_dieoffset(cudie)};
    uint64_t hash = hash_mix(hash_mix(0, key.module), key.offset);
    size_t before = U.index.n_slots;
    struct hashindex_slot *slot =
        hashindex_find(&U.index, hash, same_unit, NULL, &key);
    U.bytes += (U.index.n_slots - before) * sizeof *U.index.slots;
    if (!slot)
        return NULL;
    if (slot->item)
        return U.units[slot->item - 1];
    before = U.capunits;
    if (ARRAY_RESERVE(U.units, U.nunits, U.capunits, 1) != 0)
        return NULL;
    U.bytes += (U.capunits - before) * sizeof *U.units;
    unit *u = decode_unit(mod, key.module, cudie, bias);
    if (!u)
        return NULL;
    U.units[U.nunits] = u;
    hashindex_set(&U.index, slot, hash, U.nunits++);
    U.bytes += unit_bytes(u);
    add_unit_ranges(u, cudie);
    return u;
}

void symdw_flush(void)
{
    for (size_t i = 0; i < U.ndirs; i++)
        free(U.dirs[i].entries);
    free(U.dirs);
    U.dirs = NULL;
    U.ndirs = U.capdirs = 0;
    for (size_t i = 0; i < U.nunits; i++)
        free_unit(U.units[i]);
    free(U.units);
    free(U.ranges);
    hashindex_free(&U.index);
    U.units = NULL;
    U.ranges = NULL;
    U.nunits = U.capunits = U.bytes = U.nranges = U.capranges = 0;
}

size_t symdw_bytes(void)
{
    return U.bytes + U.capranges * sizeof *U.ranges;
}

/* ---- Lookup ------------------------------------------------------------- */

static bool fn_covers(const unit *u, int32_t f, Dwarf_Addr a)
{
    const struct span *sp = &u->spans[u->fns[f].first_span];
    for (uint32_t i = 0; i < u->fns[f].nspans; i++)
        if (sp[i].lo <= a && a < sp[i].hi)
            return true;
    return false;
}

/* How many of the n items of `size` bytes, sorted by where they start
 * (their first member, 64 bits), start at or below a: the last of those
 * is the one that may hold a.  A unit's ranges, the decoded units' ranges
 * and a module's directory are searched with it. */
static size_t starting_at_or_below(const void *items, size_t n, size_t size,
                                   uint64_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t start;
        memcpy(&start, (const char *)items + mid * size, sizeof start);
        if (start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
_Static_assert(offsetof(struct range, lo) == 0 &&
                   sizeof(((struct range *)0)->lo) == sizeof(uint64_t) &&
                   offsetof(struct unit_range, lo) == 0 &&
                   sizeof(((struct unit_range *)0)->lo) == sizeof(uint64_t) &&
                   offsetof(struct dir_entry, lo) == 0 &&
                   sizeof(((struct dir_entry *)0)->lo) == sizeof(uint64_t),
               "starting_at_or_below reads a 64-bit start first");

/* Index of the last range starting at or below a, or -1. */
static ptrdiff_t last_range_at_or_below(const unit *u, Dwarf_Addr a)
{
    return (ptrdiff_t)starting_at_or_below(u->ranges, u->nspans,
                                           sizeof *u->ranges, a) - 1;
}

/* The innermost function holding a, or -1. */
static int32_t innermost_at(const unit *u, Dwarf_Addr a)
{
    ptrdiff_t k = last_range_at_or_below(u, a);
    int32_t f = k >= 0 ? (int32_t)u->ranges[k].fn : -1;
    while (f >= 0 && !fn_covers(u, f, a))
        f = u->fns[f].parent;
    return f;
}

/* The chain at a (the unit's address) in u. */
static size_t chain_in(const unit *u, Dwarf_Addr a, symdw_frame *frames,
                       size_t max)
{
    size_t n = 0;
    int32_t inner = -1;
    for (int32_t f = innermost_at(u, a); f >= 0 && n < max;
         f = u->fns[f].parent) {
        const struct fn *fn = &u->fns[f];
        frames[n++] = (symdw_frame){
            .system_name = fn->name == NO_NAME ? NULL : u->names + fn->name,
            .start_line = fn->start_line,
            .call_file = inner >= 0 ? u->fns[inner].call_file : -1,
            .call_line = inner >= 0 ? u->fns[inner].call_line : 0,
        };
        inner = f;
        if (fn->subprogram)
            break;
    }
    return n;
}

/* The directory of the module at load address `module` in dw, read on
 * first use; NULL when out of memory. */
static const struct unit_dir *dir_of(Dwarf *dw, uintptr_t module)
{
    for (size_t i = 0; i < U.ndirs; i++)
        if (U.dirs[i].module == module)
            return &U.dirs[i];
    size_t before = U.capdirs;
    if (ARRAY_RESERVE(U.dirs, U.ndirs, U.capdirs, 1) != 0)
        return NULL;
    U.bytes += (U.capdirs - before) * sizeof *U.dirs;
    struct unit_dir *d = &U.dirs[U.ndirs];
    *d = (struct unit_dir){.module = module};
    Dwarf_Aranges *aranges;
    size_t n = 0;
    if (dwarf_getaranges(dw, &aranges, &n) != 0 || n == 0) {
        U.ndirs++; /* none: every lookup goes through libdwfl */
        return d;
    }
    if (!(d->entries = malloc(n * sizeof *d->entries)))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        Dwarf_Addr lo = 0;
        Dwarf_Word len = 0;
        Dwarf_Off die = 0;
        dwarf_getarangeinfo(dwarf_onearange(aranges, i), &lo, &len, &die);
        d->entries[d->n++] = (struct dir_entry){lo, lo + len, die};
    }
    U.bytes += n * sizeof *d->entries;
    U.ndirs++;
    return d;
}

/* The DIE of the unit holding a (the module's address) by the directory,
 * in *die; NULL when the directory does not hold a.  libdw sorts its
 * aranges by start; they do not overlap. */
static Dwarf_Die *dir_lookup(Dwarf *dw, const struct unit_dir *d,
                             Dwarf_Addr a, Dwarf_Die *die)
{
    size_t lo = starting_at_or_below(d->entries, d->n, sizeof *d->entries, a);
    if (lo == 0 || a >= d->entries[lo - 1].hi)
        return NULL;
    return dwarf_offdie(dw, d->entries[lo - 1].die, die);
}

/* The compilation unit of pc in mod, and the module's bias. */
static Dwarf_Die *unit_die(Dwfl_Module *mod, uintptr_t pc, Dwarf_Addr *bias,
                           Dwarf_Die *die)
{
    Dwarf_Addr low = 0;
    dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL);
    Dwarf *dw = dwfl_module_getdwarf(mod, bias);
    const struct unit_dir *d = dw ? dir_of(dw, (uintptr_t)low) : NULL;
    Dwarf_Die *found = d ? dir_lookup(dw, d, pc - *bias, die) : NULL;
    return found ? found : dwfl_module_addrdie(mod, pc, bias);
}

size_t symdw_chain(Dwfl_Module *mod, uintptr_t pc, symdw_frame *frames,
                   size_t max, const symdw_unit **unitp, Dwarf_Addr *bias)
{
    *bias = 0;
    Dwarf_Die die;
    Dwarf_Die *cudie = unit_die(mod, pc, bias, &die);
    const unit *u = cudie ? unit_of(mod, cudie, *bias) : NULL;
    *unitp = u;
    return u ? chain_in(u, pc - *bias, frames, max) : 0;
}

static int by_range_start(const void *a, const void *b)
{
    const struct unit_range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

size_t symdw_chain_decoded(uintptr_t pc, symdw_frame *frames, size_t max,
                           const symdw_unit **unitp, Dwarf_Addr *bias)
{
    if (!U.ranges_sorted && U.nranges > 0) { /* qsort(NULL, 0): UB */
        qsort(U.ranges, U.nranges, sizeof *U.ranges, by_range_start);
        U.ranges_sorted = true;
    }
    size_t lo =
        starting_at_or_below(U.ranges, U.nranges, sizeof *U.ranges, pc);
    const struct unit_range *r = lo > 0 ? &U.ranges[lo - 1] : NULL;
    *unitp = r && pc < r->hi ? r->u : NULL;
    *bias = *unitp ? (*unitp)->bias : 0;
    return *unitp ? chain_in(*unitp, pc - *bias, frames, max) : 0;
}

const char *symdw_comp_dir(const symdw_unit *u)
{
    return u->comp_dir == NO_NAME ? NULL : u->names + u->comp_dir;
}

const char *symdw_file(const symdw_unit *u, int64_t idx)
{
    return u->lines ? symln_file(u->lines, idx) : NULL;
}

int symdw_line(const symdw_unit *u, Dwarf_Addr addr, const char **file,
               int64_t *line)
{
    return u->lines ? symln_lookup(u->lines, addr, file, line) : -1;
}
