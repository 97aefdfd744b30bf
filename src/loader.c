/*
 * loader.c -- the dynamic loader's counts of objects loaded and unloaded;
 * see loader.h for why they are read.
 */
#define _GNU_SOURCE
#include "loader.h"

#include <link.h>
#include <stddef.h>

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
