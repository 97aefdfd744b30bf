/*
 * loader.c -- the dynamic loader's counts of objects loaded and unloaded,
 * and whether the program links cpprof; see loader.h for why they are
 * read.
 */
#define _GNU_SOURCE
#include "loader.h"
#include "upper_calls.h"

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static int read_counts(struct dl_phdr_info *info, size_t size, void *arg)
{
    loader_counts *c = arg;
    if (size < offsetof(struct dl_phdr_info, dlpi_subs) +
                   sizeof info->dlpi_subs)
        return 1;
    c->adds = info->dlpi_adds;
    c->subs = info->dlpi_subs;
    return 1; /* the counts are the same in every entry */
}

loader_counts loader_counts_now(void)
{
    loader_counts c = {0, 0};
    dl_iterate_phdr(read_counts, &c);
    return c;
}

/* Whether the object of info holds addr in one of its loaded segments. */
static bool object_holds(const struct dl_phdr_info *info, uintptr_t addr)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && addr >= lo && addr - lo < ph->p_memsz)
            return true;
    }
    return false;
}

/* Whether the object of info names libcpprof.so among its DT_NEEDED.
 * glibc has relocated the dynamic section's addresses in place where it
 * can (every architecture cpprof builds for); one still below the load
 * bias is taken as unrelocated. */
static bool object_needs_cpprof(const struct dl_phdr_info *info)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
            continue;
        const ElfW(Dyn) *dyn =
            (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        uintptr_t strtab = 0;
        for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_STRTAB)
                strtab = d->d_un.d_ptr;
        if (!strtab)
            return false;
        if (strtab < info->dlpi_addr)
            strtab += info->dlpi_addr;
        for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_NEEDED &&
                strncmp((const char *)strtab + d->d_un.d_val,
                        "libcpprof.so", 12) == 0)
                return true;
    }
    return false;
}

static int find_cpprof_user(struct dl_phdr_info *info, size_t size,
                            void *arg)
{
    (void)size;
    bool *needs = arg;
    uintptr_t self = (uintptr_t)loader_program_needs_cpprof;
    bool is_main = info->dlpi_name == NULL || info->dlpi_name[0] == '\0';
    if (object_holds(info, self)) {
        *needs = is_main; /* cpprof in the executable: linked statically */
        return *needs;
    }
    *needs = object_needs_cpprof(info);
    return *needs; /* stop at the first that needs it */
}

bool loader_program_needs_cpprof(void)
{
    bool needs = false;
    dl_iterate_phdr(find_cpprof_user, &needs);
    return needs;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(loader_counts_now);
