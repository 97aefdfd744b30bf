/*
 * unwind.c -- the signal-safe stack walker every collector uses, and the
 * registry of unwind tables it reads.
 *
 * Choice: DWARF CFI compiled ahead of time (unwind_cfi.c) and applied by a
 * walker that calls nothing.  Unwinding in a profiling signal handler is
 * where profilers deadlock or crash their host (gperftools issues 775,
 * 1188, 1210, 1294, 1583; tikv#9765): libgcc's and libunwind's local
 * unwinders find .eh_frame through dl_iterate_phdr, which takes the loader
 * lock that a dlopen/dlclose interrupted by the signal may hold, and
 * interpret CFA programs as they go.  Frame pointers alone lose callers of
 * every function built without them (Debian's glibc, zlib, libstdc++, any
 * plain -O2 x86-64 code).  So a writer that may block (the library's
 * load, the sampler's collector thread -- every 100 ms, and at the next
 * 20 ms tick after the loader's counters show a dlopen or dlclose -- the
 * census, crash-handler installation, heap snapshots; never a handler)
 * reads /proc/self/maps and, for each executable
 * mapping, the object's CFI from its file (the vDSO from memory), and
 * publishes sorted immutable tables; the walk is binary searches and
 * bounded loads.
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
 * Reads that cannot fault (issue 18: fibers on malloc'd stacks while the
 * heap shrinks).  A table of mapped regions up to 100 ms old cannot bound
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
 *
 * Lifetime.  Publication is double-buffered: the writer fills the table
 * that is not current, after waiting until no walk still counts itself as
 * reading it, then swaps the current pointer (a walk increments the reader
 * count of the table it loaded and re-checks that it is still current;
 * sequentially consistent atomics).  Each object's rows are shared by the
 * two tables through a count of the tables holding them, changed only by
 * the writer; rows are freed when neither table holds them, which is after
 * the readers of the table that last did have drained.  So a dlclosed
 * object's rows are never freed under a walk.
 *
 * Generations (unwind.h).  Samples keep raw PCs until a profile is built,
 * by which time a dlclosed object's address may hold another object.  As
 * perf keeps its mmap events, the writer keeps what each gone mapping
 * was, with the range of table generations that listed it, found by
 * comparing each new table with the published one (both sorted: one
 * pass).  The generation moves on only when a mapping went away, so
 * samples of one stack aggregate across refreshes that only add objects.
 * Kept while a pinned generation may refer to them (a CPU profile pins
 * one from its start to its build), and, once the allocation, contention
 * or thread-creation collectors keep a stack (they keep them for the
 * process's life), for good, but at most UNWIND_GONE_KEPT, the oldest
 * dropped first: a program that dlopens and dlcloses in a loop holds that
 * many records, then PCs that were in the dropped ones are reported as
 * forgotten (shown "[unloaded]"), never as the object mapped there now.
 * Those collectors' stacks are kept under a generation of their own
 * (stack_generation: the newest of their mappings), not the table's, so
 * that a stack of objects still loaded is one entry however often other
 * objects come and go.
 *
 * What it costs: see README ("Stacks") and bench/unwind for the figures.
 */
#define _GNU_SOURCE
#include "unwind.h"
#include "atfork.h"
#include "loader.h"
#include "unwind_cfi.h"
#include "warn.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* ---- The published tables ------------------------------------------ */

/* One object's rows, shared by the tables that list a mapping of it. */
struct object {
    dev_t dev;
    ino_t ino;
    char *path;
    struct cfi_table *cfi; /* NULL: the object has no CFI (frame pointers) */
    int64_t vaddr_minus_offset; /* of its executable PT_LOAD */
    int holders;                /* tables listing it; writer only */
    struct object *next;        /* the writer's list of all objects */
};

struct region {
    uintptr_t lo, hi;
};

/* An executable mapping: object address = pc - bias. */
struct code {
    uintptr_t lo, hi, bias, offset;
    const struct cfi_table *cfi;
    struct object *obj; /* NULL: not built (no file, not ELF, failed) */
    uint64_t since;     /* generation of the first table listing it */
};

struct maps_table {
    atomic_long readers;
    struct region *stack; /* read+write regions, sorted */
    size_t nstack, capstack;
    struct region main_stack; /* [stack] */
    struct code *code;        /* executable regions, sorted */
    size_t ncode, capcode;
    uint64_t gen;             /* unwind.h, "Generations" */
};

static struct maps_table tables[2];
static _Atomic(struct maps_table *) current;
static atomic_bool frame_pointers_only; /* unwind_set_frame_pointers_only */

/* ---- Writer side ------------------------------------------------------ */

static pthread_mutex_t writer_mu = PTHREAD_MUTEX_INITIALIZER;
static struct object *objects; /* under writer_mu */

/* The loader's counts as of the last refresh (loader.h). */
static loader_counts refreshed_counts; /* under writer_mu */

static int grow(void **a, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 64;
    void *p = realloc(*a, c * size);
    if (!p)
        return -ENOMEM;
    *a = p;
    *cap = c;
    return 0;
}

/* The offset between ELF addresses and file offsets of the executable
 * PT_LOAD covering file offset `off` (0 when none: the first PT_LOAD). */
static int64_t exec_segment_shift(const uint8_t *img, size_t size,
                                  uint64_t off)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
    if (eh->e_phoff > size || eh->e_phentsize != sizeof(Elf64_Phdr) ||
        (size - eh->e_phoff) / sizeof(Elf64_Phdr) < eh->e_phnum)
        return 0;
    int64_t first = 0;
    bool have_first = false;
    for (size_t i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, img + eh->e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_type != PT_LOAD)
            continue;
        int64_t shift = (int64_t)ph.p_vaddr - (int64_t)ph.p_offset;
        if (!have_first) {
            first = shift;
            have_first = true;
        }
        uint64_t page_lo = ph.p_offset & ~(uint64_t)0xfff;
        if ((ph.p_flags & PF_X) && off >= page_lo &&
            off < ph.p_offset + ph.p_filesz)
            return shift;
    }
    return first;
}

/* Builds an object's rows from the ELF image at [img, img + size). */
static void build_object(struct object *o, const uint8_t *img, size_t size,
                         uint64_t map_offset)
{
    struct cfi_stats stats;
    if (cfi_build(img, size, &o->cfi, &stats) == 0)
        o->vaddr_minus_offset = exec_segment_shift(img, size, map_offset);
}

/* Maps the object's file (checked to be the mapped one: same device and
 * inode) and builds its rows; on any failure the object has none and its
 * frames are walked by frame pointers.  Mapped writable though never
 * written (no page is copied), as libelf maps the files it reads: the
 * symbolizer tells such readings from the loader's segments by that
 * (symbolize.c, is_file_reading). */
static void build_from_file(struct object *o, uint64_t map_offset)
{
    int fd = open(o->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_dev == o->dev && st.st_ino == o->ino &&
        st.st_size > 0) {
        void *img = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE, fd, 0);
        if (img != MAP_FAILED) {
            build_object(o, img, (size_t)st.st_size, map_offset);
            munmap(img, (size_t)st.st_size);
        }
    }
    close(fd);
}

static struct object *find_object(dev_t dev, ino_t ino, const char *path)
{
    for (struct object *o = objects; o; o = o->next)
        if (o->dev == dev && o->ino == ino && strcmp(o->path, path) == 0)
            return o;
    return NULL;
}

/* The object mapped from `path` (device, inode), built on first sight.
 * The vDSO has no file: its image is the mapping itself. */
static struct object *object_for(const char *path, dev_t dev, ino_t ino,
                                 uintptr_t lo, uintptr_t hi, uint64_t off)
{
    struct object *o = find_object(dev, ino, path);
    if (o)
        return o;
    o = calloc(1, sizeof *o);
    if (!o || !(o->path = strdup(path))) {
        free(o);
        return NULL;
    }
    o->dev = dev;
    o->ino = ino;
    if (strcmp(path, "[vdso]") == 0)
        build_object(o, (const uint8_t *)lo, hi - lo, off);
    else if (path[0] == '/')
        build_from_file(o, off);
    o->next = objects;
    objects = o;
    return o;
}

/* Drops table `t`'s hold on its objects; frees those no table holds. */
static void release_objects(struct maps_table *t)
{
    for (size_t i = 0; i < t->ncode; i++)
        if (t->code[i].obj)
            t->code[i].obj->holders--;
    t->ncode = 0;
    for (struct object **p = &objects; *p;) {
        struct object *o = *p;
        if (o->holders > 0) {
            p = &o->next;
            continue;
        }
        *p = o->next;
        cfi_free(o->cfi);
        free(o->path);
        free(o);
    }
}

static int add_code(struct maps_table *t, uintptr_t lo, uintptr_t hi,
                    uint64_t off, const char *path, dev_t dev, ino_t ino)
{
    if (grow((void **)&t->code, &t->capcode, t->ncode, sizeof *t->code))
        return -ENOMEM;
    struct code *c = &t->code[t->ncode++];
    *c = (struct code){.lo = lo, .hi = hi, .offset = off};
    if (!*path)
        return 0; /* anonymous code (a JIT): frame pointers */
    c->obj = object_for(path, dev, ino, lo, hi, off);
    if (!c->obj)
        return 0;
    c->obj->holders++;
    c->cfi = c->obj->cfi;
    c->bias = lo - off - (uintptr_t)c->obj->vaddr_minus_offset;
    return 0;
}

/* Fills `t` from /proc/self/maps, whose lines are sorted by address. */
static int read_maps(struct maps_table *t)
{
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return -errno;
    t->nstack = 0;
    t->main_stack = (struct region){0, 0};
    char line[4096 + 128];
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi, off, ino;
        unsigned dmaj, dmin;
        char perms[5];
        int pathat = 0;
        if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &lo, &hi, perms,
                   &off, &dmaj, &dmin, &ino, &pathat) < 7)
            continue;
        char *path = line + pathat;
        path[strcspn(path, "\n")] = '\0';
        if (perms[0] == 'r' && perms[1] == 'w') {
            rc = grow((void **)&t->stack, &t->capstack, t->nstack,
                      sizeof *t->stack);
            if (rc == 0)
                t->stack[t->nstack++] = (struct region){lo, hi};
            if (strcmp(path, "[stack]") == 0)
                t->main_stack = (struct region){lo, hi};
        }
        if (rc == 0 && perms[2] == 'x')
            rc = add_code(t, lo, hi, off, path, makedev(dmaj, dmin), ino);
    }
    fclose(f);
    return rc;
}

/* Waits for walks that loaded `t` before it stopped being current. */
static void wait_no_readers(struct maps_table *t)
{
    while (atomic_load(&t->readers) != 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

void unwind_set_frame_pointers_only(bool on)
{
    atomic_store(&frame_pointers_only, on);
}

/* ---- Generations and the mappings that went away ---------------------- */

/* A mapping that went away, with the generations it was mapped in:
 * [since, until). */
struct gone {
    unwind_gone pub;
    uint64_t since, until;
    struct gone *next;
};

#define PINS 8 /* profiles building at once: one CPU profile, and spares */

static struct gone *gone_list;  /* newest first; under writer_mu */
static atomic_size_t ngone;     /* its length, for a lookup without lock */
static uint64_t last_gen;       /* the newest table's; under writer_mu */
static uint64_t pins[PINS];     /* pinned generations, 0 free; writer_mu */
static atomic_int npins;        /* how many, for a test without lock */
/* Stacks kept for the process's life refer to generations (the allocation,
 * contention and thread-creation collectors' tables): the gone mappings
 * are kept without a pin, UNWIND_GONE_KEPT at most. */
static atomic_bool kept_for_stacks;
/* The newest `until` of a record dropped for room (written under
 * writer_mu): a PC from a generation before it may have been in a mapping
 * no longer known. */
static _Atomic uint64_t forgotten_until;

static bool same_code(const struct code *a, const struct code *b)
{
    return a->lo == b->lo && a->hi == b->hi && a->obj == b->obj &&
           a->bias == b->bias;
}

/* Keeps c, a mapping of `cur` that `next` no longer lists; until is set
 * by the caller.  Out of memory, stderr says once that such PCs will be
 * resolved against what is mapped at build time. */
static void remember_gone(const struct code *c)
{
    struct gone *g = calloc(1, sizeof *g);
    char *path = g ? strdup(c->obj->path) : NULL;
    if (!path) {
        static atomic_bool said;
        free(g);
        if (!atomic_exchange(&said, true))
            warn_stderr("cpprof: out of memory keeping an unloaded "
                        "object's mapping; its samples may be shown "
                        "in the object loaded next at its address\n");
        return;
    }
    g->pub = (unwind_gone){.start = c->lo,
                           .limit = c->hi,
                           .offset = c->offset,
                           .bias = c->bias,
                           .path = path,
                           .dev = c->obj->dev,
                           .ino = c->obj->ino};
    g->since = c->since;
    g->next = gone_list;
    gone_list = g;
    atomic_fetch_add(&ngone, 1);
}

/* The generation a mapping new in a table was first listed in: that of
 * the same object's mapping at the same place (a plugin reloaded) when
 * that is the last thing known to have been there, so that a stack
 * through it keeps its key across reloads (heap buckets do not multiply
 * in a reload loop); else 0 (new).  Records are newest first, and those
 * dropped are the oldest, so the first one overlapping the place is the
 * last occupant kept, and nothing came between. */
static uint64_t since_of_reloaded(const struct code *c)
{
    for (const struct gone *g = gone_list; c->obj && g; g = g->next) {
        if (g->pub.limit <= c->lo || g->pub.start >= c->hi)
            continue;
        bool same = g->pub.start == c->lo && g->pub.limit == c->hi &&
                    g->pub.offset == c->offset && g->pub.bias == c->bias &&
                    g->pub.dev == c->obj->dev && g->pub.ino == c->obj->ino;
        return same ? g->since : 0;
    }
    return 0;
}

/* Gives `next` its generation by comparing it with `cur`, the published
 * table: the same as cur's unless an object's mapping went away, which is
 * then kept.  Both tables' code is sorted by address. */
static void track_generation(const struct maps_table *cur,
                             struct maps_table *next)
{
    struct gone *before = gone_list;
    size_t j = 0;
    for (size_t i = 0; i < next->ncode; i++)
        next->code[i].since = 0;
    for (size_t i = 0; cur && i < cur->ncode; i++) {
        const struct code *c = &cur->code[i];
        while (j < next->ncode && next->code[j].lo < c->lo)
            j++;
        if (j < next->ncode && same_code(c, &next->code[j]))
            next->code[j].since = c->since;
        else if (c->obj)
            remember_gone(c);
    }
    next->gen = !cur || gone_list != before ? ++last_gen : cur->gen;
    for (struct gone *g = gone_list; g != before; g = g->next)
        g->until = next->gen;
    for (size_t i = 0; i < next->ncode; i++)
        if (!next->code[i].since)
            next->code[i].since = since_of_reloaded(&next->code[i]);
    for (size_t i = 0; i < next->ncode; i++)
        if (!next->code[i].since)
            next->code[i].since = next->gen;
}

static void free_gone(struct gone *g)
{
    free((char *)g->pub.path);
    free(g);
    atomic_fetch_sub(&ngone, 1);
}

/* Frees the mappings nothing can refer to any more: without stacks kept
 * for life, those that went away before the oldest pin (all of them when
 * nothing is pinned); with them, the oldest beyond UNWIND_GONE_KEPT,
 * remembering how far back PCs may have lost theirs. */
static void prune_gone(void)
{
    uint64_t oldest = UINT64_MAX;
    for (int i = 0; i < PINS; i++)
        if (pins[i] && pins[i] < oldest)
            oldest = pins[i];
    bool keep_all = atomic_load(&kept_for_stacks);
    size_t kept = 0;
    for (struct gone **p = &gone_list; *p;) {
        struct gone *g = *p;
        if (keep_all ? kept < UNWIND_GONE_KEPT : g->until > oldest) {
            kept++;
            p = &g->next;
            continue;
        }
        if (keep_all && g->until > atomic_load(&forgotten_until))
            atomic_store(&forgotten_until, g->until);
        *p = g->next;
        free_gone(g);
    }
}

uint64_t unwind_pin_generation(void)
{
    pthread_mutex_lock(&writer_mu);
    uint64_t gen = atomic_load(&current) ? last_gen : 0;
    int i = 0;
    while (gen && i < PINS && pins[i])
        i++;
    if (gen && i < PINS) {
        pins[i] = gen;
        atomic_fetch_add(&npins, 1);
    }
    pthread_mutex_unlock(&writer_mu);
    if (gen && i == PINS) {
        static atomic_bool said;
        if (!atomic_exchange(&said, true))
            warn_stderr("cpprof: more than %d profiles at once keep "
                        "unloaded objects' mappings; another one's "
                        "samples are shown in the objects mapped when "
                        "it is built\n", PINS);
        return 0;
    }
    return gen;
}

void unwind_unpin_generation(uint64_t gen)
{
    if (!gen)
        return;
    pthread_mutex_lock(&writer_mu);
    for (int i = 0; i < PINS; i++)
        if (pins[i] == gen) {
            pins[i] = 0;
            atomic_fetch_sub(&npins, 1);
            break;
        }
    prune_gone();
    pthread_mutex_unlock(&writer_mu);
}

void unwind_keep_gone_for_stacks(void)
{
    if (!atomic_load_explicit(&kept_for_stacks, memory_order_relaxed))
        atomic_store(&kept_for_stacks, true);
}

bool unwind_keeping_gone(void)
{
    return atomic_load(&npins) > 0 || atomic_load(&kept_for_stacks);
}

static const struct code *code_find(const struct maps_table *t, uintptr_t a);

/* Whether the mapping listed now at pc was listed already in generation
 * `gen`.  Under writer_mu, so the current table stays. */
static bool listed_since(uint64_t gen, uintptr_t pc)
{
    const struct maps_table *t = atomic_load(&current);
    const struct code *c = t ? code_find(t, pc) : NULL;
    return c && c->since <= gen;
}

int unwind_gone_at(uint64_t gen, uintptr_t pc, unwind_gone *out)
{
    if (!gen ||
        (atomic_load(&ngone) == 0 && !atomic_load(&forgotten_until)))
        return UNWIND_PC_CURRENT;
    int r = UNWIND_PC_CURRENT;
    pthread_mutex_lock(&writer_mu);
    for (struct gone *g = gone_list; g && r == UNWIND_PC_CURRENT;
         g = g->next)
        if (g->since <= gen && gen < g->until && pc >= g->pub.start &&
            pc < g->pub.limit) {
            *out = g->pub;
            out->path = strdup(g->pub.path);
            r = out->path ? UNWIND_PC_GONE : -ENOMEM;
        }
    if (r == UNWIND_PC_CURRENT && gen < atomic_load(&forgotten_until) &&
        !listed_since(gen, pc))
        r = UNWIND_PC_FORGOTTEN;
    pthread_mutex_unlock(&writer_mu);
    return r;
}

int unwind_refresh_maps(void)
{
    /* Counted before the maps are read: an object loaded meanwhile makes
     * the next unwind_refresh_if_loaded refresh again. */
    loader_counts counts = loader_counts_now();
    pthread_mutex_lock(&writer_mu);
    struct maps_table *cur = atomic_load(&current);
    struct maps_table *next = cur == &tables[0] ? &tables[1] : &tables[0];
    wait_no_readers(next);
    release_objects(next);
    int rc = read_maps(next);
    if (rc == 0) {
        track_generation(cur, next);
        prune_gone();
        atomic_store(&current, next);
        refreshed_counts = counts;
    } else {
        release_objects(next);
    }
    pthread_mutex_unlock(&writer_mu);
    return rc;
}

static void writer_lock(void)
{
    pthread_mutex_lock(&writer_mu);
}

static void writer_unlock(void)
{
    pthread_mutex_unlock(&writer_mu);
}

/* In a forked child only the forking thread exists: walks that other
 * threads had under way will never end, so their reader counts go, and so
 * do the pins of profiles it does not have (the CPU profile's session is
 * dropped there; sampler.c). */
static void writer_unlock_in_child(void)
{
    atomic_store(&tables[0].readers, 0);
    atomic_store(&tables[1].readers, 0);
    memset(pins, 0, sizeof pins);
    atomic_store(&npins, 0);
    pthread_mutex_unlock(&writer_mu);
}

/* The tables are built when the library loads, so that the stacks the
 * allocation, contention and thread-creation collectors record from the
 * first call on are walked by CFI (a program allocates from main before
 * it starts any profile).  Those collectors run inside the application's
 * malloc and locks, where building (which allocates, for milliseconds that
 * an application signal handler's malloc may land in) is not safe.  The
 * cost, once per process: about 8 ms of CPU for the 21 objects of a small
 * program linked with cpprof (bench/unwind's table figures per object).
 * Objects loaded later are added by the next refresh: the CPU sampler's,
 * the census's, a heap snapshot's. */
__attribute__((constructor)) static void unwind_init(void)
{
    /* A fork while another thread refreshes or walks must not leave the
     * child's writer lock held, or a reader counted, forever. */
    static const atfork_handlers on_fork = {writer_lock, writer_unlock,
                                            writer_unlock_in_child};
    atfork_add(ATFORK_UNWIND, &on_fork);
    unwind_refresh_maps();
}

int unwind_refresh_if_loaded(void)
{
    loader_counts now = loader_counts_now();
    pthread_mutex_lock(&writer_mu);
    bool changed = !loader_counts_equal(now, refreshed_counts);
    pthread_mutex_unlock(&writer_mu);
    return changed ? unwind_refresh_maps() : 0;
}

#define TLS_IE __attribute__((tls_model("initial-exec")))
static __thread uintptr_t own_lo TLS_IE, own_hi TLS_IE;

void unwind_learn_own_stack(void)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (own_hi || pthread_getattr_np(pthread_self(), &attr) != 0)
        return;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        own_lo = (uintptr_t)addr;
        own_hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&attr);
}

/* ---- Reader side: everything below is SIGNAL-SAFE --------------------- */

/* SIGNAL-SAFE: the current table with a reader count held, or NULL.  A
 * table swapped out between the load and the count may be refilled: the
 * new current one is taken instead.  Refreshes come with every dlclose
 * (dlinterpose.c), and a walk that gave up at once met a swap often
 * enough, in a program reopening a plugin in a loop, to leave samples
 * with their leaf alone; a few tries, since a writer could swap again. */
#define ACQUIRE_TRIES 4
static struct maps_table *table_acquire(void)
{
    for (int i = 0; i < ACQUIRE_TRIES; i++) {
        struct maps_table *t = atomic_load(&current);
        if (!t)
            return NULL;
        atomic_fetch_add(&t->readers, 1);
        if (atomic_load(&current) == t)
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

/* SIGNAL-SAFE: the executable mapping containing `a`, or NULL. */
static const struct code *code_find(const struct maps_table *t, uintptr_t a)
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

/* SIGNAL-SAFE: the word at `a` into *out, or false when unreadable.
 * no_sanitize_address: a CFA-relative read may fall in an ASan redzone of
 * a stack frame; it is in bounds, and ASan must not stop it. */
__attribute__((no_sanitize_address)) static inline bool
read_word(struct reader *r, uintptr_t a, uintptr_t *out)
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
    if (sp >= own_lo && sp < own_hi) {
        r->lo = sp;
        r->hi = own_hi;
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
    return code_find(t, at);
}

static bool find_frame_record(const struct maps_table *t,
                              const struct code *c, struct reader *r,
                              struct regs *regs);

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
        if (fp_unknown && regs.fp == 0 && !find_frame_record(t, c, r, &regs))
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
    if (sp >= own_lo && sp < own_hi)
        return sp - own_lo;
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
            c = code_find(t, at);
        if (!c)
            return t->gen;
        if (c->since > gen)
            gen = c->since;
    }
    return gen;
}

/* Signal-safe too, though only ordinary calls use it. */
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

/* How far above SP a frame's record is looked for. */
#define RECORD_SCAN_BYTES 2048

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

/* SIGNAL-SAFE: while the frame pointer of a thread walked from outside is
 * unknown (0: no frame restored it from the stack yet), a frame that needs
 * it has it found instead: x86-64 and AArch64 frame-pointer code keeps the
 * record {caller's FP, return address} the FP points at between the SP
 * and the CFA, so the first record above SP that checks out is taken, and
 * its address is the FP.  A record an earlier, deeper call left in what
 * is now this frame's locals checks out too when it still leads back to
 * live frames: the walk then shows one stale frame (seen: a clock_gettime
 * between a function and its caller), never a crash, and the frames above
 * it are right.  Returns false when none does. */
static bool find_frame_record(const struct maps_table *t,
                              const struct code *c, struct reader *r,
                              struct regs *regs)
{
    if (!t || !frame_needs_fp(c, regs))
        return true;
    struct regs caller;
    for (uintptr_t a = regs->sp; a < regs->sp + RECORD_SCAN_BYTES; a += 8)
        if (is_frame_record(t, r, a, &caller)) {
            regs->fp = a;
            return true;
        }
    return false;
}

/* Most bytes of another thread's stack copied before its walk goes on a
 * chunk at a time: most stacks' frames fit. */
#define BLOCKED_COPY 8192

/* Signal-safe too, though only the census calls it, from its collector:
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
