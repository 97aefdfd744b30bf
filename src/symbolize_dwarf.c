/*
 * symbolize_dwarf.c -- inline chains from compact per-compilation-unit
 * tables (see symbolize_dwarf.h for why).
 *
 * Shape: libdwfl finds the compilation unit of an address (its own index,
 * from .debug_aranges or one pass over the units' ranges).  The first
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
 * Units are found again through the address of libdwfl's DIE for them,
 * which stays put while the module is reported; symdw_flush() must run
 * before the modules are reported again.
 */
#define _GNU_SOURCE
#include "symbolize_dwarf.h"

#include <dwarf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* DIE nesting deeper than this is not walked (code is never that deep;
 * the bound keeps a malformed file from exhausting the stack). */
#define MAX_DIE_DEPTH 128

struct fn {
    const char *name;
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
    Dwarf_Addr lo, hi;
    uint32_t fn, depth;
};

struct unit {
    Dwarf_Die *cudie;
    struct fn *fns;
    struct span *spans;
    struct range *ranges;
    size_t nfns, nspans, capfns, capspans;
};

static struct {
    struct unit **slots; /* open addressing on cudie; NULL is empty */
    size_t nslots, nunits;
    size_t bytes;
} U;

/* ---- Decoding a unit ---------------------------------------------------- */

static bool grow(void **array, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap ? 2 * *cap : 64;
    void *grown = realloc(*array, ncap * size);
    if (!grown)
        return false;
    *array = grown;
    *cap = ncap;
    return true;
}

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
static int32_t add_function(struct unit *u, Dwarf_Die *die, int32_t parent)
{
    size_t first = u->nspans;
    Dwarf_Addr base, lo, hi;
    ptrdiff_t off = 0;
    while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
        if (lo >= hi)
            continue;
        if (!grow((void **)&u->spans, &u->capspans, u->nspans,
                  sizeof *u->spans))
            return -2;
        u->spans[u->nspans++] = (struct span){lo, hi};
    }
    if (u->nspans == first)
        return -1;
    if (u->nfns >= INT32_MAX ||
        !grow((void **)&u->fns, &u->capfns, u->nfns, sizeof *u->fns))
        return -2;
    int decl_line = 0;
    dwarf_decl_line(die, &decl_line);
    bool inlined = dwarf_tag(die) == DW_TAG_inlined_subroutine;
    u->fns[u->nfns] = (struct fn){
        .name = die_name(die),
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
static int decode_children(struct unit *u, Dwarf_Die *die, int32_t parent,
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
static int sort_ranges(struct unit *u)
{
    u->ranges = malloc((u->nspans ? u->nspans : 1) * sizeof *u->ranges);
    if (!u->ranges)
        return -1;
    for (size_t f = 0; f < u->nfns; f++)
        for (uint32_t s = 0; s < u->fns[f].nspans; s++) {
            const struct span *sp = &u->spans[u->fns[f].first_span + s];
            u->ranges[u->fns[f].first_span + s] = (struct range){
                sp->lo, sp->hi, (uint32_t)f, u->fns[f].depth};
        }
    qsort(u->ranges, u->nspans, sizeof *u->ranges, by_start_outer_first);
    return 0;
}

static void free_unit(struct unit *u)
{
    if (!u)
        return;
    free(u->fns);
    free(u->spans);
    free(u->ranges);
    free(u);
}

static size_t unit_bytes(const struct unit *u)
{
    return sizeof *u + u->capfns * sizeof *u->fns +
           u->capspans * sizeof *u->spans + u->nspans * sizeof *u->ranges;
}

static struct unit *decode_unit(Dwarf_Die *cudie)
{
    struct unit *u = calloc(1, sizeof *u);
    if (!u)
        return NULL;
    u->cudie = cudie;
    if (decode_children(u, cudie, -1, 0) != 0 || sort_ranges(u) != 0) {
        free_unit(u);
        return NULL;
    }
    return u;
}

/* ---- Units by DIE ------------------------------------------------------- */

static size_t slot_of(const Dwarf_Die *cudie, size_t nslots)
{
    return (size_t)(((uint64_t)(uintptr_t)cudie * 0x9E3779B97F4A7C15ull) >>
                    17) &
           (nslots - 1);
}

static struct unit **unit_slot(Dwarf_Die *cudie)
{
    for (size_t i = slot_of(cudie, U.nslots);; i = (i + 1) & (U.nslots - 1))
        if (!U.slots[i] || U.slots[i]->cudie == cudie)
            return &U.slots[i];
}

static int grow_units(void)
{
    size_t nslots = U.nslots ? 2 * U.nslots : 64;
    struct unit **slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return -1;
    for (size_t i = 0; i < U.nslots; i++) {
        if (!U.slots[i])
            continue;
        size_t j = slot_of(U.slots[i]->cudie, nslots);
        while (slots[j])
            j = (j + 1) & (nslots - 1);
        slots[j] = U.slots[i];
    }
    free(U.slots);
    U.bytes += (nslots - U.nslots) * sizeof *slots;
    U.slots = slots;
    U.nslots = nslots;
    return 0;
}

/* The decoded unit of cudie, decoding it on first use; NULL when out of
 * memory. */
static struct unit *unit_of(Dwarf_Die *cudie)
{
    if (2 * (U.nunits + 1) > U.nslots && grow_units() != 0)
        return NULL;
    struct unit **slot = unit_slot(cudie);
    if (!*slot) {
        *slot = decode_unit(cudie);
        if (!*slot)
            return NULL;
        U.nunits++;
        U.bytes += unit_bytes(*slot);
    }
    return *slot;
}

void symdw_flush(void)
{
    for (size_t i = 0; i < U.nslots; i++)
        free_unit(U.slots[i]);
    free(U.slots);
    U.slots = NULL;
    U.nslots = U.nunits = U.bytes = 0;
}

size_t symdw_bytes(void)
{
    return U.bytes;
}

/* ---- Lookup ------------------------------------------------------------- */

static bool fn_covers(const struct unit *u, int32_t f, Dwarf_Addr a)
{
    const struct span *sp = &u->spans[u->fns[f].first_span];
    for (uint32_t i = 0; i < u->fns[f].nspans; i++)
        if (sp[i].lo <= a && a < sp[i].hi)
            return true;
    return false;
}

/* Index of the last range starting at or below a, or -1. */
static ptrdiff_t last_range_at_or_below(const struct unit *u, Dwarf_Addr a)
{
    size_t lo = 0, hi = u->nspans;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->ranges[mid].lo <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (ptrdiff_t)lo - 1;
}

/* The innermost function holding a, or -1. */
static int32_t innermost_at(const struct unit *u, Dwarf_Addr a)
{
    ptrdiff_t k = last_range_at_or_below(u, a);
    int32_t f = k >= 0 ? (int32_t)u->ranges[k].fn : -1;
    while (f >= 0 && !fn_covers(u, f, a))
        f = u->fns[f].parent;
    return f;
}

size_t symdw_chain(Dwfl_Module *mod, uintptr_t pc, symdw_frame *frames,
                   size_t max, Dwarf_Die **cudie, Dwarf_Addr *bias)
{
    *bias = 0;
    *cudie = dwfl_module_addrdie(mod, pc, bias);
    struct unit *u = *cudie ? unit_of(*cudie) : NULL;
    size_t n = 0;
    int32_t inner = -1;
    for (int32_t f = u ? innermost_at(u, pc - *bias) : -1; f >= 0 && n < max;
         f = u->fns[f].parent) {
        const struct fn *fn = &u->fns[f];
        frames[n++] = (symdw_frame){
            .system_name = fn->name,
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
