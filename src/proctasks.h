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

/* One batch is one getdents64 into the caller's array of tids itself,
 * which the batch's tids then overwrite in place: nothing but that array
 * holds the batch, so its size is the caller's to choose (on cpprof's own
 * threads, PROCTASKS_BATCH_TIDS on the stack; the sampler's first
 * listing, on the thread that starts a profile, in its heap array).  An
 * entry takes 24 bytes at least (a tid of up to 4 digits: every pid
 * namespace's first threads) and a tid 4, so an array of n tids lists at
 * most n / 6 threads a batch, and the batch can never hold more tids than
 * the array: it is the array.  An array of PROCTASKS_BATCH_TIDS lists
 * PROCTASKS_BATCH_MAX a batch at most. */
#define PROCTASKS_BATCH_TIDS 512
#define PROCTASKS_BATCH_MAX (PROCTASKS_BATCH_TIDS * sizeof(pid_t) / 24)
/* The smallest array: room for one entry of the longest tid. */
#define PROCTASKS_MIN_TIDS 8

/* A descriptor of /proc/self/task for the listing (the caller closes it),
 * CPPROF_ENOPROC when there is no /proc, or -errno. */
int proctasks_open(void);

/* How many threads the process has now, from the directory's link count
 * (the kernel counts them there, two of its own besides): 0 when it does
 * not say. */
size_t proctasks_count(int dirfd);

/* The next batch of tids into tids[cap] (cap >= PROCTASKS_MIN_TIDS, the
 * array the batch is read into: see above): how many, 0 at the end of
 * the listing, or -errno. */
int proctasks_next(int dirfd, pid_t *tids, size_t cap);

#endif
