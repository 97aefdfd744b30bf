/*
 * symbolize_debuginfo.c -- debug files found on disk only, compressed
 * sections inflated into a memfd (see symbolize_debuginfo.h for why).
 *
 * Finding: the build id's file under /usr/lib/debug/.build-id/ (checked to
 * carry the same build id), then the .gnu_debuglink name in the places
 * GDB and libdwfl's default path (":.debug:/usr/lib/debug") look: beside
 * the object, in its .debug directory, and under /usr/lib/debug followed
 * by the object's directory.  A candidate that is the object itself is
 * skipped.  When the object has a build id libdwfl compares it with the
 * debug file's after we return; without one, the link's CRC of the whole
 * file is what says the file belongs to the object.  libdwfl also asks
 * this callback for a dwz alternate file, with the debug file's
 * .gnu_debugaltlink instead of the object's .gnu_debuglink: that lookup
 * is left to libdwfl's own build-id search (which never calls debuginfod).
 *
 * Inflating: a 64-bit ELF file of the host's byte order with SHF_COMPRESSED
 * (zlib) sections is copied into a memfd: the ELF header, program headers
 * and every other section at their offsets (so that notes found through
 * the program headers, the build id's, stay where they were), except code,
 * which libdw never reads; the compressed sections' bytes and code left
 * as holes (which cost nothing), each section inflated after
 * the file's end, and a section header table saying so after them.  The
 * inflating streams through 64 KiB buffers, taken from the heap (inside
 * cpprof's internal scope: cpprof's own memory) and never from the stack:
 * the thread that symbolizes may have a small one, and a 64 KiB frame
 * would jump its guard page into another thread's stack.
 * Anything unexpected (another
 * compression, a size that does not match) keeps the file as it is, for
 * libdw to inflate as it always did.  Copies are kept from one session to
 * the next while the symbolizer keeps its tables (below, "Copies kept").
 */
#define _GNU_SOURCE
#include "symbolize_debuginfo.h"
#include "config.h"

#include <elf.h>
#include <elfutils/libdwelf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK 65536

/* The streaming buffers of one inflated copy. */
struct chunks {
    unsigned char in[CHUNK], out[CHUNK];
};

/* ---- Inflated copies ---------------------------------------------------- */

static bool read_at(int fd, void *buf, size_t n, off_t off)
{
    return pread(fd, buf, n, off) == (ssize_t)n;
}

static bool write_at(int fd, const void *buf, size_t n, off_t off)
{
    return pwrite(fd, buf, n, off) == (ssize_t)n;
}

static bool copy_range(int from, int to, off_t off, uint64_t n,
                       unsigned char *buf)
{
    while (n > 0) {
        size_t part = n < CHUNK ? (size_t)n : CHUNK;
        if (!read_at(from, buf, part, off) || !write_at(to, buf, part, off))
            return false;
        off += (off_t)part;
        n -= part;
    }
    return true;
}

/* Inflates the zlib stream of n bytes at in_off of from into to at
 * out_off; true when it ends after exactly size bytes. */
static bool inflate_range(int from, off_t in_off, uint64_t n, int to,
                          off_t out_off, uint64_t size, struct chunks *c)
{
    unsigned char *in = c->in, *out = c->out;
    z_stream z = {0};
    if (inflateInit(&z) != Z_OK)
        return false;
    uint64_t written = 0;
    int rc = Z_OK;
    while (rc == Z_OK) {
        if (z.avail_in == 0 && n > 0) {
            size_t part = n < CHUNK ? (size_t)n : CHUNK;
            if (!read_at(from, in, part, in_off))
                break;
            in_off += (off_t)part;
            n -= part;
            z.next_in = in;
            z.avail_in = (uInt)part;
        }
        z.next_out = out;
        z.avail_out = CHUNK;
        rc = inflate(&z, Z_NO_FLUSH);
        size_t got = CHUNK - z.avail_out;
        if ((rc != Z_OK && rc != Z_STREAM_END) || written + got > size ||
            !write_at(to, out, got, out_off + (off_t)written))
            break;
        written += got;
        if (rc == Z_OK && got == 0 && z.avail_in == 0 && n == 0)
            break; /* the stream stops short */
    }
    inflateEnd(&z);
    return rc == Z_STREAM_END && written == size;
}

static bool host_elf64(const Elf64_Ehdr *e)
{
    return memcmp(e->e_ident, ELFMAG, SELFMAG) == 0 &&
           e->e_ident[EI_CLASS] == ELFCLASS64 &&
           e->e_ident[EI_DATA] ==
               (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB
                                                          : ELFDATA2MSB) &&
           e->e_shentsize == sizeof(Elf64_Shdr) && e->e_shnum > 0;
}

static bool within(uint64_t off, uint64_t n, uint64_t size)
{
    return off <= size && n <= size - off;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return a > 1 ? (v + a - 1) / a * a : v;
}

/* Writes into out the file from (size bytes, headers eh and sh) with its
 * compressed sections inflated, through c; false on anything unexpected. */
static bool write_inflated(int from, uint64_t size, Elf64_Ehdr *eh,
                           Elf64_Shdr *sh, int out, struct chunks *c)
{
    if (!copy_range(from, out, 0, sizeof *eh, c->in) ||
        (eh->e_phnum &&
         (!within(eh->e_phoff, (uint64_t)eh->e_phnum * eh->e_phentsize,
                  size) ||
          !copy_range(from, out, (off_t)eh->e_phoff,
                      (uint64_t)eh->e_phnum * eh->e_phentsize, c->in))))
        return false;
    uint64_t end = align_up(size, 4096);
    for (size_t i = 0; i < eh->e_shnum; i++) {
        Elf64_Shdr *s = &sh[i];
        if (s->sh_type == SHT_NOBITS || s->sh_size == 0 ||
            (s->sh_flags & SHF_EXECINSTR))
            continue; /* nothing there, or code: libdw never reads it */
        if (!within(s->sh_offset, s->sh_size, size))
            return false;
        if (!(s->sh_flags & SHF_COMPRESSED)) {
            if (!copy_range(from, out, (off_t)s->sh_offset, s->sh_size,
                            c->in))
                return false;
            continue;
        }
        Elf64_Chdr ch;
        if (s->sh_size < sizeof ch ||
            !read_at(from, &ch, sizeof ch, (off_t)s->sh_offset) ||
            ch.ch_type != ELFCOMPRESS_ZLIB || ch.ch_size > (1ull << 40))
            return false;
        end = align_up(end, ch.ch_addralign ? ch.ch_addralign : 1);
        if (!inflate_range(from, (off_t)(s->sh_offset + sizeof ch),
                           s->sh_size - sizeof ch, out, (off_t)end,
                           ch.ch_size, c))
            return false;
        s->sh_offset = end;
        s->sh_size = ch.ch_size;
        s->sh_addralign = ch.ch_addralign;
        s->sh_flags &= ~(uint64_t)SHF_COMPRESSED;
        end += ch.ch_size;
    }
    eh->e_shoff = align_up(end, 8);
    return write_at(out, sh, eh->e_shnum * sizeof *sh, (off_t)eh->e_shoff) &&
           write_at(out, eh, sizeof *eh, 0);
}

/* ---- Copies kept between sessions ---------------------------------------
 *
 * symbolize.c closes libdw at the end of every session, and a later
 * session that meets a unit not decoded yet opens the file again: for
 * glibc's compressed debug file that was 37 ms of inflating each time, most
 * of what scraping cost a busy program until its units were all decoded.
 * So a copy is kept, its memfd open but not mapped (its pages are the
 * memfd's, not in the host's RSS), until the symbolizer lets go of
 * everything after symbolize_idle_seconds without a session
 * (symdi_drop_copies), as long as all kept copies fit in symbolize_max_kb;
 * their bytes count in the symbolizer's own memory (symdi_kept_bytes).  A
 * copy is known by its file's device, inode, size and change time.  Its
 * descriptor may have been closed by the program since (a daemon closing
 * every descriptor) and its number reused: it is used, and closed, only
 * while it is still the same memfd (device and inode).  Called under the
 * symbolizer's lock, as every libdwfl callback is. */

#define KEPT_COPIES 8

struct kept_copy {
    dev_t dev; /* the file copied */
    ino_t ino;
    off_t size;
    struct timespec ctime;
    int fd; /* the memfd, and what it was when made */
    dev_t fd_dev;
    ino_t fd_ino;
    size_t bytes; /* its pages */
};

static struct kept_copy kept[KEPT_COPIES];
static size_t nkept, kept_total;

static bool still_ours(const struct kept_copy *k)
{
    struct stat st;
    return fstat(k->fd, &st) == 0 && st.st_dev == k->fd_dev &&
           st.st_ino == k->fd_ino;
}

static void forget_copy(size_t i, bool close_it)
{
    if (close_it && still_ours(&kept[i]))
        close(kept[i].fd);
    kept_total -= kept[i].bytes;
    kept[i] = kept[--nkept];
}

static bool same_file(const struct kept_copy *k, const struct stat *st)
{
    return k->dev == st->st_dev && k->ino == st->st_ino &&
           k->size == st->st_size && k->ctime.tv_sec == st->st_ctim.tv_sec &&
           k->ctime.tv_nsec == st->st_ctim.tv_nsec;
}

/* A descriptor of its own for the kept copy of the file `st` describes,
 * or -1. */
static int reuse_copy(const struct stat *st)
{
    for (size_t i = 0; i < nkept; i++) {
        if (!same_file(&kept[i], st))
            continue;
        if (!still_ours(&kept[i])) {
            forget_copy(i, false);
            return -1;
        }
        return fcntl(kept[i].fd, F_DUPFD_CLOEXEC, 0);
    }
    return -1;
}

/* Keeps a descriptor of `copy`, the copy of the file `st` describes, if it
 * fits. */
static void keep_copy(const struct stat *st, int copy)
{
    struct stat c;
    size_t max = (size_t)cfg_int(CFG_SYMBOLIZE_MAX_KB) * 1024;
    if (nkept == KEPT_COPIES || fstat(copy, &c) != 0 ||
        kept_total + (size_t)c.st_blocks * 512 > max)
        return;
    int fd = fcntl(copy, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return;
    kept[nkept++] = (struct kept_copy){
        .dev = st->st_dev, .ino = st->st_ino, .size = st->st_size,
        .ctime = st->st_ctim, .fd = fd, .fd_dev = c.st_dev,
        .fd_ino = c.st_ino, .bytes = (size_t)c.st_blocks * 512};
    kept_total += kept[nkept - 1].bytes;
}

void symdi_drop_copies(void)
{
    while (nkept > 0)
        forget_copy(nkept - 1, true);
}

size_t symdi_kept_bytes(void)
{
    return kept_total;
}

/* fd itself, or, when the ELF file at fd has compressed sections, a memfd
 * holding it with them inflated (fd then closed): the kept copy when
 * there is one, else a new one, kept.  On any failure fd, which libdw
 * reads as it always has. */
static int inflated_copy(int fd)
{
    Elf64_Ehdr eh;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return fd;
    int out = reuse_copy(&st);
    if (out >= 0) {
        close(fd);
        return out;
    }
    if (!read_at(fd, &eh, sizeof eh, 0) || !host_elf64(&eh) ||
        !within(eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr),
                (uint64_t)st.st_size))
        return fd;
    Elf64_Shdr *sh = malloc(eh.e_shnum * sizeof *sh);
    bool compressed = false;
    if (sh && read_at(fd, sh, eh.e_shnum * sizeof *sh, (off_t)eh.e_shoff))
        for (size_t i = 0; i < eh.e_shnum; i++)
            compressed |= sh[i].sh_type != SHT_NOBITS &&
                          (sh[i].sh_flags & SHF_COMPRESSED);
    struct chunks *c = compressed ? malloc(sizeof *c) : NULL;
    out = c ? memfd_create("cpprof-debuginfo", MFD_CLOEXEC) : -1;
    if (out >= 0 &&
        !write_inflated(fd, (uint64_t)st.st_size, &eh, sh, out, c)) {
        close(out);
        out = -1;
    }
    free(c);
    free(sh);
    if (out < 0)
        return fd;
    close(fd);
    keep_copy(&st, out);
    return out;
}

int symdi_find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
                   Dwarf_Addr base, char **file_name, Elf **elfp)
{
    int fd =
        dwfl_linux_proc_find_elf(mod, userdata, modname, base, file_name, elfp);
    return fd >= 0 && !*elfp ? inflated_copy(fd) : fd;
}

/* ---- Finding debug files ------------------------------------------------ */

/* Whether the file's CRC-32 (zlib's, which .gnu_debuglink uses) is crc;
 * read through a heap buffer, as the inflating is. */
static bool crc_matches(int fd, GElf_Word crc)
{
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return false;
    uLong sum = crc32(0L, Z_NULL, 0);
    ssize_t n;
    off_t off = 0;
    while ((n = pread(fd, buf, CHUNK, off)) > 0) {
        sum = crc32(sum, buf, (uInt)n);
        off += n;
    }
    free(buf);
    return n == 0 && (GElf_Word)sum == crc;
}

/* Opens path when it is a debug file for the object (main: the object's
 * own file, which is never its debug file). */
static int try_open(const char *path, const struct stat *main, bool check_crc,
                    GElf_Word crc)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 ||
        (st.st_dev == main->st_dev && st.st_ino == main->st_ino) ||
        (check_crc && !crc_matches(fd, crc))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether the file at fd carries the build id bits[0..n). */
static bool has_build_id(int fd, const unsigned char *bits, int n)
{
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    const void *id;
    bool same = elf && dwelf_elf_gnu_build_id(elf, &id) == n &&
                memcmp(id, bits, (size_t)n) == 0;
    elf_end(elf);
    return same;
}

/* /usr/lib/debug/.build-id/xx/yyyy.debug, when it has mod's build id. */
static int open_by_build_id(Dwfl_Module *mod, char *path, size_t cap)
{
    const unsigned char *bits;
    GElf_Addr vaddr;
    int n = dwfl_module_build_id(mod, &bits, &vaddr);
    if (n < 2 || (size_t)n * 2 + 64 > cap)
        return -1;
    int len = snprintf(path, cap, "/usr/lib/debug/.build-id/%02x/", bits[0]);
    for (int i = 1; i < n; i++)
        len += snprintf(path + len, cap - (size_t)len, "%02x", bits[i]);
    snprintf(path + len, cap - (size_t)len, ".debug");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && !has_build_id(fd, bits, n)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* The .gnu_debuglink name in its places. */
static int open_by_debuglink(Dwfl_Module *mod, const char *file_name,
                             const char *debuglink, GElf_Word crc, char *path,
                             size_t cap)
{
    if (!debuglink || !file_name || file_name[0] != '/')
        return -1;
    const unsigned char *bits;
    GElf_Addr vaddr;
    bool check_crc = crc != 0 && dwfl_module_build_id(mod, &bits, &vaddr) <= 0;
    struct stat main = {0};
    stat(file_name, &main);
    int dirlen = (int)(strrchr(file_name, '/') - file_name);
    static const char *const places[] = {"%.*s/%s", "%.*s/.debug/%s",
                                         "/usr/lib/debug%.*s/%s"};
    size_t nplaces = debuglink[0] == '/' ? 1 : 3;
    int fd = -1;
    for (size_t i = 0; i < nplaces && fd < 0; i++) {
        int len = debuglink[0] == '/'
                      ? snprintf(path, cap, "%s", debuglink)
                      : snprintf(path, cap, places[i], dirlen, file_name,
                                 debuglink);
        if (len > 0 && (size_t)len < cap)
            fd = try_open(path, &main, check_crc, crc);
    }
    return fd;
}

/* libdwfl asks for the main debug file with the object's own
 * .gnu_debuglink (the very string dwelf gives it, or NULL), and for a dwz
 * alternate file with the debug file's .gnu_debugaltlink. */
static bool asks_for_alt_file(Dwfl_Module *mod, const char *debuglink)
{
    Dwarf_Addr bias;
    GElf_Word crc;
    Elf *main = dwfl_module_getelf(mod, &bias);
    return debuglink != (main ? dwelf_elf_gnu_debuglink(main, &crc) : NULL);
}

int symdi_find_debuginfo(Dwfl_Module *mod, void **userdata,
                         const char *modname, Dwarf_Addr base,
                         const char *file_name, const char *debuglink_file,
                         GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    if (asks_for_alt_file(mod, debuglink_file))
        return dwfl_build_id_find_debuginfo(mod, userdata, modname, base,
                                            file_name, debuglink_file,
                                            debuglink_crc,
                                            debuginfo_file_name);
    /* The path in the heap, the name libdwfl keeps (and frees): not on
     * the stack of the thread building a profile, which may be 16 KiB. */
    enum { PATH_BYTES = 4096 };
    char *path = malloc(PATH_BYTES);
    if (!path)
        return -1;
    int fd = open_by_build_id(mod, path, PATH_BYTES);
    if (fd < 0)
        fd = open_by_debuglink(mod, file_name, debuglink_file, debuglink_crc,
                               path, PATH_BYTES);
    if (fd < 0) {
        free(path);
        return -1;
    }
    *debuginfo_file_name = path;
    return inflated_copy(fd);
}
