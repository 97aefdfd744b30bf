/*
 * unwind.h -- the one stack walker of every collector: the CPU
 * sampler's, the census's and the crash traceback's signal handlers, and
 * the allocation, contention and thread-creation collectors' ordinary
 * calls (collect.c).
 *
 * It follows DWARF call-frame information compiled ahead of time into
 * rows (unwind_cfi.h) for every executable mapping, with frame pointers
 * where a mapping or an address has none.  The tables are built and
 * published by unwind_refresh_maps, never by a handler, and freed only
 * after no walk can still read them.  Three steps, each in its file: the
 * parse (unwind_cfi.c: CFI to rows), the store (unwind_tables.c: the
 * mappings and their tables, refreshed and published; why this design and
 * what it costs) and the walk (unwind_walk.c: signal-safe, what it reads).
 * unwind_int.h is what the last two share.
 */
#ifndef CPPROF_UNWIND_H
#define CPPROF_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The most frames a collector keeps of a stack. */
#define STACK_MAX_FRAMES 64

/* Flags of a walk, kept with its stack (stacktab.h). */
enum {
    STACK_LEAF_EXACT = 1, /* pcs[0] is an interrupted PC, the rest are return
                             addresses; otherwise all are return addresses */
    STACK_TRUNCATED = 2,  /* the walk stopped at STACK_MAX_FRAMES */
    STACK_FP_FALLBACK = 4, /* a frame had no usable CFI (none for its
                              address, or a rule the unwinder does not
                              support) and was walked by frame pointer */
    STACK_NO_TABLE = 8,    /* the walk reached code mapped since the
                              unwinder's last refresh and ended there */
    STACK_GUESSED = 16     /* a thread walked from outside: the frame
                              record of pcs[STACK_GUESS_AT(flags) - 1] could
                              not be proved its own, so the callers from
                              STACK_GUESS_AT on (none when it is the depth)
                              are a guess; shown as STACK_GUESSED_FRAME */
};
/* Where a STACK_GUESSED stack's guess begins, kept in the flags' bits 8-15
 * (a depth is at most STACK_MAX_FRAMES). */
#define STACK_GUESS_SHIFT 8
#define STACK_GUESS_AT(flags) (((flags) >> STACK_GUESS_SHIFT) & 0xffu)
/* The pseudo-frame every form of a stack shows between the last frame
 * known and the guessed callers. */
#define STACK_GUESSED_FRAME "cpprof.guessedCallers"

/* Re-reads /proc/self/maps, builds unwind tables for executable mappings
 * new since the last call (reusing those already built, by device and
 * inode), and publishes them to the walker; tables of objects no longer
 * mapped are freed once no walk reads them.  Callers (the sampler's
 * collector, the thread census, crash-handler installation, the
 * library's load and heap snapshots) take turns on a lock; never from a
 * signal handler.  Returns 0 or a negative errno. */
int unwind_refresh_maps(void);

/* Makes every walk follow frame pointers only (true) or CFI where there
 * is any (false, the default): bench/unwind compares the two walkers'
 * cost on the same workload. */
void unwind_set_frame_pointers_only(bool on);

/* unwind_refresh_maps, but only when the dynamic loader has added or
 * removed an object since the last refresh (its counters, read with
 * dl_iterate_phdr: cheap, and never from a signal handler).  The sampler's
 * collector calls it every tick, so that a dlopened object has a table
 * within one tick.  Returns 0 or a negative errno. */
int unwind_refresh_if_loaded(void);

/* SIGNAL-SAFE.  Walks the stack of the thread interrupted with `ucontext`
 * (the handler's third argument): pcs[0] is the interrupted PC, then return
 * addresses, at most `max` in all.  Sets *flags to STACK_* (above),
 * *gen (unless NULL) to the generation of the mappings the walk saw (see
 * "Generations" below; 0 when it had no table), and returns the depth, at
 * least 1. */
size_t unwind_context(const void *ucontext, uintptr_t *pcs, size_t max,
                      unsigned *flags, uint64_t *gen);

/* SIGNAL-SAFE: the interrupted stack pointer a signal's `ucontext` holds
 * (0 on an architecture the walk does not know). */
uintptr_t unwind_context_sp(const void *ucontext);

/* SIGNAL-SAFE.  The bytes of stack left below `sp`, an address in the
 * calling signal handler's own frame, on the stack that handler runs on:
 * the sigaltstack the kernel described in `ucontext` (uc_stack) when sp
 * lies on it, else the thread's own stack when its bounds are known
 * (unwind_learn_own_stack); SIZE_MAX when neither holds sp (the main
 * thread, threads cpprof did not see start, an altstack disarmed with
 * SS_AUTODISARM).  A signal that arrives while its thread runs on its
 * altstack nests there, SA_ONSTACK or not, below the program's handler's
 * frames: cpprof's handlers ask this before they walk. */
size_t unwind_stack_left(const void *ucontext, uintptr_t sp);

/* What unwind_context may use below its caller's frame, with room to
 * spare; a handler adds its own frames' figure and refuses to walk with
 * less left.  gcc 12 -fstack-usage, x86-64, -O2 (ASan+UBSan in
 * brackets), the deepest chain: unwind_context 512 [672] (the reader and
 * its 256-byte chunk), walk 272 [672], step 128 [400] (step_cfi,
 * step_fp, step_sigframe inlined), read_word_slow 96 [304], cfi_find 8
 * [32], then libc's syscall(): about 1,040 bytes [2,100]. */
#if defined(__SANITIZE_ADDRESS__)
#define UNWIND_CONTEXT_STACK 3072
#else
#define UNWIND_CONTEXT_STACK 1536
#endif

/* A walk put off until its code has a table: the interrupted registers
 * and a copy of the stack above them, taken by a handler whose walk met
 * code mapped since the last refresh (a plugin just dlopened), and walked
 * by the collector once the table is built.  16 KB holds the frames of
 * nearly every chain; a walk reaching beyond the copy ends there. */
#define UNWIND_SNAPSHOT_BYTES 16384
struct unwind_snapshot {
    uintptr_t pc, sp, fp, lr;
    size_t len; /* bytes of stack copied from sp */
    uint8_t stack[UNWIND_SNAPSHOT_BYTES];
};

/* SIGNAL-SAFE.  Fills *snap from `ucontext`, the stack copied through
 * process_vm_readv a page at a time (so an unmapped page ends the copy,
 * never faults).  Returns false when the registers cannot be read. */
bool unwind_snapshot_take(const void *ucontext, struct unwind_snapshot *snap);

/* Walks *snap as unwind_context would have, with the tables as they are
 * now; reads outside the copy end the walk.  *gen is the generation the
 * handler's own walk saw (0: unknown): when a mapping has gone away since
 * (the current generation differs), the code the stack was in may be
 * another object's by now, and it returns 0 leaving pcs, *flags and *gen
 * alone (the handler's partial walk stands).  Otherwise *gen becomes the
 * generation of the walk.  Not from a signal handler (it is not one in
 * practice; it is as signal-safe as unwind_context). */
size_t unwind_snapshot_walk(const struct unwind_snapshot *snap,
                            uintptr_t *pcs, size_t max, unsigned *flags,
                            uint64_t *gen);

/* Where a walk from an ordinary call starts: a return address and the
 * stack pointer and frame pointer its caller had when the call returns. */
struct unwind_start {
    uintptr_t pc, sp, fp;
};

/* Fills *s for the caller of the function this expands in (which must be
 * built with frame pointers, as cpprof is, and must not be inlined): the
 * return address, the CFA, and the caller's saved frame pointer. */
#define UNWIND_START_OF_CALLER(s)                                          \
    ((s)->pc = (uintptr_t)__builtin_return_address(0),                     \
     (s)->sp = (uintptr_t)__builtin_dwarf_cfa(),                           \
     (s)->fp = *(const uintptr_t *)__builtin_frame_address(0))

/* Walks from `start` (its pc is pcs[0], a return address), dropping the
 * first `skip` frames, at most `max` in all; *flags as unwind_context.
 * *gen (unless NULL) gets the generation to keep the stack under: the
 * newest of those its mappings were first listed in ("Generations"
 * below), so that a stack through objects still loaded keeps one value
 * while other objects come and go; 0 when there is no table.  The calling
 * thread's own stack only: it must be running on it. */
size_t unwind_from(const struct unwind_start *start, unsigned skip,
                   uintptr_t *pcs, size_t max, unsigned *flags,
                   uint64_t *gen);

/* Walks the stack of another thread of this process that is blocked in
 * the kernel, so that its stack does not change while it is read: `pc` is
 * where it will resume (pcs[0], exact like an interrupted PC) and `sp` its
 * user stack pointer, as /proc/self/task/TID/syscall gives them.  Its frame
 * pointer is not known: a callee's saved copy is used where its CFI says
 * where it was saved; otherwise the first frame that needs it has its
 * frame record searched for above its SP, and when the record found
 * cannot be proved the frame's own (its return address follows a direct
 * call of that frame's function) the stack is marked STACK_GUESSED there.
 * Every read goes
 * through the fault-proof path, since the stack is not the caller's.
 * *flags as unwind_context.  The caller re-checks afterwards that the
 * thread is still blocked at the same place, or discards the walk.
 * `pid` is getpid()'s (the census asks once, not once a thread).
 * Signal-safe too, though only the census's collector uses it. */
size_t unwind_blocked_thread(pid_t pid, uintptr_t pc, uintptr_t sp,
                             uintptr_t *pcs, size_t max, unsigned *flags);

/* SIGNAL-SAFE.  Names pc without a symbol table, into buf (NUL-terminated,
 * cut short to len): "OBJECT+0xADDR", the last component of the path of
 * the object mapped there and pc's address in that object (less its load
 * bias: what addr2line -e OBJECT takes), as the symbolizer names a frame
 * it finds no function for; "0xPC" outside every object the unwinder
 * knows.  The crash report's frames. */
void unwind_pc_name(uintptr_t pc, char *buf, size_t len);

/* Learns the calling thread's stack bounds (pthread_getattr_np), so that
 * walks of this thread read its stack directly; without them they read
 * through the fault-proof path.  Never from a signal handler. */
void unwind_learn_own_stack(void);

/* Generations (so that samples in a dlclosed plugin are not credited to
 * the plugin loaded next at its address).  Every published table has a
 * generation, which moves on when a refresh finds that an object's
 * executable mapping went away (dlclose); a walk reports the generation
 * of the table it read.  The mappings that went away are kept, with the
 * generations they were mapped in, for as long as a generation from
 * before they went is pinned (a CPU profile's samples) or, once stacks
 * are kept for the process's life (unwind_keep_gone_for_stacks: the heap
 * family's), the newest UNWIND_GONE_KEPT of them, so that a PC stored
 * with its generation is resolved later against the object that was
 * there when it was taken, not against whatever is mapped at that address
 * by then.  Generation 0 means "unknown": resolve against the mappings as
 * they are. */

/* An executable mapping of an object that is no longer mapped there. */
typedef struct {
    uintptr_t start, limit, offset; /* as /proc/self/maps said */
    uintptr_t bias;   /* address minus the object's ELF address */
    const char *path; /* the file's name when it was mapped */
    unsigned long long dev, ino; /* of the file that was mapped */
} unwind_gone;

/* Pins the current generation: mappings that go away from now on are kept
 * until it is unpinned (beyond UNWIND_GONE_KEPT too unless stacks are kept
 * for life, which bounds them).  Returns it, or 0 when there is no table yet or
 * every pin slot is taken (then samples are resolved against the mappings
 * at build time, and stderr says so once).  Never from a signal handler. */
uint64_t unwind_pin_generation(void);
void unwind_unpin_generation(uint64_t gen);

/* Says that stacks kept for the process's life refer to generations (the
 * allocation, contention and thread-creation collectors'): from now on
 * the mappings that go away are kept without a pin, the newest
 * UNWIND_GONE_KEPT of them; a PC that was in an older one is reported as
 * UNWIND_PC_FORGOTTEN.  One relaxed load once it is said: callable inside
 * malloc. */
#define UNWIND_GONE_KEPT 256
void unwind_keep_gone_for_stacks(void);

/* Whether a mapping going away now must be recorded at once: a generation
 * is pinned or stacks are kept for life (two atomic loads; dlinterpose.c). */
bool unwind_keeping_gone(void);

/* What unwind_gone_at found for a PC. */
enum {
    UNWIND_PC_CURRENT,  /* in the mapping there now (or gen 0, unknown) */
    UNWIND_PC_GONE,     /* in a mapping gone since: *out describes it */
    UNWIND_PC_FORGOTTEN /* in a mapping gone since whose record was dropped
                           for room (UNWIND_GONE_KEPT): name it nothing */
};

/* Where pc, taken in generation `gen`, lay: UNWIND_PC_* or -ENOMEM.  For
 * UNWIND_PC_GONE, out->path is a malloc'd copy the caller frees.  Never
 * from a signal handler. */
int unwind_gone_at(uint64_t gen, uintptr_t pc, unwind_gone *out);

#endif
