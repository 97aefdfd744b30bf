/*
 * symbolize_dump -- prints what cpprof's symbolizer (symbolize.h) says about
 * addresses of a shared object, in `addr2line -a -f -i`'s format, for
 * test/symbolize_addr2line.sh to compare with addr2line itself: for each
 * offset read from stdin (hex), "0x%016x" then per frame, innermost first,
 * the function's name as in DWARF or the symbol table, and "file:line".
 *
 * Usage: symbolize_dump OBJECT.so < offsets
 * The object is dlopened, so that the symbolizer sees it among the
 * process's mappings, as it sees a program's libraries.
 */
#define _GNU_SOURCE
#include "symbolize.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    struct link_map *lm;
    void *h = argc == 2 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
        fprintf(stderr, "usage: symbolize_dump OBJECT.so < offsets (%s)\n",
                dlerror());
        return 2;
    }
    unsigned long offset;
    symbolize_begin();
    while (scanf("%lx", &offset) == 1) {
        const symbolize_result *r = symbolize_pc(lm->l_addr + offset);
        printf("0x%016lx\n", offset);
        for (size_t i = 0; i < r->nframes; i++) {
            const symbolize_frame *f = &r->frames[i];
            printf("%s\n%s:%" PRId64 "\n", f->system_name,
                   f->file[0] ? f->file : "??", f->line);
        }
    }
    symbolize_end();
    return 0;
}
