/*
 * unwind_walk.c -- the unwinder's walk: the one stack walker of every
 * collector, reading the tables unwind_tables.c publishes.  The CPU
 * sampler's, the census's and the crash handler's signal handlers walk
 * with it, so this whole file is SIGNAL-SAFE, and every function says so:
 * no lock, no allocation, no library call but memcpy and system calls;
 * binary searches in the published table and bounded loads.
 *
 * The walk, per frame: find the object holding the PC (a return address
 * is looked up one byte back, inside its call), then its row; CFA = SP or
 * FP + offset (or the PLT's expression); the return address and the
 * caller's FP are loaded from CFA + offsets; the caller's SP is the CFA,
 * which must lie above the SP, so the walk moves up the stack and ends.
 * An undefined return address (_start, clone's thread start, makecontext's
 * __start_context) is the outermost frame: the walk ends cleanly.  A
 * sigreturn trampoline (its CIE says 'S'; glibc's __restore_rt) is walked
 * through: the interrupted registers are read from the ucontext the kernel
 * saved at its SP, and the next PC is exact, not a return address.  Where
 * an address has no CFI (the object has none, a gap between FDEs) or an
 * unsupported rule, that frame is walked by its frame-pointer record and
 * the sample carries STACK_FP_FALLBACK.  A PC in an executable mapping
 * whose table is not built yet (mapped since the last refresh) ends the
 * walk after that frame with STACK_NO_TABLE; a PC in no executable
 * mapping ends it before recording a bogus frame.
 *
 * Reads that cannot fault (fibers on malloc'd stacks while the heap
 * shrinks).  A table of mapped regions up to 100 ms old cannot bound
 * reads on a stack that malloc, munmap or a fiber library may take away
 * meanwhile.  So memory is read directly only on the thread's own stack,
 * between the interrupted SP and its top, which stays mapped while the
 * thread runs: bounds learnt outside handlers (unwind_learn_own_stack,
 * initial-exec TLS), or else the main thread's [stack] region, or else the
 * read+write region holding both the SP and the thread pointer (glibc
 * puts a thread's TCB at the top of its stack block), up to the thread
 * pointer.  Every other read (a fiber, a sigaltstack, a frame outside
 * those bounds) goes through process_vm_readv on our own pid, one aligned
 * 256-byte chunk at a time, cached: the kernel returns EFAULT for an
 * unmapped page instead of faulting, and the walk ends there.  Races left:
 * none that fault; a chunk read while its memory is being reused may hold
 * words of the new owner, which yields at worst a wrong frame, never a
 * crash.  Direct reads of the thread-pointer region assume the stale table
 * still describes the live thread's stack block; the sampler and census
 * refresh before any thread they signal gets its timer or signal, so the
 * table always knows such a thread's block.  mincore was rejected: it says
 * a page was mapped, not that it still is by the time it is read.
 */
#define _GNU_SOURCE
#include "unwind_int.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

static atomic_bool frame_pointers_only; /* unwind_set_frame_pointers_only */

/* unwind_int.h */
__thread uintptr_t unwind_own_lo TLS_IE, unwind_own_hi TLS_IE;

/* SIGNAL-SAFE: one atomic store, read by each walk's steps. */
void unwind_set_frame_pointers_only(bool on)
{
    atomic_store(&frame_pointers_only, on);
}

/* ---- The published table ------------------------------------------------ */

/* How often table_acquire tries before it walks without a table. */
#define ACQUIRE_TRIES 4

/* SIGNAL-SAFE: the current table with a reader count held, or NULL.  A
 * table swapped out between the load and the count may be refilled: the
 * new current one is taken instead.  Refreshes come with every dlclose
 * (dlinterpose.c), and a walk that gave up at once met a swap often
 * enough, in a program reopening a plugin in a loop, to leave samples
 * with their leaf alone; a few tries, since a writer could swap again. */
static struct maps_table *table_acquire(void)
{
    for (int i = 0; i < ACQUIRE_TRIES; i++) {
        struct maps_table *t = atomic_load(&unwind_current);
        if (!t)
            return NULL;
        atomic_fetch_add(&t->readers, 1);
        if (atomic_load(&unwind_current) == t)
            return t;
        atomic_fetch_sub(&t->readers, 1); /* swapped meanwhile: not safe */
    }
    return NULL;
}

/* SIGNAL-SAFE: gives back table_acquire's table (NULL: none), with its
 * generation into *gen unless gen is NULL. */
static void table_release(struct maps_table *t, uint64_t *gen)
{
    if (!t)
        return;
    if (gen)
        *gen = t->gen;
    atomic_fetch_sub(&t->readers, 1);
}

/* SIGNAL-SAFE: the region of `r[0..n)` containing `a`, or NULL. */
static const struct region *region_find(const struct region *r, size_t n,
                                        uintptr_t a)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a < r[mid].lo)
            hi = mid;
        else if (a >= r[mid].hi)
            lo = mid + 1;
        else
            return &r[mid];
    }
    return NULL;
}

/* SIGNAL-SAFE (unwind_int.h) */
const struct code *unwind_code_find(const struct maps_table *t, uintptr_t a)
{
    size_t lo = 0, hi = t->ncode;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a < t->code[mid].lo)
            hi = mid;
        else if (a >= t->code[mid].hi)
            lo = mid + 1;
        else
            return &t->code[mid];
    }
    return NULL;
}

/* ---- Reading the stack without faulting -------------------------------- */

#define CHUNK 256

/* Reads stack memory without ever faulting: directly inside [lo, hi),
 * which is known to stay mapped, otherwise through process_vm_readv. */
struct reader {
    uintptr_t lo, hi;
    pid_t pid;          /* ours, asked once per walk that needs it (a
                           forked child's differs from its parent's) */
    uintptr_t chunk_at; /* address of `chunk`, 0 when empty */
    uint8_t chunk[CHUNK];
    /* A copy of [copy_lo, copy_hi) read ahead (another thread's stack,
     * unwind_blocked_thread), or none (copy_hi 0). */
    const uint8_t *copy;
    uintptr_t copy_lo, copy_hi;
    bool copy_only; /* the copy is all there is: the stack has moved on */
    /* The copy's buffer while it may grow by COPY_STEP as the walk climbs
     * (unwind_blocked_thread), up to copy_cap bytes; else NULL. */
    uint8_t *copy_buf;
    size_t copy_cap;
};

/* A blocked thread's stack is copied up to a COPY_STEP boundary first,
 * then a COPY_STEP at a time as the walk reads on: most stacks end within
 * the first, and a copy costs by the pages it spans. */
#define COPY_STEP 4096

/* SIGNAL-SAFE: grows the copy by a COPY_STEP when `a` falls in the one
 * after it; true when `a`'s word is in the copy then. */
static bool grow_copy(struct reader *r, uintptr_t a)
{
    if (!r->copy_buf || r->copy_hi == 0 || a < r->copy_hi ||
        a >= r->copy_hi + COPY_STEP ||
        r->copy_hi - r->copy_lo + COPY_STEP > r->copy_cap)
        return false;
    struct iovec local = {r->copy_buf + (r->copy_hi - r->copy_lo), COPY_STEP};
    struct iovec remote = {(void *)r->copy_hi, COPY_STEP};
    ssize_t got = syscall(SYS_process_vm_readv, r->pid, &local, 1, &remote, 1,
                          0);
    if (got <= 0) {
        r->copy_buf = NULL; /* the stack ends there */
        return false;
    }
    r->copy_hi += (uintptr_t)got;
    return r->copy_hi - a >= sizeof(uintptr_t);
}

/* SIGNAL-SAFE: read_word's fault-proof path, one cached chunk at a time. */
static __attribute__((noinline)) bool read_word_slow(struct reader *r,
                                                     uintptr_t a,
                                                     uintptr_t *out)
{
    if (grow_copy(r, a)) {
        memcpy(out, r->copy + (a - r->copy_lo), sizeof *out);
        return true;
    }
    uintptr_t base = a & ~(uintptr_t)(CHUNK - 1);
    if (base == 0 || r->copy_only)
        return false;
    if (r->chunk_at != base) {
        struct iovec local = {r->chunk, CHUNK};
        struct iovec remote = {(void *)base, CHUNK};
        r->chunk_at = 0;
        if (!r->pid)
            r->pid = (pid_t)syscall(SYS_getpid);
        if (syscall(SYS_process_vm_readv, r->pid, &local, 1, &remote, 1,
                    0) != CHUNK)
            return false;
        r->chunk_at = base;
    }
    memcpy(out, r->chunk + (a - base), sizeof *out);
    return true;
}

/* A CFA-relative read may fall in an ASan redzone of a stack frame; it is
 * in bounds, and ASan must not stop it. */
#define NO_ASAN __attribute__((no_sanitize_address))

/* SIGNAL-SAFE: the word at `a` into *out, or false when unreadable. */
static NO_ASAN inline bool read_word(struct reader *r, uintptr_t a,
                                     uintptr_t *out)
{
    if (a % sizeof(uintptr_t) != 0)
        return false;
    if (a >= r->lo && a < r->hi && r->hi - a >= sizeof(uintptr_t)) {
        *out = *(const uintptr_t *)a;
        return true;
    }
    if (a >= r->copy_lo && a < r->copy_hi &&
        r->copy_hi - a >= sizeof(uintptr_t)) {
        memcpy(out, r->copy + (a - r->copy_lo), sizeof *out);
        return true;
    }
    return read_word_slow(r, a, out);
}

/* SIGNAL-SAFE: the stack the thread at `sp` may be read directly on:
 * [sp, top of its own stack), or empty. */
static void direct_bounds(struct reader *r, const struct maps_table *t,
                          uintptr_t sp)
{
    r->lo = r->hi = 0;
    r->chunk_at = 0;
    r->copy_hi = 0;
    r->copy_only = false;
    r->copy_buf = NULL;
    r->pid = 0;
    if (sp >= unwind_own_lo && sp < unwind_own_hi) {
        r->lo = sp;
        r->hi = unwind_own_hi;
        return;
    }
    if (!t)
        return;
    if (sp >= t->main_stack.lo && sp < t->main_stack.hi) {
        r->lo = sp;
        r->hi = t->main_stack.hi;
        return;
    }
    uintptr_t tp = (uintptr_t)__builtin_thread_pointer();
    const struct region *s = region_find(t->stack, t->nstack, sp);
    if (s && sp < tp && region_find(t->stack, t->nstack, tp) == s) {
        r->lo = sp;
        r->hi = tp;
    }
}

/* ---- The walk ----------------------------------------------------------- */

struct regs {
    uintptr_t pc, sp, fp, lr;
    bool exact; /* pc is an interrupted PC, not a return address */
};

/* SIGNAL-SAFE */
static bool context_regs(const ucontext_t *uc, struct regs *out)
{
#if defined(__x86_64__)
    out->pc = uc->uc_mcontext.gregs[REG_RIP];
    out->sp = uc->uc_mcontext.gregs[REG_RSP];
    out->fp = uc->uc_mcontext.gregs[REG_RBP];
    out->lr = 0;
    out->exact = true;
    return true;
#elif defined(__aarch64__)
    out->pc = uc->uc_mcontext.pc;
    out->sp = uc->uc_mcontext.sp;
    out->fp = uc->uc_mcontext.regs[29];
    out->lr = uc->uc_mcontext.regs[30];
    out->exact = true;
    return true;
#else
    (void)uc;
    (void)out;
    return false;
#endif
}

/* SIGNAL-SAFE */
uintptr_t unwind_context_sp(const void *ucontext)
{
    struct regs r;
    return context_regs(ucontext, &r) ? r.sp : 0;
}

/* SIGNAL-SAFE: steps through a sigreturn trampoline's frame: the kernel
 * saved the interrupted context in a ucontext at (x86-64) or after the
 * siginfo at (AArch64) the trampoline's SP. */
static bool step_sigframe(struct reader *r, struct regs *regs)
{
#if defined(__x86_64__)
    uintptr_t gregs = regs->sp + offsetof(ucontext_t, uc_mcontext.gregs);
    uintptr_t pc, sp, fp, lr = 0;
    if (!read_word(r, gregs + REG_RIP * 8, &pc) ||
        !read_word(r, gregs + REG_RSP * 8, &sp) ||
        !read_word(r, gregs + REG_RBP * 8, &fp))
        return false;
#elif defined(__aarch64__)
    uintptr_t mc = regs->sp + sizeof(siginfo_t) +
                   offsetof(ucontext_t, uc_mcontext);
    uintptr_t pc, sp, fp, lr;
    if (!read_word(r, mc + offsetof(mcontext_t, pc), &pc) ||
        !read_word(r, mc + offsetof(mcontext_t, sp), &sp) ||
        !read_word(r, mc + offsetof(mcontext_t, regs[29]), &fp) ||
        !read_word(r, mc + offsetof(mcontext_t, regs[30]), &lr))
        return false;
#else
    (void)r;
    (void)regs;
    return false;
#endif
#if defined(__x86_64__) || defined(__aarch64__)
    *regs = (struct regs){.pc = pc, .sp = sp, .fp = fp, .lr = lr,
                          .exact = true};
    return true;
#endif
}

/* SIGNAL-SAFE: one frame by its frame-pointer record {saved FP, return
 * address} (x86-64 and AArch64 alike). */
static bool step_fp(struct reader *r, struct regs *regs)
{
    uintptr_t fp = regs->fp, saved, ra;
    if (fp < regs->sp || !read_word(r, fp, &saved) ||
        !read_word(r, fp + sizeof(uintptr_t), &ra))
        return false;
    regs->sp = fp + 2 * sizeof(uintptr_t);
    regs->fp = saved;
    regs->pc = ra;
    regs->exact = false;
    return true;
}

enum step { STEP_OK, STEP_END, STEP_FAIL };

/* SIGNAL-SAFE: one frame by its CFI row. */
static enum step step_cfi(struct reader *r, const struct cfi_row *row,
                          struct regs *regs)
{
    uintptr_t cfa;
    switch (row->rules & CFI_CFA_MASK) {
    case CFA_SP: cfa = regs->sp + row->cfa_off; break;
    case CFA_FP: cfa = regs->fp + row->cfa_off; break;
    case CFA_PLT:
        cfa = regs->sp + row->cfa_off +
              ((regs->pc & 15) >= (uintptr_t)row->fp_off ? 8 : 0);
        break;
    default: return STEP_FAIL;
    }
    uintptr_t ra, fp = regs->fp;
    switch (row->rules & CFI_RA_MASK) {
    case RA_UNDEFINED: return STEP_END;
    case RA_AT:
        if (!read_word(r, cfa + ((row->rules & CFI_RA_IN_RECORD)
                                     ? (intptr_t)row->fp_off + 8
                                     : (intptr_t)row->ra_off8 * 8),
                       &ra))
            return STEP_END;
        break;
    case RA_SAME:
        if (!regs->exact || !regs->lr)
            return STEP_FAIL;
        ra = regs->lr;
        break;
    default: return STEP_FAIL;
    }
    if ((row->rules & CFI_FP_MASK) == FP_AT &&
        !read_word(r, cfa + row->fp_off, &fp))
        return STEP_END;
    if (cfa <= regs->sp && !(cfa == regs->sp && regs->exact &&
                             (row->rules & CFI_RA_MASK) == RA_SAME))
        return STEP_END; /* must move up the stack */
    regs->sp = cfa;
    regs->fp = fp;
    regs->pc = ra;
    regs->lr = 0;
    regs->exact = false;
    return STEP_OK;
}

/* SIGNAL-SAFE: the caller of the frame at `regs`, whose PC lies in `c`
 * (NULL without a table).  Returns false when the walk ends (outermost
 * frame, unreadable, no way on); *by_cfi says whether CFI found it. */
static bool step(const struct code *c, struct reader *r, struct regs *regs,
                 bool *by_cfi, unsigned *flags)
{
    *by_cfi = false;
    if (c && c->cfi && !atomic_load_explicit(&frame_pointers_only,
                                             memory_order_relaxed)) {
        uintptr_t at = regs->exact ? regs->pc : regs->pc - 1;
        const struct cfi_row *row = cfi_find(c->cfi, at - c->bias);
        unsigned cfa_rule = row ? row->rules & CFI_CFA_MASK : CFA_NONE;
        *by_cfi = cfa_rule != CFA_NONE;
        if (cfa_rule == CFA_SIGFRAME)
            return step_sigframe(r, regs);
        if (cfa_rule != CFA_NONE) {
            enum step s = step_cfi(r, row, regs);
            if (s != STEP_FAIL)
                return s == STEP_OK;
            *by_cfi = false;
        }
    }
    *flags |= STACK_FP_FALLBACK;
    return step_fp(r, regs);
}

/* SIGNAL-SAFE: the executable mapping of the frame at `regs`, or NULL;
 * `last` (the previous frame's, or NULL) first, as callers are mostly in
 * the same object. */
static const struct code *code_of(const struct maps_table *t,
                                  const struct code *last,
                                  const struct regs *regs)
{
    uintptr_t at = regs->exact ? regs->pc : regs->pc - 1;
    if (last && at >= last->lo && at < last->hi)
        return last;
    return unwind_code_find(t, at);
}

/* What find_frame_record found. */
enum record {
    RECORD_PROVED,  /* the frame's own record, or no record needed */
    RECORD_GUESSED, /* a record that may be stale */
    RECORD_NONE     /* none: the walk ends */
};

static enum record find_frame_record(const struct maps_table *t,
                                     const struct code *c, struct reader *r,
                                     struct regs *regs);

/* SIGNAL-SAFE: find_frame_record for the frame recorded as pcs[n - 1];
 * the first frame whose record is a guess or is missing marks the stack
 * (unwind.h, STACK_GUESSED).  False when the walk ends. */
static bool found_frame_record(const struct maps_table *t,
                               const struct code *c, struct reader *r,
                               struct regs *regs, size_t n, unsigned *flags)
{
    enum record rec = find_frame_record(t, c, r, regs);
    if (rec != RECORD_PROVED && !(*flags & STACK_GUESSED))
        *flags |= STACK_GUESSED | (unsigned)n << STACK_GUESS_SHIFT;
    return rec != RECORD_NONE;
}

/* SIGNAL-SAFE: walks from `regs` (already recorded as pcs[n - 1]),
 * appending callers up to `max`.  With no table (no refresh yet) it
 * follows frame pointers within the direct bounds only, and says so.
 * fp_unknown: regs.fp is 0 because nobody knows it (another thread's
 * registers), and is searched for when a frame needs it. */
static size_t walk(const struct maps_table *t, struct reader *r,
                   struct regs regs, uintptr_t *pcs, size_t n, size_t max,
                   unsigned *flags, bool fp_unknown)
{
    const struct code *c = t ? code_of(t, NULL, &regs) : NULL;
    if (!t)
        *flags |= STACK_NO_TABLE; /* frame pointers only */
    if (t && !c) {
        *flags |= STACK_NO_TABLE; /* mapped since the last refresh */
        return n;
    }
    for (unsigned frames = 0; frames < 4 * STACK_MAX_FRAMES; frames++) {
        bool by_cfi;
        if (!t && (regs.fp < r->lo || regs.fp >= r->hi))
            break;
        if (fp_unknown && regs.fp == 0 && !found_frame_record(t, c, r, &regs,
                                                              n, flags))
            break;
        if (!step(c, r, &regs, &by_cfi, flags) || regs.pc == 0)
            break;
        if (t && !(c = code_of(t, c, &regs))) {
            /* A rule-derived address outside every mapping is code mapped
             * since the last refresh; a frame-pointer one is garbage. */
            if (by_cfi)
                *flags |= STACK_NO_TABLE;
            break;
        }
        if (n == max) {
            *flags |= STACK_TRUNCATED;
            break;
        }
        pcs[n++] = regs.pc;
    }
    return n;
}

/* SIGNAL-SAFE: reads the ucontext and two initial-exec TLS words. */
size_t unwind_stack_left(const void *ucontext, uintptr_t sp)
{
    const stack_t *alt = &((const ucontext_t *)ucontext)->uc_stack;
    uintptr_t alt_lo = (uintptr_t)alt->ss_sp;
    if (!(alt->ss_flags & SS_DISABLE) && sp >= alt_lo &&
        sp - alt_lo < alt->ss_size)
        return sp - alt_lo;
    if (sp >= unwind_own_lo && sp < unwind_own_hi)
        return sp - unwind_own_lo;
    return SIZE_MAX;
}

/* SIGNAL-SAFE */
size_t unwind_context(const void *ucontext, uintptr_t *pcs, size_t max,
                      unsigned *flags, uint64_t *gen)
{
    struct regs regs;
    *flags = STACK_LEAF_EXACT;
    if (gen)
        *gen = 0;
    if (!context_regs(ucontext, &regs)) {
        pcs[0] = 0;
        return 1;
    }
    pcs[0] = regs.pc;
    struct maps_table *t = table_acquire();
    struct reader r;
    direct_bounds(&r, t, regs.sp);
    size_t n = walk(t, &r, regs, pcs, 1, max, flags, false);
    table_release(t, gen);
    return n;
}

/* SIGNAL-SAFE: the generation a stack of return addresses all[0..n),
 * walked with t, is kept under: the newest `since` of the mappings it
 * passes through, so that it stays the same however many objects go away
 * elsewhere (unwind.h).  The walk ends before code t does not list, so
 * every frame is in t; were one not, t's own generation is the safe
 * answer. */
static uint64_t stack_generation(const struct maps_table *t,
                                 const uintptr_t *all, size_t n)
{
    uint64_t gen = 0;
    const struct code *c = NULL;
    for (size_t i = 0; t && i < n; i++) {
        uintptr_t at = all[i] - 1;
        if (!c || at < c->lo || at >= c->hi)
            c = unwind_code_find(t, at);
        if (!c)
            return t->gen;
        if (c->since > gen)
            gen = c->since;
    }
    return gen;
}

/* SIGNAL-SAFE, though only ordinary calls use it. */
size_t unwind_from(const struct unwind_start *start, unsigned skip,
                   uintptr_t *pcs, size_t max, unsigned *flags,
                   uint64_t *gen)
{
    uintptr_t all[STACK_MAX_FRAMES + 8];
    size_t cap = sizeof all / sizeof all[0];
    size_t room = max + skip < cap ? max + skip : cap;
    struct regs regs = {.pc = start->pc, .sp = start->sp, .fp = start->fp};
    *flags = 0;
    all[0] = regs.pc;
    struct maps_table *t = table_acquire();
    struct reader r;
    direct_bounds(&r, t, regs.sp);
    size_t n = walk(t, &r, regs, all, 1, room, flags, false);
    if (gen)
        *gen = stack_generation(t, all, n);
    table_release(t, NULL);
    n = n > skip ? n - skip : 0;
    memcpy(pcs, all + skip, n * sizeof *pcs);
    return n;
}

/* ---- A walk put off until its table is built ---------------------- */

/* SIGNAL-SAFE */
bool unwind_snapshot_take(const void *ucontext, struct unwind_snapshot *snap)
{
    struct regs regs;
    snap->len = 0;
    if (!context_regs(ucontext, &regs))
        return false;
    snap->pc = regs.pc;
    snap->sp = regs.sp;
    snap->fp = regs.fp;
    snap->lr = regs.lr;
    enum { PAGE = 4096, NPAGES = UNWIND_SNAPSHOT_BYTES / PAGE + 1 };
    struct iovec remote[NPAGES];
    uintptr_t at = regs.sp & ~(uintptr_t)7;
    size_t want = UNWIND_SNAPSHOT_BYTES, n = 0;
    /* One remote piece per page: a partial transfer stops at a piece
     * boundary, so a copy running off the stack's top keeps what it got. */
    while (want && n < NPAGES) {
        size_t piece = PAGE - (at + (UNWIND_SNAPSHOT_BYTES - want)) % PAGE;
        piece = piece < want ? piece : want;
        remote[n].iov_base = (void *)(at + (UNWIND_SNAPSHOT_BYTES - want));
        remote[n++].iov_len = piece;
        want -= piece;
    }
    struct iovec local = {snap->stack, UNWIND_SNAPSHOT_BYTES};
    ssize_t got = syscall(SYS_process_vm_readv, syscall(SYS_getpid), &local,
                          1, remote, n, 0);
    snap->len = got > 0 ? (size_t)got : 0;
    return true;
}

/* SIGNAL-SAFE, though only the CPU sampler's collector calls it. */
size_t unwind_snapshot_walk(const struct unwind_snapshot *snap,
                            uintptr_t *pcs, size_t max, unsigned *flags,
                            uint64_t *gen)
{
    struct regs regs = {.pc = snap->pc, .sp = snap->sp, .fp = snap->fp,
                        .lr = snap->lr, .exact = true};
    uintptr_t lo = snap->sp & ~(uintptr_t)7;
    struct reader r = {.copy = snap->stack,
                       .copy_lo = lo,
                       .copy_hi = snap->len ? lo + snap->len : 0,
                       .copy_only = true};
    struct maps_table *t = table_acquire();
    if (t && *gen && t->gen != *gen) {
        table_release(t, NULL); /* unloaded since: leave it as it was */
        return 0;
    }
    *flags = STACK_LEAF_EXACT;
    pcs[0] = regs.pc;
    size_t n = walk(t, &r, regs, pcs, 1, max, flags, false);
    *gen = 0;
    table_release(t, gen);
    return n;
}

/* ---- Another thread's stack, its frame pointer unknown ---------------- */

/* How far above SP a frame's record is looked for: a frame's locals
 * (servers keep buffers of a few KB on the stack) lie below it. */
#define RECORD_SCAN_BYTES 8192

/* SIGNAL-SAFE: whether the frame at `regs` (in `c`) finds its CFA through
 * the frame pointer, by its CFI row or, without one, by frame pointers. */
static bool frame_needs_fp(const struct code *c, const struct regs *regs)
{
    if (!c || !c->cfi)
        return true;
    uintptr_t at = regs->exact ? regs->pc : regs->pc - 1;
    const struct cfi_row *row = cfi_find(c->cfi, at - c->bias);
    unsigned rule = row ? row->rules & CFI_CFA_MASK : CFA_NONE;
    return rule != CFA_SP && rule != CFA_PLT && rule != CFA_SIGFRAME;
}

/* SIGNAL-SAFE: whether {saved FP, return address} at `a` is the record of
 * the frame at `regs`: the saved FP is 0 (outermost) or further up the
 * stack, the return address is code, and the caller it leads to can be
 * stepped in turn to code.  A local variable that happens to hold a stack
 * address and then a code address passes the first two; the caller's
 * step rarely. */
static bool is_frame_record(const struct maps_table *t, struct reader *r,
                            uintptr_t a, struct regs *caller)
{
    uintptr_t saved, ra;
    if (!read_word(r, a, &saved) || !read_word(r, a + 8, &ra) ||
        (saved != 0 && (saved <= a || saved - a > (1u << 24))))
        return false;
    *caller = (struct regs){.pc = ra, .sp = a + 16, .fp = saved};
    const struct code *c = code_of(t, NULL, caller);
    if (!c)
        return false;
    struct regs next = *caller;
    bool by_cfi;
    unsigned flags = 0;
    return step(c, r, &next, &by_cfi, &flags) && code_of(t, c, &next);
}

/* The code bytes read_code read last, by address and the table's
 * generation: the threads of one census mostly sit in the same calls, so
 * their walks read the same few instructions (each of bench/mariadb.sh's
 * 1,000 connection threads the same one), and a process_vm_readv, about
 * 3 us, was one of the seven system calls of such a thread in its first
 * census.  The generation moves whenever a refresh finds code gone
 * (track_generation), and the census refreshes when the loader's counts
 * move (unwind_refresh_if_loaded), so the bytes of an object dlclosed
 * since are not taken for those of one mapped at its address; one
 * dlclosed during a census gives what a walk a moment earlier would have
 * read.  Lock-free, as the crew's helpers walk at once: a seqlock
 * per entry, odd while written; a writer that finds it taken, or a
 * reader that finds it changing, goes without.  Each architecture reads
 * one size (8 bytes at most), so the size is no part of the key. */
#define CODE_MEMO 8
static struct code_memo {
    atomic_uint seq;
    atomic_uintptr_t addr;
    _Atomic uint64_t gen, bytes;
} code_memo[CODE_MEMO];

/* SIGNAL-SAFE */
static struct code_memo *memo_of(uintptr_t a)
{
    return &code_memo[(a * 0x9e3779b97f4a7c15u) >> 61];
}

_Static_assert(CODE_MEMO == 8, "memo_of takes the hash's top 3 bits");

/* SIGNAL-SAFE: the memo's bytes at `a` for generation `gen` into out. */
static bool memo_get(uintptr_t a, uint64_t gen, void *out, size_t len)
{
    struct code_memo *m = memo_of(a);
    unsigned seq = atomic_load_explicit(&m->seq, memory_order_acquire);
    uintptr_t at = atomic_load_explicit(&m->addr, memory_order_relaxed);
    uint64_t g = atomic_load_explicit(&m->gen, memory_order_relaxed);
    uint64_t bytes = atomic_load_explicit(&m->bytes, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if ((seq & 1) || atomic_load_explicit(&m->seq, memory_order_relaxed) !=
                         seq ||
        at != a || g != gen || at == 0)
        return false;
    memcpy(out, &bytes, len);
    return true;
}

/* SIGNAL-SAFE */
static void memo_put(uintptr_t a, uint64_t gen, const void *in, size_t len)
{
    struct code_memo *m = memo_of(a);
    unsigned seq = atomic_load_explicit(&m->seq, memory_order_relaxed);
    if ((seq & 1) ||
        !atomic_compare_exchange_strong_explicit(&m->seq, &seq, seq + 1,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    atomic_thread_fence(memory_order_release);
    uint64_t bytes = 0;
    memcpy(&bytes, in, len);
    atomic_store_explicit(&m->addr, a, memory_order_relaxed);
    atomic_store_explicit(&m->gen, gen, memory_order_relaxed);
    atomic_store_explicit(&m->bytes, bytes, memory_order_relaxed);
    atomic_store_explicit(&m->seq, seq + 2, memory_order_release);
}

/* SIGNAL-SAFE: `len` bytes (at most 8) of code at `a` into `out`,
 * fault-proof (the object may be unmapped meanwhile), or from the memo
 * for t's generation. */
static bool read_code(const struct maps_table *t, struct reader *r,
                      uintptr_t a, void *out, size_t len)
{
    if (memo_get(a, t->gen, out, len))
        return true;
    if (!r->pid)
        r->pid = (pid_t)syscall(SYS_getpid);
    struct iovec local = {out, len};
    struct iovec remote = {(void *)a, len};
    if (syscall(SYS_process_vm_readv, r->pid, &local, 1, &remote, 1, 0) !=
        (ssize_t)len)
        return false;
    memo_put(a, t->gen, out, len);
    return true;
}

/* Most CFI rows between a function's entry and a PC in it. */
#define FUNCTION_ROWS_MAX 4096

/* SIGNAL-SAFE: whether `target`, a direct call's destination, is the entry
 * of the function holding `at` (both in `c`): a row that finds the CFA by
 * SP covers it, and no FDE ends between them (an FDE's end is a CFA_NONE
 * row; functions are padded apart, so there is nearly always one). */
static bool same_function(const struct code *c, uintptr_t target,
                          uintptr_t at)
{
    if (!c->cfi || target < c->lo || target > at)
        return false;
    const struct cfi_row *from = cfi_find(c->cfi, target - c->bias);
    const struct cfi_row *to = cfi_find(c->cfi, at - c->bias);
    if (!from || !to || to - from > FUNCTION_ROWS_MAX ||
        (from->rules & CFI_CFA_MASK) != CFA_SP)
        return false;
    for (const struct cfi_row *row = from; row <= to; row++)
        if ((row->rules & CFI_CFA_MASK) == CFA_NONE)
            return false;
    return true;
}

/* What the instruction before a return address says about its callee. */
enum call {
    CALL_NOT,      /* no call there, or a direct call of another function */
    CALL_UNKNOWN,  /* an indirect call, or through a PLT: any callee */
    CALL_OF_FRAME  /* a direct call of the function holding the frame */
};

/* SIGNAL-SAFE: whether `ra` follows a call of the function holding the
 * frame at `at` (an address in `c`). */
static enum call call_before(const struct maps_table *t, struct reader *r,
                             const struct code *c, uintptr_t at, uintptr_t ra)
{
#if defined(__x86_64__)
    uint8_t b[8];
    if (!read_code(t, r, ra - sizeof b, b, sizeof b))
        return CALL_NOT;
    if (b[3] == 0xe8) { /* call rel32 */
        int32_t rel;
        memcpy(&rel, b + 4, sizeof rel);
        uintptr_t target = ra + (uintptr_t)(intptr_t)rel;
        if (same_function(c, target, at))
            return CALL_OF_FRAME;
        const struct code *tc = unwind_code_find(t, target);
        const struct cfi_row *row =
            tc && tc->cfi ? cfi_find(tc->cfi, target - tc->bias) : NULL;
        return row && (row->rules & CFI_CFA_MASK) == CFA_PLT ? CALL_UNKNOWN
                                                             : CALL_NOT;
    }
    for (int k = 2; k <= 7; k++) /* call r/m64: ff /2, 2 to 7 bytes */
        if (b[8 - k] == 0xff && ((b[9 - k] >> 3) & 7) == 2)
            return CALL_UNKNOWN;
    return CALL_NOT;
#elif defined(__aarch64__)
    uint32_t insn;
    if (!read_code(t, r, ra - 4, &insn, sizeof insn))
        return CALL_NOT;
    if ((insn & 0xfc000000u) == 0x94000000u) { /* bl imm26 */
        int64_t off = (int64_t)((uint64_t)(insn & 0x03ffffffu) << 38) >> 36;
        uintptr_t target = ra - 4 + (uintptr_t)off;
        if (same_function(c, target, at))
            return CALL_OF_FRAME;
        /* A veneer or PLT entry: the callee is not known from here. */
        const struct code *tc = unwind_code_find(t, target);
        return !tc || !tc->cfi || !cfi_find(tc->cfi, target - tc->bias)
                   ? CALL_UNKNOWN
                   : CALL_NOT;
    }
    return (insn & 0xfffffc1fu) == 0xd63f0000u ? CALL_UNKNOWN : CALL_NOT;
#else
    (void)t;
    (void)r;
    (void)c;
    (void)at;
    (void)ra;
    return CALL_UNKNOWN;
#endif
}

/* SIGNAL-SAFE: while the frame pointer of a thread walked from outside is
 * unknown (0: no frame restored it from the stack yet), a frame that needs
 * it has it found instead: x86-64 and AArch64 frame-pointer code keeps the
 * record {caller's FP, return address} the FP points at between the SP
 * and the CFA, and its address is the FP.  Records earlier, deeper calls
 * left in what are now this frame's uninitialised locals check out too,
 * and lead back to live frames: taking the first that passed one step
 * showed a wrong frame or a stale chain.  So a record counts as the
 * frame's own only when its return address follows a direct call of the
 * function the frame is in (a stale record follows a call of one of that
 * function's callers' other callees).  Records after a direct call of
 * another function are passed over; the lowest of the others is taken,
 * and is a guess unless proved: a record after an indirect call or a PLT
 * may be the frame's or a stale one, and a proved record above it may be
 * a caller's own in a recursion (skipping frames).  With none of either,
 * the first record that passes one step is a guess too. */
static enum record find_frame_record(const struct maps_table *t,
                                     const struct code *c, struct reader *r,
                                     struct regs *regs)
{
    if (!t || !frame_needs_fp(c, regs))
        return RECORD_PROVED;
    uintptr_t at = regs->exact ? regs->pc : regs->pc - 1;
    uintptr_t passing = 0;
    struct regs caller;
    for (uintptr_t a = regs->sp; a < regs->sp + RECORD_SCAN_BYTES; a += 8) {
        if (!is_frame_record(t, r, a, &caller))
            continue;
        enum call k = c ? call_before(t, r, c, at, caller.pc) : CALL_UNKNOWN;
        if (k != CALL_NOT) {
            regs->fp = a;
            return k == CALL_OF_FRAME ? RECORD_PROVED : RECORD_GUESSED;
        }
        if (!passing)
            passing = a;
    }
    regs->fp = passing;
    return passing ? RECORD_GUESSED : RECORD_NONE;
}

/* Most bytes of another thread's stack copied before its walk goes on a
 * chunk at a time: most stacks' frames fit. */
#define BLOCKED_COPY 8192

/* SIGNAL-SAFE, though only the census calls it, from its collector:
 * the copy takes 8 KB of stack.  No read is direct, since the stack is
 * not ours: the copy (grown as the walk climbs: grow_copy), then the
 * fault-proof chunks.  A read stopped by an unmapped page returns what
 * came before it. */
size_t unwind_blocked_thread(pid_t pid, uintptr_t pc, uintptr_t sp,
                             uintptr_t *pcs, size_t max, unsigned *flags)
{
    struct regs regs = {.pc = pc, .sp = sp, .exact = true};
    *flags = STACK_LEAF_EXACT;
    pcs[0] = pc;
    struct maps_table *t = table_acquire();
    uint8_t copy[BLOCKED_COPY];
    uintptr_t lo = sp & ~(uintptr_t)7;
    uintptr_t step_end = (lo | (COPY_STEP - 1)) + 1;
    struct iovec local = {copy, step_end - lo};
    struct iovec remote = {(void *)lo, step_end - lo};
    ssize_t got = syscall(SYS_process_vm_readv, pid, &local, 1, &remote, 1,
                          0);
    struct reader r = {.pid = pid,
                       .copy = copy,
                       .copy_lo = lo,
                       .copy_hi = got > 0 ? lo + (uintptr_t)got : 0,
                       .copy_buf = got == (ssize_t)local.iov_len ? copy : NULL,
                       .copy_cap = sizeof copy};
    size_t n = walk(t, &r, regs, pcs, 1, max, flags, true);
    table_release(t, NULL);
    return n;
}

/* SIGNAL-SAFE: appends s to buf (at most len - 1 bytes in all). */
static size_t put_text(char *buf, size_t len, size_t at, const char *s)
{
    while (*s && at + 1 < len)
        buf[at++] = *s++;
    return at;
}

/* SIGNAL-SAFE: appends "0x" and v in hex. */
static size_t put_hex(char *buf, size_t len, size_t at, uintptr_t v)
{
    char digits[2 * sizeof v + 3];
    size_t n = sizeof digits - 1;
    digits[n] = '\0';
    do {
        digits[--n] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    digits[--n] = 'x';
    digits[--n] = '0';
    return put_text(buf, len, at, digits + n);
}

/* SIGNAL-SAFE */
void unwind_pc_name(uintptr_t pc, char *buf, size_t len)
{
    if (!len)
        return;
    struct maps_table *t = table_acquire();
    const struct code *c = t ? unwind_code_find(t, pc) : NULL;
    const char *path = c && c->obj ? unwind_object_path(c->obj) : NULL;
    size_t at = 0;
    if (path) {
        const char *base = path;
        for (const char *p = path; *p; p++)
            if (*p == '/')
                base = p + 1;
        at = put_text(buf, len, at, base);
        at = put_text(buf, len, at, "+");
        at = put_hex(buf, len, at, pc - c->bias);
    } else {
        at = put_hex(buf, len, at, pc);
    }
    buf[at] = '\0';
    table_release(t, NULL);
}
