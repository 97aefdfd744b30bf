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
 * binary search and a short walk up; the unit's line table is decoded
 * at the same time into compact rows (symbolize_lines.h), which replace
 * libdw's.  A decoded unit owns all it answers with (names, files), so
 * that libdw may be closed between sessions.  Units no lookup touched
 * cost nothing.  Not thread-safe: used under the symbolizer's lock.
 */
#ifndef CPPROF_SYMBOLIZE_DWARF_H
#define CPPROF_SYMBOLIZE_DWARF_H

#include <elfutils/libdwfl.h>
#include <stddef.h>
#include <stdint.h>

/* A decoded compilation unit. */
typedef struct symdw_unit symdw_unit;

/* One function of the chain at an address. */
typedef struct {
    const char *system_name; /* from DWARF (the unit's copy), or NULL */
    int64_t start_line;      /* declaration line, or 0 */
    /* For every frame but the innermost: where it calls the next inner
     * one (index into the unit's file table, or -1; and the line, or 0). */
    int64_t call_file, call_line;
} symdw_frame;

/* The chain at pc (an address of the process) in mod, innermost first,
 * the last the subprogram holding it; at most max frames (the innermost
 * kept).  *unit is the compilation unit, for its file and line tables,
 * or NULL when mod has no DWARF for pc (or memory ran out); *bias what to
 * subtract from pc to get the unit's addresses.  Returns the number of
 * frames (0 when no function covers pc).  Strings stay valid until
 * symdw_flush(). */
size_t symdw_chain(Dwfl_Module *mod, uintptr_t pc, symdw_frame *frames,
                   size_t max, const symdw_unit **unit, Dwarf_Addr *bias);

/* The same without libdw, from the units already decoded: *unit NULL when
 * pc is in none of them (libdw must then be asked: the unit may not be
 * decoded yet). */
size_t symdw_chain_decoded(uintptr_t pc, symdw_frame *frames, size_t max,
                           const symdw_unit **unit, Dwarf_Addr *bias);

/* The unit's compilation directory, or NULL. */
const char *symdw_comp_dir(const symdw_unit *u);

/* Entry idx of the unit's file table (joined with its directory as libdw
 * joins it, not yet made absolute), or NULL. */
const char *symdw_file(const symdw_unit *u, int64_t idx);

/* The file (as symdw_file) and line at addr (the unit's addresses), as
 * libdw's line table says.  0, or -1 when no row holds addr. */
int symdw_line(const symdw_unit *u, Dwarf_Addr addr, const char **file,
               int64_t *line);

/* Bytes the decoded units hold. */
size_t symdw_bytes(void);

/* Forgets every decoded unit, whose strings results may point to: with
 * the results, and when the modules change. */
void symdw_flush(void);

#endif
