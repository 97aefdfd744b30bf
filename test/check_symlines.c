/*
 * check_symlines.c -- cpprof's line-table decoder (symbolize_lines.c)
 * against libdw's own, dwarf_getsrclines(), on real objects, and on
 * malformed copies of a real table.
 *
 * Usage: check_symlines [OBJECT...]
 * Without arguments: this program itself (gcc's DWARF 5) and the C
 * library's separate debug file, found by libdwfl through its build id
 * (compressed sections, which libdw inflates); test/symbolize_addr2line.sh
 * adds its generated objects (DWARF 4, compressed, debuglink).  For every
 * unit: each file of libdw's file table must be the same name, and at
 * each row's address, one byte before and one after, the file and line
 * must be what dwarf_getsrc_die() answers.  Then the first unit's table
 * is decoded from copies cut short at every length and with bytes
 * changed at random, each copy in a buffer of exactly its size (so that
 * a sanitizer build sees any read past it): every one must be refused or
 * decoded, never crash, and the known malformations must be refused.
 */
#define _GNU_SOURCE
#include "symbolize_lines.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            if (failures++ < 20) {                                             \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);           \
                fprintf(stderr, __VA_ARGS__);                                  \
                fputc('\n', stderr);                                           \
            }                                                                  \
        }                                                                      \
    } while (0)

struct totals {
    size_t units, rows, addresses, files;
};

static bool same_string(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* libdw's answer at addr: file and line, or none. */
static bool libdw_line_at(Dwarf_Die *cudie, Dwarf_Addr addr, const char **file,
                          int64_t *line)
{
    Dwarf_Line *l = dwarf_getsrc_die(cudie, addr);
    int lineno;
    if (!l || dwarf_lineno(l, &lineno) != 0)
        return false;
    *file = dwarf_linesrc(l, NULL, NULL);
    *line = lineno;
    return true;
}

static void compare_at(const char *what, Dwarf_Die *cudie,
                       const symln_table *t, Dwarf_Addr addr,
                       struct totals *sum)
{
    const char *want_file = NULL, *got_file = NULL;
    int64_t want_line = 0, got_line = 0;
    bool want = libdw_line_at(cudie, addr, &want_file, &want_line);
    bool got = symln_lookup(t, addr, &got_file, &got_line) == 0;
    sum->addresses++;
    CHECK(want == got && (!want || (same_string(want_file, got_file) &&
                                    want_line == got_line)),
          "%s, unit 0x%llx, address 0x%llx: libdw %s:%lld, cpprof %s:%lld",
          what, (unsigned long long)dwarf_dieoffset(cudie),
          (unsigned long long)addr, want ? want_file : "(none)",
          (long long)want_line, got ? got_file : "(none)",
          (long long)got_line);
}

/* One unit: the file table, then every row's address and its neighbours. */
static void compare_unit(const char *what, Dwarf_Die *cudie,
                         const symln_sections *sec, struct totals *sum)
{
    Dwarf_Attribute attr;
    Dwarf_Word offset;
    Dwarf_Die cu;
    uint8_t address_size;
    Dwarf_Lines *lines;
    Dwarf_Files *files;
    size_t nlines, nfiles;
    if (dwarf_formudata(dwarf_attr(cudie, DW_AT_stmt_list, &attr), &offset) !=
            0 ||
        dwarf_getsrclines(cudie, &lines, &nlines) != 0 ||
        dwarf_getsrcfiles(cudie, &files, &nfiles) != 0 ||
        !dwarf_diecu(cudie, &cu, &address_size, NULL))
        return; /* no line table, or one libdw refuses */
    const char *comp_dir =
        dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &attr));
    symln_table *t = NULL;
    int rc = symln_decode(sec, offset, address_size, comp_dir, &t);
    CHECK(rc == 0, "%s, unit 0x%llx: refused (%d) a table libdw reads", what,
          (unsigned long long)dwarf_dieoffset(cudie), rc);
    if (rc != 0)
        return;
    sum->units++;
    for (size_t i = 0; i <= nfiles; i++, sum->files++) {
        const char *want = i < nfiles ? dwarf_filesrc(files, i, NULL, NULL)
                                      : NULL;
        CHECK(same_string(want, symln_file(t, (int64_t)i)),
              "%s, unit 0x%llx, file %zu: libdw %s, cpprof %s", what,
              (unsigned long long)dwarf_dieoffset(cudie), i,
              want ? want : "(none)",
              symln_file(t, (int64_t)i) ? symln_file(t, (int64_t)i)
                                        : "(none)");
    }
    for (size_t i = 0; i < nlines; i++) {
        Dwarf_Addr addr;
        if (dwarf_lineaddr(dwarf_onesrcline(lines, i), &addr) != 0)
            continue;
        sum->rows++;
        compare_at(what, cudie, t, addr, sum);
        compare_at(what, cudie, t, addr + 1, sum);
        if (addr > 0)
            compare_at(what, cudie, t, addr - 1, sum);
    }
    CHECK(symln_rows(t) <= nlines, "%s: more rows kept than libdw has", what);
    symln_free(t);
}

static void compare_dwarf(const char *what, Dwarf *dw)
{
    symln_sections sec;
    CHECK(symln_sections_of(dw, &sec) == 0, "%s: no .debug_line found", what);
    struct totals sum = {0};
    Dwarf_Off off = 0, next;
    size_t header;
    while (dwarf_nextcu(dw, off, &next, &header, NULL, NULL, NULL) == 0) {
        Dwarf_Die cudie;
        if (dwarf_offdie(dw, off + header, &cudie))
            compare_unit(what, &cudie, &sec, &sum);
        off = next;
    }
    printf("%s: %zu units, %zu rows, %zu files, %zu addresses compared\n",
           what, sum.units, sum.rows, sum.files, sum.addresses);
    CHECK(sum.units > 0 && sum.addresses > 100,
          "%s: too little compared to mean anything", what);
}

static void compare_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    Dwarf *dw = fd >= 0 ? dwarf_begin(fd, DWARF_C_READ) : NULL;
    CHECK(dw, "%s: cannot read its DWARF", path);
    if (dw) {
        compare_dwarf(path, dw);
        dwarf_end(dw);
    }
    if (fd >= 0)
        close(fd);
}

/* The C library's DWARF, as the symbolizer finds it: its debug file by
 * build id. */
static void compare_libc(void)
{
    static char *debuginfo_path;
    static const Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .debuginfo_path = &debuginfo_path,
    };
    Dwfl *dwfl = dwfl_begin(&callbacks);
    dwfl_report_begin(dwfl);
    dwfl_linux_proc_report(dwfl, getpid());
    dwfl_report_end(dwfl, NULL, NULL);
    Dwfl_Module *mod =
        dwfl_addrmodule(dwfl, (Dwarf_Addr)(uintptr_t)&gnu_get_libc_version);
    Dwarf_Addr bias;
    Dwarf *dw = mod ? dwfl_module_getdwarf(mod, &bias) : NULL;
    if (dw)
        compare_dwarf("the C library's debug file", dw);
    else
        printf("the C library has no debug file here (libc6-dbg): skipped\n");
    dwfl_end(dwfl);
}

/* ---- Malformed tables --------------------------------------------------- */

/* A copy of n bytes in a buffer of exactly that size. */
static unsigned char *exact_copy(const unsigned char *p, size_t n)
{
    unsigned char *c = malloc(n ? n : 1);
    if (c && n)
        memcpy(c, p, n);
    return c;
}

/* Decodes line[0..n) (a unit's table, at offset 0) and looks up a few
 * addresses when it is taken.  Returns symln_decode's code. */
static int decode_copy(const unsigned char *line, size_t n,
                       const symln_sections *orig)
{
    symln_sections sec = *orig;
    sec.line = exact_copy(line, n);
    sec.line_size = n;
    symln_table *t = NULL;
    int rc = symln_decode(&sec, 0, 8, "/comp/dir", &t);
    if (rc == 0) {
        const char *file;
        int64_t lineno;
        for (uint64_t a = 0; a < 4096; a += 61)
            symln_lookup(t, a, &file, &lineno);
        for (int64_t i = -1; i < 8; i++)
            symln_file(t, i);
        symln_free(t);
    }
    free((void *)sec.line);
    return rc;
}

static void put32(unsigned char *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static void malformed(Dwarf *dw)
{
    symln_sections sec;
    if (symln_sections_of(dw, &sec) != 0)
        return;
    /* the first unit's table: its length from its first 4 bytes */
    uint32_t length;
    memcpy(&length, sec.line, 4);
    size_t n = (size_t)length + 4;
    CHECK(length < 0xfffffff0 && n <= sec.line_size,
          "the first table's length");
    if (n > sec.line_size)
        return;
    /* the string sections in exact copies too */
    sec.line_str = exact_copy(sec.line_str, sec.line_str_size);
    sec.str = exact_copy(sec.str, sec.str_size);
    CHECK(decode_copy(sec.line, n, &sec) == 0, "the intact table refused");

    size_t refused = 0, cuts = 0;
    for (size_t len = 0; len < n; len += len < 512 ? 1 : n / 512 + 1, cuts++)
        refused += decode_copy(sec.line, len, &sec) == -EINVAL;
    CHECK(refused == cuts, "%zu of %zu tables cut short taken", cuts - refused,
          cuts);

    unsigned char *bad = exact_copy(sec.line, n);
    uint64_t seed = 19;
    size_t taken = 0, rounds = 3000;
    for (size_t round = 0; round < rounds; round++) {
        memcpy(bad, sec.line, n);
        for (int k = 0; k < 1 + (int)(round % 8); k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            /* mostly the header (the first 256 bytes), where the lengths
             * and forms are */
            size_t at = (seed >> 33) % (round % 2 ? n : (n < 256 ? n : 256));
            bad[at] = (unsigned char)(seed >> 17);
        }
        taken += decode_copy(bad, n, &sec) == 0;
    }
    printf("malformed: %zu cut short, all refused; %zu changed at random, "
           "%zu of them still decodable, none crashed\n",
           cuts, rounds, taken);

    /* Known malformations, each refused. */
    memcpy(bad, sec.line, n);
    put32(bad, (uint32_t)n); /* longer than the section */
    CHECK(decode_copy(bad, n, &sec) == -EINVAL, "overlong unit taken");
    memcpy(bad, sec.line, n);
    bad[4] = 1; /* version 1 */
    bad[5] = 0;
    CHECK(decode_copy(bad, n, &sec) == -EINVAL, "version 1 taken");
    memcpy(bad, sec.line, n);
    put32(bad + 4 + 2 + (bad[4] >= 5 ? 2 : 0), (uint32_t)n); /* header_length */
    CHECK(decode_copy(bad, n, &sec) == -EINVAL, "overlong header taken");
    free(bad);
    free((void *)sec.line_str);
    free((void *)sec.str);
}

static void malformed_self(void)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    Dwarf *dw = fd >= 0 ? dwarf_begin(fd, DWARF_C_READ) : NULL;
    CHECK(dw, "cannot read this program's DWARF");
    if (dw) {
        malformed(dw);
        dwarf_end(dw);
    }
    if (fd >= 0)
        close(fd);
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            compare_file(argv[i]);
    } else {
        compare_file("/proc/self/exe");
        compare_libc();
        malformed_self();
    }
    if (failures)
        fprintf(stderr, "%d failures\n", failures);
    return failures ? 1 : 0;
}
