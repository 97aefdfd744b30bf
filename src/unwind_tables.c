/*
 * unwind_tables.c -- the unwinder's store: the registry of executable
 * mappings and the unwind tables the walk (unwind_walk.c) reads, their
 * refresh, and the generations that name the mappings gone since.  The
 * writer side: it allocates and locks, and never runs in a handler.
 *
 * Choice: DWARF CFI compiled ahead of time (unwind_cfi.c, the parse step)
 * and applied by a walker that calls nothing (unwind_walk.c).  Unwinding
 * in a profiling signal handler is where profilers deadlock or crash their
 * host (gperftools issues 775,
 * 1188, 1210, 1294, 1583; tikv#9765): libgcc's and libunwind's local
 * unwinders find .eh_frame through dl_iterate_phdr, which takes the loader
 * lock that a dlopen/dlclose interrupted by the signal may hold, and
 * interpret CFA programs as they go.  Frame pointers alone lose callers of
 * every function built without them (Debian's glibc, zlib, libstdc++, any
 * plain -O2 x86-64 code).  So a writer that may block (the library's
 * load, the sampler's collector thread -- every 100 ms, and at the next
 * 20 ms tick after the loader's counters show a dlopen or dlclose -- the
 * census, crash-handler installation, heap snapshots; never a handler)
 * reads /proc/self/maps (procmaps.h) and, for each executable mapping,
 * the object's CFI from its file (the vDSO from memory), and publishes
 * sorted immutable tables; the walk is binary searches and bounded loads.
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
#include "unwind_int.h"
#include "atfork.h"
#include "loader.h"
#include "procmaps.h"
#include "util.h"
#include "warn.h"
#include "upper_calls.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
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

/* SIGNAL-SAFE */
const char *unwind_object_path(const struct object *o)
{
    return o->path;
}

static struct maps_table tables[2];
_Atomic(struct maps_table *) unwind_current; /* unwind_int.h */

/* ---- Writer side ------------------------------------------------------ */

static pthread_mutex_t writer_mu ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;
static struct object *objects; /* under writer_mu */

/* The loader's counts as of the last refresh (loader.h). */
static loader_counts refreshed_counts; /* under writer_mu */

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
    if (ARRAY_RESERVE(t->code, t->ncode, t->capcode, 1) != 0)
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

/* procmaps_foreach's callback: lists a line's region in the table at
 * `arg`: a read+write one among those a walk may read the stack in, an
 * executable one among the code. */
static int add_mapping(const procmaps_line *m, const char *text, size_t len,
                       void *arg)
{
    struct maps_table *t = arg;
    (void)text;
    (void)len;
    if (m->perms[0] == 'r' && m->perms[1] == 'w') {
        if (ARRAY_RESERVE(t->stack, t->nstack, t->capstack, 1) != 0)
            return -ENOMEM;
        t->stack[t->nstack++] = (struct region){m->lo, m->hi};
        if (procmaps_path_is(m, "[stack]"))
            t->main_stack = (struct region){m->lo, m->hi};
    }
    if (m->perms[2] != 'x')
        return 0;
    return add_code(t, m->lo, m->hi, m->offset, m->path,
                    makedev(m->dev_major, m->dev_minor), m->inode);
}

/* Fills `t` from /proc/self/maps, whose lines are sorted by address. */
static int read_maps(struct maps_table *t)
{
    t->nstack = 0;
    t->main_stack = (struct region){0, 0};
    return procmaps_foreach(add_mapping, t);
}

/* Waits for walks that loaded `t` before it stopped being current. */
static void wait_no_readers(struct maps_table *t)
{
    while (atomic_load(&t->readers) != 0) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
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
    uint64_t gen = atomic_load(&unwind_current) ? last_gen : 0;
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

/* Whether the mapping listed now at pc was listed already in generation
 * `gen`.  Under writer_mu, so the current table stays. */
static bool listed_since(uint64_t gen, uintptr_t pc)
{
    const struct maps_table *t = atomic_load(&unwind_current);
    const struct code *c = t ? unwind_code_find(t, pc) : NULL;
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
    struct maps_table *cur = atomic_load(&unwind_current);
    struct maps_table *next = cur == &tables[0] ? &tables[1] : &tables[0];
    wait_no_readers(next);
    release_objects(next);
    int rc = read_maps(next);
    if (rc == 0) {
        track_generation(cur, next);
        prune_gone();
        atomic_store(&unwind_current, next);
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
 * dropped there; sampler.c).  Each is written only if it is not already
 * zero (atfork.h): npins counts the pins, under writer_mu. */
ATFORK_CHILD static void writer_unlock_in_child(void)
{
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++)
        if (atomic_load(&tables[i].readers) != 0)
            atomic_store(&tables[i].readers, 0);
    if (atomic_load(&npins) != 0) {
        memset(pins, 0, sizeof pins);
        atomic_store(&npins, 0);
    }
    atfork_mutex_release(&writer_mu);
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

/* The bounds the walk reads the calling thread's stack directly in
 * (unwind_int.h). */
void unwind_learn_own_stack(void)
{
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (unwind_own_hi || pthread_getattr_np(pthread_self(), &attr) != 0)
        return;
    if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
        unwind_own_lo = (uintptr_t)addr;
        unwind_own_hi = (uintptr_t)addr + size;
    }
    pthread_attr_destroy(&attr);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(unwind_gone_at);
UPPER_CALLS(unwind_pin_generation);
UPPER_CALLS(unwind_unpin_generation);
