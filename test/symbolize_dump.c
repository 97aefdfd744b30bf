/*
 * symbolize_dump -- prints what cpprof's symbolizer (symbolize.h) says about
 * addresses of a shared object, in `addr2line -a -f -i`'s format, for
 * test/symbolize_addr2line.sh to compare with addr2line itself: for each
 * offset read from stdin (hex), "0x%016x" then per frame, innermost first,
 * the function's name as in DWARF or the symbol table, and "file:line".
 *
 * Usage: symbolize_dump OBJECT.so [release|memfd|reuse|reuse-closed]
 *        < offsets
 * The object is dlopened, so that the symbolizer sees it among the
 * process's mappings, as it sees a program's libraries.  With "memfd",
 * it says on stderr how many of the process's mappings are the
 * symbolizer's inflated copies of debug files, at the end of the session
 * and after it ("memfd: during N, after M"): libdw closes them at the
 * session's end; then it symbolizes every offset plus one, addresses not
 * seen yet in the units already decoded, in a second session, and says
 * the same of it (libdw is not even opened: during 0).  With "release",
 * every offset is symbolized twice, printed both times: between the
 * passes the symbolizer is left idle past symbolize_idle_seconds and must
 * let go of everything (its own-memory figure 0), so that the second pass
 * opens the object again and must say the same.  With "reuse", the
 * offsets come in two groups, split by a line "next", each in units the
 * other does not reach, and each in a session of its own: the second
 * session needs libdw again, and must read the inflated copy the first
 * one kept (the memfd it maps has the inode of the descriptor kept), which
 * it says on stderr.  "reuse-closed" does what a daemon closing every
 * descriptor does between the sessions: each kept descriptor's number is
 * made /dev/null's; the second session must inflate a copy of its own and
 * leave that descriptor as it found it.
 */
#define _GNU_SOURCE
#include "symbolize.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Mappings of the symbolizer's inflated copies (memfd:cpprof-debuginfo). */
static int inflated_copies_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, "memfd:cpprof-debuginfo") != NULL;
    if (f)
        fclose(f);
    return n;
}

/* Up to `cap` descriptors that are the symbolizer's kept inflated copies
 * into fds[], their inodes into inodes[]; how many. */
static int kept_copies(int *fds, ino_t *inodes, int cap)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    while (d && n < cap && (e = readdir(d)) != NULL) {
        char path[64], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        struct stat st;
        if (len <= 0)
            continue;
        target[len] = '\0';
        if (strstr(target, "memfd:cpprof-debuginfo") && stat(path, &st) == 0) {
            fds[n] = atoi(e->d_name);
            inodes[n++] = st.st_ino;
        }
    }
    if (d)
        closedir(d);
    return n;
}

/* Whether an inflated copy with inode `ino` is mapped. */
static bool copy_mapped(ino_t ino)
{
    FILE *f = fopen("/proc/self/maps", "re");
    char line[4096];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f)) {
        unsigned long inode = 0;
        found = strstr(line, "memfd:cpprof-debuginfo") &&
                sscanf(line, "%*s %*s %*s %*s %lu", &inode) == 1 &&
                inode == (unsigned long)ino;
    }
    if (f)
        fclose(f);
    return found;
}

static void symbolize_all(uintptr_t base, const unsigned long *offsets,
                          size_t n)
{
    for (size_t k = 0; k < n; k++)
        symbolize_pc(base + offsets[k]);
}

/* "reuse" and "reuse-closed" (see the top). */
static int reuse(uintptr_t base, const unsigned long *offsets, size_t n,
                 size_t first, bool closed)
{
    symbolize_begin();
    symbolize_all(base, offsets, first);
    symbolize_end();
    int fds[8];
    ino_t inodes[8];
    int kept = kept_copies(fds, inodes, 8);
    if (kept == 0) {
        fprintf(stderr, "reuse: no inflated copy kept after the session\n");
        return 1;
    }
    int devnull = open("/dev/null", O_RDONLY);
    for (int i = 0; closed && i < kept; i++)
        dup2(devnull, fds[i]);
    symbolize_begin();
    symbolize_all(base, offsets + first, n - first);
    bool read_kept = false;
    for (int i = 0; i < kept; i++)
        read_kept |= copy_mapped(inodes[i]);
    int mapped = inflated_copies_mapped();
    symbolize_end();
    if (!closed) {
        fprintf(stderr, "reuse: %d kept; the second session %s\n", kept,
                read_kept ? "read the kept copy" : "inflated another copy");
        return 0;
    }
    bool intact = true;
    for (int i = 0; i < kept; i++) {
        struct stat a, b;
        intact &= fstat(fds[i], &a) == 0 && fstat(devnull, &b) == 0 &&
                  a.st_ino == b.st_ino && a.st_dev == b.st_dev;
    }
    fprintf(stderr, "closed: the second session %s (%d mapped); the program's "
            "descriptors %s\n",
            read_kept ? "read the kept copy" : "inflated another copy", mapped,
            intact ? "untouched" : "changed");
    return 0;
}

static void dump(uintptr_t base, const unsigned long *offsets, size_t n,
                 bool memfd)
{
    symbolize_begin();
    for (size_t k = 0; k < n; k++) {
        const symbolize_result *r = symbolize_pc(base + offsets[k]);
        printf("0x%016lx\n", offsets[k]);
        for (size_t i = 0; i < r->nframes; i++) {
            const symbolize_frame *f = &r->frames[i];
            printf("%s\n%s:%" PRId64 "\n", f->system_name,
                   f->file[0] ? f->file : "??", f->line);
        }
    }
    int during = memfd ? inflated_copies_mapped() : 0;
    symbolize_end();
    if (memfd)
        fprintf(stderr, "memfd: during %d, after %d\n", during,
                inflated_copies_mapped());
}

/* Waits out the idle period (whole seconds of the monotonic clock are
 * compared, so one more), then asks for the release. */
static int release_when_idle(void)
{
    struct timespec wait = {atol(getenv("CPPROF_SYMBOLIZE_IDLE_SECONDS")) + 1,
                            0};
    if (symbolize_own_bytes() == 0) {
        fprintf(stderr, "symbolize_dump: no own memory before the release\n");
        return -1;
    }
    nanosleep(&wait, NULL);
    symbolize_release_if_idle();
    if (symbolize_own_bytes() != 0) {
        fprintf(stderr, "symbolize_dump: %zu bytes kept past the idle time\n",
                symbolize_own_bytes());
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct link_map *lm;
    bool release = argc == 3 && strcmp(argv[2], "release") == 0 &&
                   getenv("CPPROF_SYMBOLIZE_IDLE_SECONDS");
    bool memfd = argc == 3 && strcmp(argv[2], "memfd") == 0;
    bool reusing = argc == 3 && strncmp(argv[2], "reuse", 5) == 0;
    void *h = argc == 2 || release || memfd || reusing
                  ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)
                  : NULL;
    if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
        fprintf(stderr,
                "usage: [CPPROF_SYMBOLIZE_IDLE_SECONDS=N] symbolize_dump "
                "OBJECT.so [release|memfd|reuse|reuse-closed] < offsets "
                "(%s)\n",
                dlerror());
        return 2;
    }
    unsigned long *offsets = NULL;
    size_t n = 0, cap = 0, first = 0;
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "next", 4) == 0) {
            first = n;
            continue;
        }
        char *end;
        unsigned long offset = strtoul(line, &end, 16);
        if (end == line)
            continue; /* a blank line */
        if (n == cap && !(offsets = realloc(offsets, (cap = 2 * cap + 256) *
                                                         sizeof *offsets)))
            return 2;
        offsets[n++] = offset;
    }
    if (reusing) {
        int rc = reuse(lm->l_addr, offsets, n, first,
                       strcmp(argv[2], "reuse-closed") == 0);
        free(offsets);
        return rc;
    }
    dump(lm->l_addr, offsets, n, memfd);
    if (memfd) {
        for (size_t k = 0; k < n; k++)
            offsets[k]++;
        dump(lm->l_addr, offsets, n, memfd);
    }
    if (release) {
        if (release_when_idle() != 0)
            return 1;
        dump(lm->l_addr, offsets, n, false);
    }
    free(offsets);
    return 0;
}
