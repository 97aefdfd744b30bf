/*
 * util.h -- the small utilities every module would otherwise write again:
 * a growable array, a hash index, clock readings in nanoseconds and futex
 * waits.  One
 * copy each, inline, so a hot path (a label switch, a signal handler)
 * pays no call for them.  Core level: includes nothing of cpprof's.
 */
#ifndef CPPROF_UTIL_H
#define CPPROF_UTIL_H

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <linux/futex.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Makes room for `more` elements of `size` bytes in the malloc'd array
 * whose pointer is at arrp (n in use, *cap allocated): capacity doubles
 * from 16.  0, or -ENOMEM with the array untouched.  The pointer is copied
 * with memcpy so one function serves arrays of every type; ARRAY_RESERVE
 * passes the element size. */
static inline int array_reserve(void *arrp, size_t *cap, size_t n,
                                size_t more, size_t size)
{
    if (more > SIZE_MAX - n)
        return -ENOMEM;
    if (n + more <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < n + more) {
        if (ncap > SIZE_MAX / 2 / size)
            return -ENOMEM;
        ncap *= 2;
    }
    void *items;
    memcpy(&items, arrp, sizeof items);
    void *grown = realloc(items, ncap * size);
    if (!grown)
        return -ENOMEM;
    memcpy(arrp, &grown, sizeof grown);
    *cap = ncap;
    return 0;
}

#define ARRAY_RESERVE(arr, n, cap, more)                                     \
    array_reserve(&(arr), &(cap), (n), (more), sizeof *(arr))

/* An open-addressing index of item numbers, for tables that intern (the
 * builder's strings and locations, the census's task stacks, the stack
 * tables, sample sets, the symbolizer's caches): the table
 * keeps the items, the index only their numbers + 1 (0: an empty slot)
 * and hashes, at most half full, so that a lookup is one probe run.  A
 * slot is 8 bytes, the hash's low 32 bits beside the item's number, so
 * that the index of a table of stacks (stacktab.c) costs no more than the
 * hash each item would otherwise keep; at most 2^30 items.  It allocates
 * with calloc: never use it from a signal handler or inside the program's
 * malloc.  Zeroed is empty; its bytes are n_slots * sizeof *slots. */
struct hashindex {
    struct hashindex_slot {
        uint32_t hash; /* the hash's low bits: enough to place it again */
        uint32_t item;
    } *slots;
    size_t n_slots, used;
};

/* Folds v into the hash h. */
static inline uint64_t hash_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return (h * 0xFF51AFD7ED558CCDull) ^ (h >> 31);
}

/* The hash of a NUL-terminated string (FNV-1a). */
static inline uint64_t hash_string(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

/* Whether item number `item` of the caller's table (at ctx) is `key`. */
typedef bool (*hashindex_same_fn)(const void *ctx, size_t item,
                                  const void *key);

/* The slot of the item equal to key (slot->item is its number + 1), or the
 * empty slot where it goes (slot->item == 0), after making room for one
 * more; NULL when out of memory. */
static inline struct hashindex_slot *
hashindex_find(struct hashindex *x, uint64_t hash, hashindex_same_fn same,
               const void *ctx, const void *key)
{
    if (2 * (x->used + 1) > x->n_slots) {
        if (x->n_slots > UINT32_MAX / 2)
            return NULL;
        size_t n = x->n_slots ? 2 * x->n_slots : 256;
        struct hashindex_slot *slots = calloc(n, sizeof *slots);
        if (!slots)
            return NULL;
        for (size_t i = 0; i < x->n_slots; i++) {
            if (!x->slots[i].item)
                continue;
            size_t j = x->slots[i].hash & (n - 1);
            while (slots[j].item)
                j = (j + 1) & (n - 1);
            slots[j] = x->slots[i];
        }
        free(x->slots);
        x->slots = slots;
        x->n_slots = n;
    }
    size_t mask = x->n_slots - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        struct hashindex_slot *s = &x->slots[i];
        if (!s->item ||
            (s->hash == (uint32_t)hash && same(ctx, s->item - 1, key)))
            return s;
    }
}

/* Fills the empty slot hashindex_find returned with item number `item`. */
static inline void hashindex_set(struct hashindex *x,
                                 struct hashindex_slot *s, uint64_t hash,
                                 size_t item)
{
    s->hash = (uint32_t)hash;
    s->item = (uint32_t)(item + 1);
    x->used++;
}

/* Frees the index's slots and empties it, for reuse or for good. */
static inline void hashindex_free(struct hashindex *x)
{
    free(x->slots);
    *x = (struct hashindex){0};
}

/* Has the kernel back the whole pages of [p, p + len) now, in one call,
 * where filling a fresh buffer would fault at each page's first write: a
 * page fault costs tens of microseconds on a VM (about 25 on the test
 * machine, against about 1 for each page populated in one call), and a
 * census of 1,000 threads fills 190 pages.  Best effort: kernels before
 * 5.14 lack MADV_POPULATE_WRITE, and the pages then fault as before. */
static inline void prefault_for_write(void *p, size_t len)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)p + len) & ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}

/* Clock readings. */

/* SIGNAL-SAFE: clock_gettime is async-signal-safe. */
static inline int64_t clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* SIGNAL-SAFE */
static inline int64_t clock_mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

/* SIGNAL-SAFE */
static inline int64_t clock_thread_cpu_ns(void)
{
    return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

/* The futex call with its system call instruction here, inline, rather
 * than in glibc's syscall(): cpprof's own threads wait in futex_wait
 * (the census crew's helpers, the sampler's collector), and a census
 * that finds one blocked there symbolizes its leaf frame.  In syscall()
 * that frame is glibc's syscall.S, unit 1,465 of the 2,063 in glibc's
 * debug file, and libdw (reopened by every symbolizer session that meets
 * a unit not decoded yet) indexes every unit before the one it looks
 * for: about 1.5 MB of allocations, most of the page faults (540 with
 * it, under 100 without) of the first census of mariadbd's 1,000
 * connections, where the crew shows for the first time
 * (bench/mariadb.sh): 10 ms at a VM's 25 us a fault.
 * Here the leaf is futex_wait itself, in cpprof's own small units.
 * Other architectures go through syscall().  The kernel's result: 0 or
 * -errno. */
static inline long futex_raw(void *word, int op, unsigned val,
                             const struct timespec *timeout)
{
#if defined(__x86_64__)
    register long r10 __asm__("r10") = (long)timeout;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_futex), "D"(word), "S"((long)op),
                       "d"((long)val), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_futex;
    register long x0 __asm__("x0") = (long)word;
    register long x1 __asm__("x1") = op;
    register long x2 __asm__("x2") = (long)val;
    register long x3 __asm__("x3") = (long)timeout;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3)
                     : "memory");
    return x0;
#else
    long ret = syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL,
                       0);
    return ret < 0 ? -errno : ret;
#endif
}

/* Sleeps while *word holds `val`, at most timeout (NULL: no bound), on a
 * process-private futex.  0, or -1 with errno (EAGAIN: it no longer held
 * val; ETIMEDOUT; EINTR). */
static inline long futex_wait(void *word, unsigned val,
                              const struct timespec *timeout)
{
    long ret = futex_raw(word, FUTEX_WAIT_PRIVATE, val, timeout);
    if (ret < 0) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

/* Wakes up to n waiters on word (INT_MAX: all).  SIGNAL-SAFE: one system
 * call. */
static inline long futex_wake(void *word, int n)
{
    return syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE_PRIVATE, n, NULL,
                   NULL, 0);
}

/* Descriptors of cpprof's own, out of the program's way. */

enum { FD_FLOOR_MAX = 1000, FD_FLOOR_ROOM = 24 };

/* The lowest number cpprof's descriptors take: near the top of the soft
 * RLIMIT_NOFILE (leaving room for a few of ours), at most FD_FLOOR_MAX;
 * 0 when the table is too small to spare it.  A daemon that closes every
 * descriptor it inherited and opens its own files meets them only after
 * about a thousand of its own (http_watch.c). */
static inline int fd_floor(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 2 * FD_FLOOR_ROOM)
        return 0;
    rlim_t top = rl.rlim_cur - FD_FLOOR_ROOM;
    return top < FD_FLOOR_MAX ? (int)top : FD_FLOOR_MAX;
}

/* fd moved to a close-on-exec number at or above `floor` (fd is closed),
 * or fd itself when no such number is free. */
static inline int fd_move_high(int fd, int floor)
{
    int high = floor > fd ? fcntl(fd, F_DUPFD_CLOEXEC, floor) : -1;
    if (high < 0)
        return fd;
    close(fd);
    return high;
}

/* Descriptors a fork's child must close although no table of the
 * server's holds them at that instant (a connection handed to
 * libmicrohttpd but not started, a relayed request's socket): a slot holds
 * fd + 1 (0: free) and the socket's inode, so that the child closes a
 * number only while it still names that socket. */
enum { FDNOTE_MAX = 64 };
struct fdnote {
    _Atomic int fd[FDNOTE_MAX];
    ino_t ino[FDNOTE_MAX];
};

static inline void fdnote_add(struct fdnote *n, int fd)
{
    struct stat st;
    for (int i = 0; i < FDNOTE_MAX; i++) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&n->fd[i], &expected, fd + 1)) {
            n->ino[i] = fstat(fd, &st) == 0 ? st.st_ino : 0;
            return;
        }
    }
}

static inline void fdnote_remove(struct fdnote *n, int fd)
{
    for (int i = 0; i < FDNOTE_MAX; i++) {
        int expected = fd + 1;
        if (atomic_compare_exchange_strong(&n->fd[i], &expected, 0))
            return;
    }
}

/* In a fork's child, async-signal-safe: closes and forgets them all. */
static inline void fdnote_close_after_fork(struct fdnote *n)
{
    struct stat st;
    for (int i = 0; i < FDNOTE_MAX; i++) {
        int fd = atomic_exchange(&n->fd[i], 0) - 1;
        if (fd >= 0 && fstat(fd, &st) == 0 && st.st_ino == n->ino[i])
            close(fd);
    }
}

#endif
