/*
 * unwind.c -- the CPU sampler's signal-safe stack walker.
 *
 * Choice: a frame-pointer walker whose every read is bounds-checked against
 * a table of mapped regions built outside the handler.  Unwinding in a
 * profiling signal handler is where profilers deadlock or crash their host
 * (gperftools issues 775, 1188, 1210, 1294, 1583): libgcc's and libunwind's
 * local unwinders find .eh_frame through dl_iterate_phdr, which takes the
 * loader lock that a dlopen/dlclose interrupted by the signal already holds.
 * This walker calls nothing: it reads the interrupted registers from the
 * ucontext and then loads two words per frame.
 *
 * Safety.  A writer (the sampler's collector thread or the census, never a
 * handler) reads /proc/self/maps and publishes two sorted tables:
 * read+write regions (where stacks live) and executable regions (where
 * return addresses point).  The handler finds
 * the region holding the interrupted SP and reads frame records only inside
 * [sp, region end), each frame pointer 8-byte aligned and strictly above the
 * previous record, so the walk always moves up the one stack and ends; a
 * return address outside every executable region ends it too, which stops a
 * walk through a register that a frame-pointer-less function used as data
 * before it records a bogus frame.  An SP in no known region (a mapping
 * newer than the last refresh) yields the interrupted PC alone.  Regions are
 * not merged with their neighbours: a walk that crossed into an adjacent
 * mapping could read it just as dlclose or munmap removes it.  Threads get
 * their timer after the refresh that precedes the thread scan, so every
 * sampled thread's stack is in the table.
 *
 * Publication is double-buffered: the writer fills the table that is not
 * current, after waiting until no handler still counts itself as reading
 * it, then swaps the current pointer.  A handler increments the reader
 * count of the table it loaded and re-checks that it is still current, so
 * the writer's wait can never miss it (sequentially consistent atomics).
 *
 * What it costs (measured on the 2-core development VM, gcc -O2): a walk
 * of 13 frames takes 28 ns and one of 63 frames 133 ns, about 2 ns a frame
 * (two loads and two binary searches of ~10-entry tables); rebuilding the
 * table from a 37-line /proc/self/maps takes 25 us, on the collector
 * thread.  bench/cpu_overhead measures the whole profile's cost.
 *
 * What -fno-omit-frame-pointer buys.  Every function built with frame
 * pointers appears in its samples.  A function built without them (Debian's
 * glibc and most distribution libraries, or code built with plain -O2 on
 * x86-64) either leaves %rbp alone, so that its *caller* is missing from
 * stacks sampled while it runs (the walk resumes at the caller's caller),
 * or uses %rbp as data, so that the walk ends there and the sample keeps
 * only the frames below.  Samples whose leaf is at a function's first or
 * last instruction (before its frame is set up or after it is torn down)
 * likewise miss the caller, and so do samples in a leaf function that
 * needs no stack: gcc 12 on x86-64 gives such a function no frame even
 * with -fno-omit-frame-pointer (checked with objdump), so for a hot loop
 * in a small leaf the profile shows leaf <- caller's caller.  Building the application with
 * -fno-omit-frame-pointer (cpprof itself is) gives complete stacks through
 * all of its own code; the cost is one register, typically 1-2% of speed.
 */
#define _GNU_SOURCE
#include "unwind.h"
#include "stacktab.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucontext.h>

struct region {
    uintptr_t lo, hi;
};

struct region_list {
    struct region *r;
    size_t n, cap;
};

struct maps_table {
    atomic_long readers;
    struct region_list stack; /* read+write: where a thread's SP can be */
    struct region_list exec;  /* executable: where return addresses point */
};

static struct maps_table tables[2];
static _Atomic(struct maps_table *) current;

/* ---- Writer side (collector thread) ---------------------------------- */

static int region_append(struct region_list *l, uintptr_t lo, uintptr_t hi)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        struct region *r = realloc(l->r, cap * sizeof *r);
        if (!r)
            return -ENOMEM;
        l->r = r;
        l->cap = cap;
    }
    l->r[l->n++] = (struct region){lo, hi};
    return 0;
}

/* Fills `t` from /proc/self/maps, whose lines are sorted by address, so the
 * lists come out sorted. */
static int read_maps(struct maps_table *t)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -errno;
    t->stack.n = t->exec.n = 0;
    char line[512];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3)
            continue;
        if (perms[0] == 'r' && perms[1] == 'w')
            rc = region_append(&t->stack, lo, hi);
        if (rc == 0 && perms[2] == 'x')
            rc = region_append(&t->exec, lo, hi);
    }
    fclose(f);
    return rc;
}

/* Waits for handlers that loaded `t` before it stopped being current. */
static void wait_no_readers(struct maps_table *t)
{
    while (atomic_load(&t->readers) != 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* Writers (the sampler's collector, the thread census) take turns: both
 * fill the table that is not current. */
static pthread_mutex_t writer_mu = PTHREAD_MUTEX_INITIALIZER;

int unwind_refresh_maps(void)
{
    pthread_mutex_lock(&writer_mu);
    struct maps_table *cur = atomic_load(&current);
    struct maps_table *next = cur == &tables[0] ? &tables[1] : &tables[0];
    wait_no_readers(next);
    int rc = read_maps(next);
    if (rc == 0)
        atomic_store(&current, next);
    pthread_mutex_unlock(&writer_mu);
    return rc;
}

/* ---- Reader side: everything below is SIGNAL-SAFE --------------------- */

/* SIGNAL-SAFE: the current table with a reader count held, or NULL. */
static struct maps_table *table_acquire(void)
{
    struct maps_table *t = atomic_load(&current);
    if (!t)
        return NULL;
    atomic_fetch_add(&t->readers, 1);
    if (atomic_load(&current) == t)
        return t;
    atomic_fetch_sub(&t->readers, 1); /* swapped meanwhile: not safe */
    return NULL;
}

/* SIGNAL-SAFE: the region of `l` containing `a`, or NULL. */
static const struct region *region_find(const struct region_list *l,
                                        uintptr_t a)
{
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a < l->r[mid].lo)
            hi = mid;
        else if (a >= l->r[mid].hi)
            lo = mid + 1;
        else
            return &l->r[mid];
    }
    return NULL;
}

struct regs {
    uintptr_t pc, sp, fp;
};

/* SIGNAL-SAFE */
static bool context_regs(const void *ucontext, struct regs *out)
{
    const ucontext_t *uc = ucontext;
#if defined(__x86_64__)
    out->pc = uc->uc_mcontext.gregs[REG_RIP];
    out->sp = uc->uc_mcontext.gregs[REG_RSP];
    out->fp = uc->uc_mcontext.gregs[REG_RBP];
    return true;
#elif defined(__aarch64__)
    out->pc = uc->uc_mcontext.pc;
    out->sp = uc->uc_mcontext.sp;
    out->fp = uc->uc_mcontext.regs[29];
    return true;
#else
    (void)uc;
    (void)out;
    return false;
#endif
}

/* SIGNAL-SAFE: appends return addresses from the frame records chained at
 * `fp`, reading only inside [sp, stack->hi).  On both x86-64 and AArch64 a
 * record is {saved frame pointer, return address}.  no_sanitize_address:
 * a frame pointer from code built without one may point at an ASan redzone
 * inside those bounds; the read is safe, ASan must not stop it (the soak
 * test under --enable-asan-ubsan). */
__attribute__((no_sanitize_address)) static size_t
walk_frames(const struct maps_table *t, uintptr_t sp,
                          uintptr_t fp, uintptr_t *pcs, size_t n, size_t max,
                          unsigned *flags)
{
    const struct region *stack = region_find(&t->stack, sp);
    if (!stack)
        return n;
    uintptr_t lo = sp;
    while (fp >= lo && fp % 8 == 0 && fp <= stack->hi - 2 * sizeof(uintptr_t)) {
        const uintptr_t *record = (const uintptr_t *)fp;
        uintptr_t ret = record[1];
        if (!region_find(&t->exec, ret))
            break;
        if (n == max) {
            *flags |= STACK_TRUNCATED;
            break;
        }
        pcs[n++] = ret;
        lo = fp + 2 * sizeof(uintptr_t);
        fp = record[0];
    }
    return n;
}

/* SIGNAL-SAFE */
size_t unwind_context(const void *ucontext, uintptr_t *pcs, size_t max,
                      unsigned *flags)
{
    struct regs regs;
    *flags = STACK_LEAF_EXACT;
    if (!context_regs(ucontext, &regs)) {
        pcs[0] = 0;
        return 1;
    }
    pcs[0] = regs.pc;
    struct maps_table *t = table_acquire();
    if (!t)
        return 1;
    size_t n = walk_frames(t, regs.sp, regs.fp, pcs, 1, max, flags);
    atomic_fetch_sub(&t->readers, 1);
    return n;
}
