/*
 * symbolize_symtab.c -- symbols by address from sorted per-module tables
 * (see symbolize_symtab.h for why).
 *
 * Shape: per module, one array of the defined function and data symbols
 * (process address, size, binding rank, name), sorted by address, built
 * from dwfl_module_getsym_info() on the module's first lookup.  An address
 * takes the last symbol starting at or below it; among symbols starting at
 * the same address a global one wins over a weak one over a local one, as
 * in libdwfl.  A sized symbol must hold the address; one without a size
 * is taken as reaching the next symbol (hand-written assembly often has
 * no sizes), as libdwfl does.  The names are copied into one block per
 * table, so that a table outlives libdw's state (symbolize.c closes it
 * after every session); tables are found again by the module's load
 * address, which stays the same while the mappings do (symst_flush()
 * runs when they change).
 */
#define _GNU_SOURCE
#include "symbolize_symtab.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct sym {
    uintptr_t start, size;
    uint32_t name; /* offset in the table's names */
    int32_t rank;  /* 0 global, 1 weak, 2 local: lower wins */
};

struct table {
    uintptr_t module; /* the module's load address */
    struct sym *syms;
    size_t n;
    char *names;
};

static struct {
    struct table *tables; /* few modules: searched in order */
    size_t n, cap;
    size_t bytes;
} T;

static int binding_rank(const GElf_Sym *s)
{
    switch (GELF_ST_BIND(s->st_info)) {
    case STB_GLOBAL:
        return 0;
    case STB_WEAK:
        return 1;
    default:
        return 2;
    }
}

static bool names_code_or_data(const GElf_Sym *s, GElf_Word shndx)
{
    int type = GELF_ST_TYPE(s->st_info);
    return shndx != SHN_UNDEF &&
           (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_OBJECT ||
            type == STT_NOTYPE);
}

static int by_start_then_rank(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->rank - y->rank;
}

/* Copies the symbols' names into one block; false when out of memory
 * (or past 4 GiB of names). */
static bool copy_names(struct table *t, const char **libdw)
{
    size_t size = 0;
    for (size_t i = 0; i < t->n; i++)
        size += strlen(libdw[i]) + 1;
    t->names = size < UINT32_MAX ? malloc(size ? size : 1) : NULL;
    if (!t->names)
        return false;
    char *at = t->names;
    for (size_t i = 0; i < t->n; i++) {
        t->syms[i].name = (uint32_t)(at - t->names);
        at = stpcpy(at, libdw[i]) + 1;
    }
    T.bytes += size;
    return true;
}

/* The sorted symbols of mod; an empty table when it has none or memory
 * ran out (lookups then find nothing, as without a symbol table). */
static void build_table(struct table *t, Dwfl_Module *mod, uintptr_t module)
{
    *t = (struct table){.module = module};
    int count = dwfl_module_getsymtab(mod);
    t->syms = count > 0 ? malloc((size_t)count * sizeof *t->syms) : NULL;
    const char **libdw =
        count > 0 ? malloc((size_t)count * sizeof *libdw) : NULL;
    for (int i = 0; t->syms && libdw && i < count; i++) {
        GElf_Sym s;
        GElf_Addr addr;
        GElf_Word shndx;
        const char *name = dwfl_module_getsym_info(mod, i, &s, &addr, &shndx,
                                                   NULL, NULL);
        if (name && name[0] && names_code_or_data(&s, shndx)) {
            libdw[t->n] = name;
            t->syms[t->n++] = (struct sym){(uintptr_t)addr,
                                           (uintptr_t)s.st_size, 0,
                                           binding_rank(&s)};
        }
    }
    if (!libdw || !copy_names(t, libdw)) {
        free(t->syms);
        t->syms = NULL;
        t->n = 0;
    }
    free(libdw);
    if (t->n > 0) /* qsort(NULL, 0): UB */
        qsort(t->syms, t->n, sizeof *t->syms, by_start_then_rank);
    T.bytes += t->n * sizeof *t->syms;
}

static struct table *table_of(Dwfl_Module *mod)
{
    Dwarf_Addr low = 0;
    dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL);
    for (size_t i = 0; i < T.n; i++)
        if (T.tables[i].module == (uintptr_t)low)
            return &T.tables[i];
    if (T.n == T.cap) {
        size_t ncap = T.cap ? 2 * T.cap : 16;
        struct table *grown = realloc(T.tables, ncap * sizeof *grown);
        if (!grown)
            return NULL;
        T.bytes += (ncap - T.cap) * sizeof *grown;
        T.tables = grown;
        T.cap = ncap;
    }
    build_table(&T.tables[T.n], mod, (uintptr_t)low);
    return &T.tables[T.n++];
}

/* The symbol of t holding pc, or NULL. */
static const char *search(const struct table *t, uintptr_t pc,
                          uintptr_t *offset)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) { /* first symbol starting above pc */
        size_t mid = lo + (hi - lo) / 2;
        if (t->syms[mid].start <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    size_t best = lo - 1;
    while (best > 0 && t->syms[best - 1].start == t->syms[best].start)
        best--; /* the best rank of those at the same address */
    const struct sym *s = &t->syms[best];
    if (s->size && pc - s->start >= s->size)
        return NULL;
    *offset = pc - s->start;
    return t->names + s->name;
}

const char *symst_lookup(Dwfl_Module *mod, uintptr_t pc, uintptr_t *offset)
{
    const struct table *t = table_of(mod);
    return t ? search(t, pc, offset) : NULL;
}

int symst_lookup_built(uintptr_t module, uintptr_t pc, const char **name,
                       uintptr_t *offset)
{
    for (size_t i = 0; i < T.n; i++)
        if (T.tables[i].module == module) {
            *name = search(&T.tables[i], pc, offset);
            return 0;
        }
    return -1;
}

size_t symst_bytes(void)
{
    return T.bytes;
}

void symst_flush(void)
{
    for (size_t i = 0; i < T.n; i++) {
        free(T.tables[i].syms);
        free(T.tables[i].names);
    }
    free(T.tables);
    T.tables = NULL;
    T.n = T.cap = T.bytes = 0;
}
