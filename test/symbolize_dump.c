/*
 * symbolize_dump -- prints what cpprof's symbolizer (symbolize.h) says about
 * addresses of a shared object, in `addr2line -a -f -i`'s format, for
 * test/symbolize_addr2line.sh to compare with addr2line itself: for each
 * offset read from stdin (hex), "0x%016x" then per frame, innermost first,
 * the function's name as in DWARF or the symbol table, and "file:line".
 *
 * Usage: symbolize_dump OBJECT.so [release|memfd] < offsets
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
 * opens the object again and must say the same.
 */
#define _GNU_SOURCE
#include "symbolize.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    void *h = argc == 2 || release || memfd
                  ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)
                  : NULL;
    if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
        fprintf(stderr,
                "usage: [CPPROF_SYMBOLIZE_IDLE_SECONDS=N] symbolize_dump "
                "OBJECT.so [release|memfd] < offsets (%s)\n",
                dlerror());
        return 2;
    }
    unsigned long *offsets = NULL;
    size_t n = 0, cap = 0;
    for (unsigned long offset; scanf("%lx", &offset) == 1; offsets[n++] = offset)
        if (n == cap && !(offsets = realloc(offsets, (cap = 2 * cap + 256) *
                                                         sizeof *offsets)))
            return 2;
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
