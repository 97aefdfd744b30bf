/*
 * symbolize_dwarf.h -- the inline chain at an address, from compact
 * per-compilation-unit tables (symbolize_dwarf.c), for symbolize.c.
 *
 * libdw's own answer (dwarf_getscopes, then dwarf_getscopes_die for the
 * callers of an inlined function) walks the whole compilation unit for
 * every address: milliseconds per address in template-heavy C++.  Here
 * each compilation unit a lookup touches is walked once, into sorted
 * arrays of the address ranges of its functions (subprograms and inlined
 * subroutines) with their callers, so that every further address is a
 * binary search and a short walk up.  Units no lookup touched cost
 * nothing.  Not thread-safe: used under the symbolizer's lock.
 */
#ifndef CPPROF_SYMBOLIZE_DWARF_H
#define CPPROF_SYMBOLIZE_DWARF_H

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

/* One function of the chain at an address. */
typedef struct {
    const char *system_name; /* from DWARF (libdw's string), or NULL */
    int64_t start_line;      /* declaration line, or 0 */
    /* For every frame but the innermost: where it calls the next inner
     * one (index into the unit's file table, or -1; and the line, or 0). */
    int64_t call_file, call_line;
} symdw_frame;

/* The chain at pc (an address of the process) in mod, innermost first,
 * the last the subprogram holding it; at most max frames (the innermost
 * kept).  *cudie is the compilation unit's DIE, for its file and line
 * tables, or NULL when mod has no DWARF for pc; *bias what to subtract
 * from pc to get the unit's addresses.  Returns the number of frames (0
 * when no function covers pc). */
size_t symdw_chain(Dwfl_Module *mod, uintptr_t pc, symdw_frame *frames,
                   size_t max, Dwarf_Die **cudie, Dwarf_Addr *bias);

/* Bytes the decoded units hold. */
size_t symdw_bytes(void);

/* Forgets every decoded unit: before the modules they describe go. */
void symdw_flush(void);

#endif
