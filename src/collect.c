/*
 * collect.c -- the stack walk, locks and randomness that the
 * allocation, contention and thread-creation collectors share.
 *
 * The stack walk is the CPU sampler's walker (unwind.h), started from
 * collect_stack's own caller: its return address, CFA and saved frame
 * pointer.  Each thread first learns its own stack's bounds
 * (pthread_getattr_np, which allocates and reads /proc/self/maps for the
 * main thread: harmless under the recursion guard), so the walk reads it
 * directly.  The tables are built at the library's load and refreshed by
 * profiles, the census and snapshots, never here: building them inside an
 * application's malloc is not safe (unwind_tables.c's unwind_init).  Code
 * loaded since the last refresh ends a walk with STACK_NO_TABLE.  glibc's
 * backtrace() would find frames of code built without frame pointers too,
 * but it dlopens libgcc_s on first use, which allocates and takes the
 * loader lock: not something malloc may do.
 */
#define _GNU_SOURCE
#include "collect.h"
#include "interpose.h"
#include "own.h"
#include "unwind.h"
#include "util.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

#define TLS_IE __attribute__((tls_model("initial-exec")))
static __thread bool stack_learnt TLS_IE;
static __thread uint64_t rng_state TLS_IE;

/* glibc's pthread_getattr_np allocates (its CPU set) while holding the
 * thread's own lock.  Were that allocation sampled as the thread's first,
 * the walk would call pthread_getattr_np again to learn the bounds
 * and wait for that lock forever.  Programs call it on their own threads
 * (Rust's std, JVMs, ASan at every thread start: the soak test hung
 * there), so it is interposed to mark the call busy: nothing inside it is
 * sampled.  Not under TSan, which calls it while setting a new thread up,
 * before instrumented code may run there (and has no heap profile). */
#ifndef __SANITIZE_THREAD__
__attribute__((visibility("default"))) int
pthread_getattr_np(pthread_t thread, pthread_attr_t *attr)
{
    static void *next;
    own_busy++; /* before dlsym, which may allocate */
    int (*real)(pthread_t, pthread_attr_t *) =
        (int (*)(pthread_t, pthread_attr_t *))interpose_next(
            &next, "pthread_getattr_np");
    int rc = real ? real(thread, attr) : ENOSYS;
    own_busy--;
    return rc;
}
#endif

__attribute__((noinline)) size_t
collect_stack(unsigned skip, uintptr_t *pcs, size_t max, unsigned *flags,
              uint64_t *gen)
{
    if (gen) /* before the walk: no mapping its stack meets goes unkept */
        unwind_keep_gone_for_stacks();
    if (!stack_learnt) {
        unwind_learn_own_stack();
        stack_learnt = true;
    }
    struct unwind_start start;
    UNWIND_START_OF_CALLER(&start);
    return unwind_from(&start, skip, pcs, max, flags, gen);
}

/* libcpprof's executable segment, [lo, hi); empty when cpprof is part of
 * the program's own executable, or not yet found. */
static uintptr_t own_text_lo, own_text_hi;
static pthread_once_t own_text_once = PTHREAD_ONCE_INIT;

static int find_own_text(struct dl_phdr_info *info, size_t size, void *base)
{
    (void)size;
    if ((void *)info->dlpi_addr != base || !info->dlpi_name[0])
        return 0; /* another object, or the executable */
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) &&
            lo <= (uintptr_t)collect_drop_wrappers &&
            (uintptr_t)collect_drop_wrappers < lo + ph->p_memsz) {
            own_text_lo = lo;
            own_text_hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

static void learn_own_text(void)
{
    Dl_info info;
    if (dladdr((void *)collect_drop_wrappers, &info) && info.dli_fbase)
        dl_iterate_phdr(find_own_text, info.dli_fbase);
}

static bool is_own(uintptr_t pc)
{
    return pc >= own_text_lo && pc < own_text_hi;
}

/* The name of the exported function frame pc is in, or NULL: dladdr
 * names the nearest exported symbol below pc, which for a static helper
 * is some other function, so pc must lie within that symbol's size. */
static const char *own_function(uintptr_t pc)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!dladdr1((void *)pc, &info, (void **)&sym, RTLD_DL_SYMENT) ||
        !info.dli_saddr || !info.dli_sname || !sym ||
        pc >= (uintptr_t)info.dli_saddr + sym->st_size)
        return NULL;
    return info.dli_sname;
}

/* What the interposer named `name` forwards to: the next definition of
 * that name, or 0 when name is no interposer (nothing after cpprof
 * defines it). */
static uintptr_t forwarded_to(const char *name)
{
    return name ? (uintptr_t)dlsym(RTLD_NEXT, name) : 0;
}

size_t collect_drop_wrappers(uintptr_t *pcs, size_t depth)
{
    pthread_once(&own_text_once, learn_own_text);
    if (own_text_lo == own_text_hi)
        return depth;
    size_t out = 0;
    for (size_t i = 0; i < depth;) {
        if (!is_own(pcs[i])) {
            pcs[out++] = pcs[i++];
            continue;
        }
        size_t end = i; /* the run's outermost frame: the one called */
        while (end + 1 < depth && is_own(pcs[end + 1]))
            end++;
        uintptr_t libc = forwarded_to(own_function(pcs[end]));
        if (!libc) {
            /* The program called cpprof's API (cpprof_do shows as Go's
             * pprof.Do does), or the run is a thread of cpprof's own
             * from its start: kept. */
            while (i <= end)
                pcs[out++] = pcs[i++];
            continue;
        }
        if (i == 0)
            pcs[out++] = libc;
        i = end + 1;
    }
    return out;
}

void collect_spin_lock(atomic_flag *lock)
{
    while (atomic_flag_test_and_set_explicit(lock, memory_order_acquire))
        sched_yield();
}

void collect_spin_unlock(atomic_flag *lock)
{
    atomic_flag_clear_explicit(lock, memory_order_release);
}

uint64_t collect_rand(void)
{
    uint64_t x = rng_state;
    if (x == 0) /* seeded per thread: its TLS address and the clock */
        x = ((uintptr_t)&rng_state * 0x9E3779B97F4A7C15ull) ^
            (uint64_t)clock_mono_ns() ^ 0x2545F4914F6CDD1Dull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}
