/*
 * census_locks.c -- glibc's locks seen from outside the threads that wait
 * on them, for the census of threads that cannot run again
 * (census_leak.c): which futex waits are a lock's, who holds that lock,
 * and whether a walked stack waits in glibc's lock function.
 *
 * A thread blocked in a pthread mutex sleeps in futex(&m->__data.__lock,
 * FUTEX_WAIT_PRIVATE, 2, NULL) (glibc's __lll_lock_wait, for normal,
 * error-checking, recursive and adaptive mutexes, and so std::mutex); one
 * blocked in an rwlock held for writing, in futex(word,
 * FUTEX_WAIT_BITSET_PRIVATE, 1 | FUTEX_USED, NULL) on __writers_futex (a
 * writer) or __wrphase_futex (a reader).  /proc/self/task/TID/syscall
 * gives the call and its arguments.  glibc records the owner's tid in a
 * mutex's __owner and a write-locked rwlock's __cur_writer.  Those words
 * are read through process_vm_readv, which fails instead of faulting: the
 * futex's address may be anything's (a condition variable's, a
 * program's own futex), so a word counts only when the lock around it
 * looks locked (the futex word holds what the sleeper expects, the kind
 * and flags are a private lock's, the owner a tid).  A process-shared
 * lock (a futex op without FUTEX_PRIVATE_FLAG) is left alone: its owner
 * may be another process's thread.  The caller then checks that the
 * owner is a live thread of the process, and that the sleeper's walked
 * stack is in glibc's function for that lock (census_waits_in_lock), which
 * makes the address that lock's word.  Those functions' bounds come from
 * the C library's dynamic symbol table, found with dl_iterate_phdr (not
 * dladdr, which takes the loader's lock that a thread stuck in dlopen
 * holds).
 */
#define _GNU_SOURCE
#include "census_int.h"

#include <elf.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>

/* The walk finds the futex call in the lock function itself or in a
 * helper it calls (__lll_lock_wait, __futex_abstimed_wait64): one of the
 * first frames is the lock function's. */
#define LOCK_FRAMES 4

/* glibc's mutex kinds (the low bits, pthreadP.h's
 * PTHREAD_MUTEX_KIND_MASK_NP) and the elision flags it may add
 * (PTHREAD_MUTEX_ELISION_NP, _NO_ELISION_NP); robust,
 * priority-inheritance, priority-protected and process-shared mutexes
 * wait otherwise (limits.md). */
#define MUTEX_KINDS_SEEN (3 | 256 | 512)
/* A write-locked rwlock's __readers bit (pthread_rwlock_common.c's
 * PTHREAD_RWLOCK_WRLOCKED). */
#define RWLOCK_WRLOCKED 2u

_Static_assert(offsetof(pthread_mutex_t, __data.__lock) == 0,
               "a mutex's futex word is its first");

/* ---- The lock functions' bounds ----------------------------------------- */

struct lock_fn {
    const char *name;
    enum census_lock_kind kind;
    uintptr_t start, end; /* both 0 until found */
};

static struct lock_fn lock_fns[] = {
    {"pthread_mutex_lock", LOCK_MUTEX, 0, 0},
    {"pthread_rwlock_wrlock", LOCK_RWLOCK, 0, 0},
    {"pthread_rwlock_rdlock", LOCK_RWLOCK, 0, 0},
};
#define NLOCK_FNS (sizeof lock_fns / sizeof lock_fns[0])

/* A dynamic entry's address: glibc relocates them in place for objects
 * whose dynamic section is writable, not for the others. */
static uintptr_t dyn_address(ElfW(Addr) base, ElfW(Addr) v)
{
    return v < base ? base + v : v;
}

/* The symbols of an object with a GNU hash table: one past the end of
 * its last chain. */
static size_t gnu_hash_symbols(const uint32_t *h)
{
    uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2];
    const uint32_t *buckets =
        h + 4 + bloom_words * (sizeof(ElfW(Addr)) / sizeof(uint32_t));
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t i = 0; i < nbuckets; i++)
        if (buckets[i] > last)
            last = buckets[i];
    if (last < symoffset)
        return symoffset;
    while (!(chain[last - symoffset] & 1))
        last++;
    return last + 1;
}

static void note_lock_fn(ElfW(Addr) base, const ElfW(Sym) *s,
                         const char *name)
{
    for (size_t k = 0; k < NLOCK_FNS; k++)
        if (strcmp(name, lock_fns[k].name) == 0) {
            lock_fns[k].start = base + s->st_value;
            lock_fns[k].end = lock_fns[k].start + s->st_size;
        }
}

/* Finds the lock functions in the dynamic symbols of the object at
 * `base` with this dynamic section. */
static void read_lock_fns(ElfW(Addr) base, const ElfW(Dyn) *dyn)
{
    const ElfW(Sym) *syms = NULL;
    const char *strs = NULL;
    const uint32_t *sysv = NULL, *gnu = NULL;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t a = dyn_address(base, dyn->d_un.d_ptr);
        if (dyn->d_tag == DT_SYMTAB)
            syms = (const ElfW(Sym) *)a;
        else if (dyn->d_tag == DT_STRTAB)
            strs = (const char *)a;
        else if (dyn->d_tag == DT_HASH)
            sysv = (const uint32_t *)a;
        else if (dyn->d_tag == DT_GNU_HASH)
            gnu = (const uint32_t *)a;
    }
    if (!syms || !strs || (!sysv && !gnu))
        return;
    size_t n = sysv ? sysv[1] : gnu_hash_symbols(gnu);
    for (size_t i = 0; i < n; i++) {
        const ElfW(Sym) *s = &syms[i];
        if (s->st_size && s->st_shndx != SHN_UNDEF &&
            ELF64_ST_TYPE(s->st_info) == STT_FUNC)
            note_lock_fn(base, s, strs + s->st_name);
    }
}

/* dl_iterate_phdr's callback: the object that holds `arg` (an address in
 * the C library) has its lock functions read. */
static int find_in_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    uintptr_t probe = (uintptr_t)arg;
    const ElfW(Dyn) *dyn = NULL;
    bool holds = false;
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && probe >= start &&
            probe - start < ph->p_memsz)
            holds = true;
        else if (ph->p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)start;
    }
    if (!holds)
        return 0;
    if (dyn)
        read_lock_fns(info->dlpi_addr, dyn);
    return 1;
}

static void find_lock_fns(void)
{
    dl_iterate_phdr(find_in_libc, (void *)(uintptr_t)gnu_get_libc_version);
}

bool census_waits_in_lock(const census_thread *t, enum census_lock_kind kind)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, find_lock_fns);
    for (unsigned i = 0; i < t->depth && i < LOCK_FRAMES; i++) {
        /* A return address is looked up at its call. */
        bool exact = i == 0 && (t->flags & STACK_LEAF_EXACT);
        uintptr_t pc = exact ? t->pcs[i] : t->pcs[i] - 1;
        for (size_t k = 0; k < NLOCK_FNS; k++)
            if (lock_fns[k].kind == kind && pc >= lock_fns[k].start &&
                pc < lock_fns[k].end)
                return true;
    }
    return false;
}

/* ---- The waits and the owners ------------------------------------------- */

enum census_lock_kind census_lock_wait(const struct census_syscall *at)
{
    if (at->nr != SYS_futex || at->nargs < 4)
        return LOCK_NONE;
    unsigned op = (unsigned)at->args[1], val = (unsigned)at->args[2];
    bool untimed = at->args[3] == 0;
    if (!(op & FUTEX_PRIVATE_FLAG) || !untimed)
        return LOCK_NONE;
    unsigned cmd = op & FUTEX_CMD_MASK;
    if (cmd == FUTEX_WAIT && val == 2)
        return LOCK_MUTEX;
    if (cmd == FUTEX_WAIT_BITSET && (val & 1))
        return LOCK_RWLOCK;
    return LOCK_NONE;
}

static bool read_self(pid_t pid, uintptr_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)addr, len};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}

/* A locked mutex's owner, from its futex word's address; 0 when the
 * words there are not a locked private mutex's with waiters. */
static pid_t mutex_owner(pid_t pid, uintptr_t word)
{
    pthread_mutex_t m;
    if (!read_self(pid, word, &m, sizeof m))
        return 0;
    if (m.__data.__lock != 2 || m.__data.__nusers == 0 ||
        (m.__data.__kind & ~MUTEX_KINDS_SEEN) != 0 || m.__data.__owner <= 0)
        return 0;
    return m.__data.__owner;
}

/* A write-locked rwlock's owner, from the address of the futex word a
 * thread sleeps on expecting `val`: its __writers_futex (a writer waits
 * for the writer) or its __wrphase_futex (a reader waits for the write
 * phase to end).  0 when neither reading is a write-locked private
 * rwlock's with its writer recorded (a writer waiting for readers has
 * none). */
static pid_t rwlock_owner(pid_t pid, uintptr_t word, unsigned val)
{
    static const size_t offsets[] = {
        offsetof(pthread_rwlock_t, __data.__writers_futex),
        offsetof(pthread_rwlock_t, __data.__wrphase_futex)};
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++) {
        pthread_rwlock_t rw;
        if (word < offsets[i] ||
            !read_self(pid, word - offsets[i], &rw, sizeof rw))
            continue;
        unsigned slept_on = i == 0 ? rw.__data.__writers_futex
                                   : rw.__data.__wrphase_futex;
        if (slept_on == val && rw.__data.__shared == 0 &&
            (rw.__data.__readers & RWLOCK_WRLOCKED) &&
            rw.__data.__cur_writer > 0)
            return rw.__data.__cur_writer;
    }
    return 0;
}

pid_t census_lock_owner(pid_t pid, enum census_lock_kind kind,
                        uintptr_t word, unsigned val)
{
    if (kind == LOCK_MUTEX)
        return mutex_owner(pid, word);
    if (kind == LOCK_RWLOCK)
        return rwlock_owner(pid, word, val);
    return 0;
}
