/*
 * unwind_cfi.h -- DWARF call-frame information turned into compact unwind
 * rows (unwind_cfi.c): the unwinder's parse step, for the signal-safe
 * walker in unwind_walk.c.
 *
 * The build (cfi_build) parses one ELF image's .eh_frame (or .debug_frame
 * when that is all it has) and runs every FDE's CFA program ahead of time,
 * outside any signal handler, so that the walker only does a binary search
 * and applies a row.  A table is immutable once built; unwind_tables.c
 * owns its lifetime.  Only the rules the walker needs are kept: where the CFA is,
 * where the return address and the frame pointer were saved.
 */
#ifndef CPPROF_UNWIND_CFI_H
#define CPPROF_UNWIND_CFI_H

#include <stddef.h>
#include <stdint.h>

/* How the CFA is found (row.rules bits 0-2). */
enum {
    CFA_NONE = 0,     /* no CFI covers this address: frame pointers */
    CFA_SP = 1,       /* cfa = sp + cfa_off */
    CFA_FP = 2,       /* cfa = fp + cfa_off */
    CFA_PLT = 3,      /* x86-64 PLT entry: cfa = sp + cfa_off, plus 8 when
                         (pc & 15) >= fp_off (the expression gcc and ld emit) */
    CFA_SIGFRAME = 4, /* a sigreturn trampoline ('S' augmentation): the
                         interrupted registers are in the ucontext at sp */
    CFA_UNSUPPORTED = 5 /* any other rule: frame pointers, sample flagged */
};
/* Where the return address is (bits 3-4). */
enum {
    RA_AT = 0 << 3,        /* at cfa + 8 * ra_off8 */
    RA_UNDEFINED = 1 << 3, /* outermost frame: the walk ends cleanly */
    RA_SAME = 2 << 3,      /* still in the link register (AArch64 leaf) */
    RA_UNSUPPORTED = 3 << 3
};
/* Where the caller's frame pointer is (bits 5-6). */
enum {
    FP_SAME = 0 << 5, /* unchanged */
    FP_AT = 1 << 5,   /* at cfa + fp_off */
    FP_UNSUPPORTED = 2 << 5
};
#define CFI_CFA_MASK 7u
#define CFI_RA_MASK (3u << 3)
#define CFI_FP_MASK (3u << 5)
/* With RA_AT and FP_AT (bit 7): the return address is at cfa + fp_off + 8,
 * the frame record {x29, x30} of AArch64, and ra_off8 is unused.  AArch64
 * saves the record at the bottom of the frame, so in a frame over 1 KiB
 * the return address lies beyond ra_off8's reach (glibc's vfscanf:
 * cfa - 1832). */
#define CFI_RA_IN_RECORD (1u << 7)

/* One row: the rule from `start` (an address in the object's own ELF
 * address space) up to the next row's start.  12 bytes. */
struct cfi_row {
    uint32_t start;
    int32_t cfa_off;
    int16_t fp_off;
    int8_t ra_off8;
    uint8_t rules;
};

/* The rows are sorted by start; `page` narrows the binary search to the
 * rows of one slice of code: page[i] is the number of rows that start
 * below base + (i << shift).  A lookup then touches two or three cache
 * lines instead of 15 levels of rows (bench/unwind: 30 frames in about a
 * third of the time of 4 KiB slices).  Slices are 256 bytes, or larger
 * where that would give more slices than rows (code with sparse CFI). */
#define CFI_PAGE_SHIFT_MIN 8
struct cfi_table {
    size_t nrows;
    size_t bytes;      /* of the whole table, which is one private mapping */
    uint32_t base;     /* first row's start, slice-aligned down */
    uint32_t npages;   /* slices covered from base */
    unsigned shift;    /* log2 of the slice size */
    const uint32_t *page; /* npages + 1 row indexes, after the rows */
    struct cfi_row rows[];
};

/* What cfi_build found, for the caller's decisions and the bench. */
struct cfi_stats {
    size_t fdes;        /* FDEs parsed */
    size_t unsupported; /* rows whose CFA, RA or FP rule is unsupported */
    const char *source; /* ".eh_frame", ".debug_frame" or NULL (none) */
};

/* Builds the rows of the ELF image at [image, image + size) (a file mapped
 * whole, or an in-memory image such as the vDSO).  Returns 0 and *out
 * (malloc'd, free() it; NULL when the image has no CFI), or -ENOEXEC for
 * an image that is not a well-formed ELF of this architecture, -ENOMEM.
 * Never from a signal handler. */
int cfi_build(const void *image, size_t size, struct cfi_table **out,
              struct cfi_stats *stats);

void cfi_free(struct cfi_table *t);

/* SIGNAL-SAFE: the row covering `addr` (object address), or NULL. */
const struct cfi_row *cfi_find(const struct cfi_table *t, uint64_t addr);

#endif
