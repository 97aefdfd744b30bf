/*
 * symbolize_lines.h -- a compilation unit's line table, decoded from
 * .debug_line into compact rows (symbolize_lines.c), for
 * symbolize_dwarf.c.
 *
 * libdw's dwarf_getsrclines() keeps every row of a unit's table (about 100
 * bytes each, with the heap they fragment) for as long as the Dwarf lives:
 * 28 MB for a template-heavy C++ unit, 123 MB for a C unit of 30,000
 * functions.  Lookups need only, per address, the row that answers it:
 * here each row is 12 bytes (address offset, line, file), rows at the same
 * address are kept once (the one libdw's dwarf_getsrc_die would answer),
 * and the file table is copied, so that the table outlives libdw's state.
 * Pure functions of the bytes given: every read is bounds-checked, and
 * malformed input is refused, never followed.
 */
#ifndef CPPROF_SYMBOLIZE_LINES_H
#define CPPROF_SYMBOLIZE_LINES_H

#include <elfutils/libdw.h>
#include <stddef.h>
#include <stdint.h>

/* The sections a line table refers to (data as libdw holds it: inflated
 * when the file has them compressed); a missing one is {NULL, 0}. */
typedef struct {
    const unsigned char *line, *line_str, *str;
    size_t line_size, line_str_size, str_size;
} symln_sections;

typedef struct symln_table symln_table;

/* The sections of dw, as libdw has loaded them.  0, or -ENOENT when dw
 * has no .debug_line (or it is still compressed). */
int symln_sections_of(Dwarf *dw, symln_sections *out);

/* Decodes the line table at offset in sec->line, for a unit with
 * addresses of address_size bytes and compilation directory comp_dir
 * (NULL: unknown; DWARF 2-4 name directory 0 so).  0 and *out, or
 * -EINVAL (malformed or unsupported: nothing kept), -ENOMEM. */
int symln_decode(const symln_sections *sec, uint64_t offset,
                 unsigned address_size, const char *comp_dir,
                 symln_table **out);

/* The file and line at addr (the unit's addresses), as libdw's
 * dwarf_getsrc_die() and dwarf_linesrc() would answer: file is the file
 * table's name (joined with its directory when relative), NULL when the
 * row names no file of the table.  0 when a row holds addr, -1 when none. */
int symln_lookup(const symln_table *t, uint64_t addr, const char **file,
                 int64_t *line);

/* Entry idx of the file table (as dwarf_filesrc), or NULL. */
const char *symln_file(const symln_table *t, int64_t idx);

/* Rows kept, and bytes held. */
size_t symln_rows(const symln_table *t);
size_t symln_bytes(const symln_table *t);

void symln_free(symln_table *t);

#endif
