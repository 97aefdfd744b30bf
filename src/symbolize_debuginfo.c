/*
 * symbolize_debuginfo.c -- separate debug files found on disk only (see
 * symbolize_debuginfo.h for why).
 *
 * Shape: libdwfl's own build-id search (dwfl_build_id_find_debuginfo,
 * which never calls debuginfod), then the .gnu_debuglink name in the
 * places GDB and libdwfl's default path (":.debug:/usr/lib/debug") look:
 * beside the object, in its .debug directory, and under /usr/lib/debug
 * followed by the object's directory.  A candidate that is the object
 * itself is skipped.  When the object has a build id libdwfl compares it
 * with the debug file's after we return; without one, the link's CRC of
 * the whole file is what says the file belongs to the object.
 */
#define _GNU_SOURCE
#include "symbolize_debuginfo.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Whether the file's CRC-32 (zlib's, which .gnu_debuglink uses) is crc;
 * the descriptor is left at its start. */
static bool crc_matches(int fd, GElf_Word crc)
{
    unsigned char buf[65536];
    uLong sum = crc32(0L, Z_NULL, 0);
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        sum = crc32(sum, buf, (uInt)n);
    return n == 0 && lseek(fd, 0, SEEK_SET) == 0 && (GElf_Word)sum == crc;
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

int symdi_find_debuginfo(Dwfl_Module *mod, void **userdata,
                         const char *modname, Dwarf_Addr base,
                         const char *file_name, const char *debuglink_file,
                         GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base,
                                          file_name, debuglink_file,
                                          debuglink_crc, debuginfo_file_name);
    if (fd >= 0 || !debuglink_file || !file_name || file_name[0] != '/')
        return fd;
    const unsigned char *bits;
    GElf_Addr vaddr;
    bool check_crc = debuglink_crc != 0 &&
                     dwfl_module_build_id(mod, &bits, &vaddr) <= 0;
    struct stat main = {0};
    stat(file_name, &main);
    int dirlen = (int)(strrchr(file_name, '/') - file_name);
    /* the places, as "%s" formats of the object's directory */
    static const char *const places[] = {"%.*s/%s", "%.*s/.debug/%s",
                                         "/usr/lib/debug%.*s/%s"};
    size_t nplaces = debuglink_file[0] == '/' ? 1 : 3;
    char path[4096];
    for (size_t i = 0; i < nplaces && fd < 0; i++) {
        int len = debuglink_file[0] == '/'
                      ? snprintf(path, sizeof path, "%s", debuglink_file)
                      : snprintf(path, sizeof path, places[i], dirlen,
                                 file_name, debuglink_file);
        if (len > 0 && (size_t)len < sizeof path)
            fd = try_open(path, &main, check_crc, debuglink_crc);
    }
    if (fd >= 0) {
        *debuginfo_file_name = strdup(path);
        if (!*debuginfo_file_name) {
            close(fd);
            fd = -1;
        }
    }
    return fd;
}
