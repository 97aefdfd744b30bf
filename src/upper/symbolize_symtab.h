/*
 * symbolize_symtab.h -- the symbol-table symbol at an address, from a
 * sorted copy of each module's symbol table (symbolize_symtab.c), for
 * symbolize.c.
 *
 * libdwfl's dwfl_module_addrinfo() looks at every symbol of the module for
 * every address: half a millisecond per address in an object with 30,000
 * functions.  Here each module's symbols are sorted once, on the module's
 * first lookup, and every address is a binary search.  Not thread-safe:
 * used under the symbolizer's lock.
 */
#ifndef CPPROF_SYMBOLIZE_SYMTAB_H
#define CPPROF_SYMBOLIZE_SYMTAB_H

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

/* Name (the table's copy, valid until symst_flush()) of the symbol of mod
 * holding pc, with pc's offset from its start in *offset; NULL when there
 * is none. */
const char *symst_lookup(Dwfl_Module *mod, uintptr_t pc, uintptr_t *offset);

/* The same from a table already built, without libdw: the module by its
 * load address.  0 (*name NULL when no symbol holds pc), or -1 when the
 * module's table is not built. */
int symst_lookup_built(uintptr_t module, uintptr_t pc, const char **name,
                       uintptr_t *offset);

/* Bytes the sorted tables hold. */
size_t symst_bytes(void);

/* Forgets every table, whose names results may point to: with the
 * results, and when the modules change. */
void symst_flush(void);

#endif
