/* proctasks.h -- the process's threads as /proc/self/task lists them,
 * for the census, the CPU sampler's scan of new threads and the index
 * page's thread count.  The directory is listed with getdents64 in
 * batches into the caller's array: nothing is allocated, so a collector
 * can list a process of any size, and a caller can act on the first
 * threads (the census's crew reads them) while the rest are listed (the
 * kernel builds each thread's entry as it lists it, 2-3 us a thread).
 * The descriptor also serves to open a thread's files relative to it
 * (procfile_read), so the kernel resolves neither /proc/self nor the
 * task path again. */
#ifndef CPPROF_PROCTASKS_H
#define CPPROF_PROCTASKS_H

#include <stddef.h>
#include <sys/types.h>

/* One batch is one getdents64 of PROCTASKS_BATCH_BYTES; an entry takes at
 * least 24 bytes, so it holds at most PROCTASKS_BATCH_MAX tids. */
#define PROCTASKS_BATCH_BYTES 2048
#define PROCTASKS_BATCH_MAX (PROCTASKS_BATCH_BYTES / 24)

/* A descriptor of /proc/self/task for the listing (the caller closes it),
 * CPPROF_ENOPROC when there is no /proc, or -errno. */
int proctasks_open(void);

/* How many threads the process has now, from the directory's link count
 * (the kernel counts them there, two of its own besides): 0 when it does
 * not say. */
size_t proctasks_count(int dirfd);

/* The next batch of tids into tids[PROCTASKS_BATCH_MAX]: how many, 0 at
 * the end of the listing, or -errno. */
int proctasks_next(int dirfd, pid_t *tids);

#endif
