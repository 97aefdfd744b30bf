/*
 * upper_check.c -- libcpprof-upper.so is checked before it is mapped: a
 * file cut short or of another build is refused with the reason, not
 * loaded.  In libcpprof.so only, for upper.c.
 *
 * The upper object is loaded at the first call that needs it, which may
 * come days after the program started.  A file mapped where the loader
 * expects bytes beyond its end faults with SIGBUS at the first touch (the
 * relocations, in dlopen), so a copy cut short, or one being rewritten in
 * place (a package upgrade that does not rename its files, an unfinished
 * copy), killed the program at that call.  So the file is opened once and
 * read with pread, which fails where mmap faults: its ELF header, its
 * program headers, and its notes.  It must hold every byte the loader maps
 * (each PT_LOAD segment's file part) and its section header table, which
 * the linker writes last, so that a file cut anywhere is seen; and it must
 * record, in a note of its own (object_entry.c, written at build
 * time), the build ID of the libcpprof.so it was linked against, which
 * must be this libcpprof.so's: a complete file of another build (the same
 * version rebuilt, half of an upgrade) is refused too, as one of another
 * version already was.  Notes survive stripping, which sizes do not.
 *
 * dlopen is then given the path, and the object it mapped is used only
 * if the path still names the file checked (upper_is_checked_file): one
 * renamed over it meanwhile (an upgrade) was not checked.  Handing dlopen
 * /proc/self/fd/N of the checked descriptor instead would map exactly
 * that file, but the loader keeps that string as the object's name: a
 * debugger, a sanitizer's symbolizer (another process) and the crash
 * tools could not find the file by it, and a later dlopen of the same
 * string by the program (a plugin loaded from a memfd, once N is reused)
 * would be handed cpprof's object, since the loader matches loaded
 * objects by name first.  Left open: a file cut short in place between
 * the check and the mapping (microseconds), or after it while it is
 * mapped: it faults as before (docs/limits.md).
 */
#define _GNU_SOURCE
#include "upper.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if __SIZEOF_POINTER__ == 8
#define ELFCLASS_OWN ELFCLASS64
#else
#define ELFCLASS_OWN ELFCLASS32
#endif

/* More program headers than a linker writes, or notes longer than ours
 * and the toolchain's: not an upper object. */
#define PHDRS_MAX 32
#define NOTES_MAX 4096

/* The descriptor of the note `name`/`type` among the notes in [p,
 * p + len), laid out with alignment `align`; its size in *size. */
static const unsigned char *find_note(const unsigned char *p, size_t len,
                                      size_t align, const char *name,
                                      uint32_t type, size_t *size)
{
    size_t name_size = strlen(name) + 1;
    while (len >= sizeof(ElfW(Nhdr))) {
        ElfW(Nhdr) h;
        memcpy(&h, p, sizeof h);
        size_t desc_at = sizeof h + ((h.n_namesz + align - 1) & ~(align - 1));
        size_t desc_len = (h.n_descsz + align - 1) & ~(align - 1);
        if (desc_at > len || desc_len > len - desc_at)
            return NULL;
        if (h.n_type == type && h.n_namesz == name_size &&
            memcmp(p + sizeof h, name, name_size) == 0) {
            *size = h.n_descsz;
            return p + desc_at;
        }
        p += desc_at + desc_len;
        len -= desc_at + desc_len;
    }
    return NULL;
}

static size_t note_align(const ElfW(Phdr) *ph)
{
    return ph->p_align == 8 ? 8 : 4;
}

/* This libcpprof.so's build ID in hex, read from its notes in memory;
 * "" when it has none (then the upper object records none either). */
static int own_build_id(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    uintptr_t self = (uintptr_t)own_build_id;
    const ElfW(Phdr) *load = NULL;
    for (int i = 0; i < info->dlpi_phnum && !load; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && lo <= self && self < lo + ph->p_memsz)
            load = ph;
    }
    if (!load)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        size_t n;
        const unsigned char *id =
            ph->p_type != PT_NOTE
                ? NULL
                : find_note((const void *)(info->dlpi_addr + ph->p_vaddr),
                            ph->p_memsz, note_align(ph), "GNU",
                            NT_GNU_BUILD_ID, &n);
        for (size_t j = 0; id && j < n && j < UPPER_BUILD_ID_MAX; j++)
            sprintf((char *)out + 2 * j, "%02x", id[j]);
        if (id)
            break;
    }
    return 1;
}

static bool read_at(int fd, void *buf, size_t n, uint64_t at)
{
    return pread(fd, buf, n, (off_t)at) == (ssize_t)n;
}

/* What the file on fd needs past its program headers: every PT_LOAD
 * segment's file part and the section header table. */
static uint64_t bytes_needed(const ElfW(Ehdr) *eh, const ElfW(Phdr) *ph)
{
    uint64_t need = eh->e_shoff + (uint64_t)eh->e_shnum * eh->e_shentsize;
    for (int i = 0; i < eh->e_phnum; i++) {
        uint64_t end = ph[i].p_offset + ph[i].p_filesz;
        if (ph[i].p_type == PT_LOAD && end > need)
            need = end;
    }
    return need;
}

/* The build ID of the libcpprof.so the upper object was linked against
 * (its UPPER_NOTE_PAIR note), as text in out; false when it has none. */
static bool recorded_pair(int fd, const ElfW(Ehdr) *eh, const ElfW(Phdr) *ph,
                          char *out, size_t size)
{
    /* Static, as check_file's headers: the check runs once (upper.c's
     * load_once), on a caller's thread whose stack may be 16 KiB. */
    static unsigned char notes[NOTES_MAX];
    for (int i = 0; i < eh->e_phnum; i++) {
        size_t n;
        if (ph[i].p_type != PT_NOTE || ph[i].p_filesz > sizeof notes ||
            !read_at(fd, notes, ph[i].p_filesz, ph[i].p_offset))
            continue;
        const unsigned char *id =
            find_note(notes, ph[i].p_filesz, note_align(&ph[i]),
                      UPPER_NOTE_NAME, UPPER_NOTE_PAIR, &n);
        if (id) {
            snprintf(out, size, "%.*s", (int)n, (const char *)id);
            return true;
        }
    }
    return false;
}

/* Why the file on fd cannot be this libcpprof.so's upper object, as the
 * end of a sentence that begins with its path, in why; 0 when it can. */
static int check_file(int fd, char *why, size_t len)
{
    struct stat st;
    ElfW(Ehdr) eh;
    static ElfW(Phdr) ph[PHDRS_MAX]; /* runs once: recorded_pair says why */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, len, "is not a regular file");
        return -1;
    }
    if (!read_at(fd, &eh, sizeof eh, 0)) {
        snprintf(why, len, "is cut short: %lld bytes", (long long)st.st_size);
        return -1;
    }
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS_OWN ||
        eh.e_phentsize != sizeof *ph || eh.e_phnum > PHDRS_MAX) {
        snprintf(why, len, "is not a shared object for this machine");
        return -1;
    }
    if (!read_at(fd, ph, eh.e_phnum * sizeof *ph, eh.e_phoff)) {
        snprintf(why, len, "is cut short: %lld bytes, without its program "
                           "headers", (long long)st.st_size);
        return -1;
    }
    uint64_t need = bytes_needed(&eh, ph);
    if ((uint64_t)st.st_size < need) {
        snprintf(why, len, "is cut short: %lld of its %llu bytes (a copy "
                           "or an upgrade not finished?)",
                 (long long)st.st_size, (unsigned long long)need);
        return -1;
    }
    char own[2 * UPPER_BUILD_ID_MAX + 1] = "", pair[sizeof own];
    dl_iterate_phdr(own_build_id, own);
    if (!recorded_pair(fd, &eh, ph, pair, sizeof pair)) {
        snprintf(why, len, "records no libcpprof.so it was built with: not "
                           "of this cpprof (%s)", UPPER_VERSION);
        return -1;
    }
    if (strcmp(pair, own) != 0) {
        snprintf(why, len, "was built with another libcpprof.so (build ID "
                           "%s; this one's is %s)",
                 pair[0] ? pair : "none", own[0] ? own : "none");
        return -1;
    }
    return 0;
}

int upper_open_checked(const char *path, char *why, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, len, "cannot be opened: %m");
        return -1;
    }
    if (check_file(fd, why, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool upper_is_checked_file(int fd, const char *path)
{
    struct stat checked, now;
    return fstat(fd, &checked) == 0 && stat(path, &now) == 0 &&
           checked.st_dev == now.st_dev && checked.st_ino == now.st_ino;
}
