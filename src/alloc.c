/*
 * alloc.c -- forwarding to the program's own allocator (alloc.h).
 *
 * Every entry comes from the library that defines the next malloc in
 * symbol lookup order -- glibc's, jemalloc's, tcmalloc's, mimalloc's -- or
 * the global one when it is not cpprof's, so linking or preloading cpprof
 * never changes the program's allocator, and what that library lacks is
 * built from what it has (jemalloc has no pvalloc), never taken from
 * another allocator, which could not free its blocks.  The lookup happens
 * on the first call, when dlsym may itself allocate: those allocations
 * come from a static bootstrap arena, recognised by address ever after.
 * Under a sanitizer the next allocator is its runtime's, known at link
 * time.
 */
#define _GNU_SOURCE
#include "alloc.h"
#include "warn.h"
#include "upper_calls.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef CPPROF_SANITIZER_INTERCEPTS
/* Under ASan or TSan (--enable-asan-ubsan, --enable-tsan) the sanitizer's
 * allocator owns the heap and its runtime comes first: its interceptors,
 * which every sanitizer runtime exports under these names, are the next
 * allocator, known at link time. */
extern void *__interceptor_malloc(size_t);
extern void __interceptor_free(void *);
extern void *__interceptor_calloc(size_t, size_t);
extern void *__interceptor_realloc(void *, size_t);
extern int __interceptor_posix_memalign(void **, size_t, size_t);
extern void *__interceptor_aligned_alloc(size_t, size_t);
extern void *__interceptor_memalign(size_t, size_t);
extern void *__interceptor_valloc(size_t);
extern void *__interceptor_pvalloc(size_t);
extern size_t __interceptor_malloc_usable_size(void *);
struct allocator alloc_next_table = {
    __interceptor_malloc,         __interceptor_free,
    __interceptor_calloc,         __interceptor_realloc,
    __interceptor_posix_memalign, __interceptor_aligned_alloc,
    __interceptor_memalign,       __interceptor_valloc,
    __interceptor_pvalloc,        __interceptor_malloc_usable_size};
atomic_int alloc_next_state = ALLOC_NEXT_READY;
#else
struct allocator alloc_next_table;
atomic_int alloc_next_state = ALLOC_NEXT_UNKNOWN;
#endif

/* ---- Bootstrap arena ---------------------------------------------------- */

_Alignas(ALLOC_BOOT_MAX_ALIGN) unsigned char alloc_boot_arena[ALLOC_BOOT_BYTES];
static atomic_size_t alloc_boot_used;

void *alloc_boot(size_t align, size_t n)
{
    if (align < ALLOC_BOOT_ALIGN)
        align = ALLOC_BOOT_ALIGN;
    size_t used = atomic_load(&alloc_boot_used), start;
    do {
        start = (used + sizeof(size_t) + align - 1) & ~(align - 1);
        if (start > ALLOC_BOOT_BYTES || n > ALLOC_BOOT_BYTES - start) {
            errno = ENOMEM;
            return NULL;
        }
    } while (
        !atomic_compare_exchange_weak(&alloc_boot_used, &used, start + n));
    ((size_t *)(alloc_boot_arena + start))[-1] = n;
    return alloc_boot_arena + start;
}

/* ---- Shims for what the next allocator lacks ---------------------------- */

static void *calloc_from_malloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = alloc_next_table.malloc(total);
    return p ? memset(p, 0, total) : NULL;
}

static void *realloc_missing(void *p, size_t n)
{
    (void)p, (void)n;
    errno = ENOMEM; /* p stays valid, as after any failed realloc */
    return NULL;
}

static int posix_memalign_from_memalign(void **out, size_t align, size_t n)
{
    void *p = alloc_next_table.memalign(align, n);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

static void *memalign_from_posix_memalign(size_t align, size_t n)
{
    void *p;
    if (align < sizeof(void *))
        align = sizeof(void *);
    int rc = alloc_next_table.posix_memalign(&p, align, n);
    if (rc != 0) {
        errno = rc;
        return NULL;
    }
    return p;
}

static void *memalign_missing(size_t align, size_t n)
{
    (void)align, (void)n;
    errno = ENOMEM;
    return NULL;
}

static void *valloc_from_memalign(size_t n)
{
    return alloc_next_table.memalign((size_t)sysconf(_SC_PAGESIZE), n);
}

static void *pvalloc_from_memalign(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (n > SIZE_MAX - page) {
        errno = ENOMEM;
        return NULL;
    }
    return alloc_next_table.memalign(page,
                                     n ? (n + page - 1) & ~(page - 1) : page);
}

/* Without malloc_usable_size nothing may be said about a block. */
static size_t usable_size_missing(void *p)
{
    (void)p;
    return 0;
}

/* ---- Finding it ----------------------------------------------------------- */

static const void *object_of(const void *f)
{
    Dl_info info;
    return f && dladdr(f, &info) ? info.dli_fbase : NULL;
}

/* The global definition of `name`, or NULL where there is none to be
 * seen: in a non-PIE executable that takes the function's address (Debian's
 * python3.11 takes malloc's), the global symbol is the executable's own PLT
 * stub, its canonical address, which jumps to whatever definition lookup
 * bound, ours when we interpose.  Forwarding to that stub would call
 * ourselves until the stack ran out.  The stub's symbol is undefined
 * (SHN_UNDEF) with the stub's address as its value. */
static void *global_definition(const char *name)
{
    void *f = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!f || !dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT))
        return f;
    return sym && sym->st_shndx == SHN_UNDEF ? NULL : f;
}

/* The definition of `name` in the object `base`: the global one, or else
 * the next after ours (the global one is ours when we interpose). */
static void *defined_in(const void *base, const char *name)
{
    void *f = global_definition(name);
    if (f && object_of(f) == base)
        return f;
    f = dlsym(RTLD_NEXT, name);
    return object_of(f) == base ? f : NULL;
}

/* Fills the next allocator from the object whose malloc the program would call
 * without cpprof: the global malloc's when it is not ours (an allocator
 * before us in lookup order, whose missing functions still reach ours),
 * else the next malloc after ours.  Without one it says so on stderr and
 * stops the program: with no allocator to forward to, nothing could run. */
static void lookup_next(void)
{
    const void *self = object_of((const void *)lookup_next);
    void *m = global_definition("malloc");
    if (!m || object_of(m) == self)
        m = dlsym(RTLD_NEXT, "malloc");
    const void *base = object_of(m);
    if (!base || !defined_in(base, "free")) {
        static const char msg[] = "cpprof: found no malloc and free to "
                                  "forward to\n";
        warn_write(msg, sizeof msg - 1);
        abort();
    }
    struct allocator next;
    next.malloc = (void *(*)(size_t))m;
    next.free = (void (*)(void *))defined_in(base, "free");
    next.calloc = (void *(*)(size_t, size_t))defined_in(base, "calloc");
    next.realloc = (void *(*)(void *, size_t))defined_in(base, "realloc");
    next.posix_memalign = (int (*)(void **, size_t, size_t))defined_in(
        base, "posix_memalign");
    next.aligned_alloc = (void *(*)(size_t, size_t))defined_in(
        base, "aligned_alloc");
    next.memalign = (void *(*)(size_t, size_t))defined_in(base, "memalign");
    next.valloc = (void *(*)(size_t))defined_in(base, "valloc");
    next.pvalloc = (void *(*)(size_t))defined_in(base, "pvalloc");
    next.usable_size = (size_t (*)(void *))defined_in(base,
                                                      "malloc_usable_size");
    if (!next.calloc)
        next.calloc = calloc_from_malloc;
    if (!next.realloc)
        next.realloc = realloc_missing;
    if (!next.memalign)
        next.memalign = next.posix_memalign ? memalign_from_posix_memalign
                        : next.aligned_alloc ? next.aligned_alloc
                                             : memalign_missing;
    if (!next.posix_memalign)
        next.posix_memalign = posix_memalign_from_memalign;
    if (!next.aligned_alloc)
        next.aligned_alloc = next.memalign;
    if (!next.valloc)
        next.valloc = valloc_from_memalign;
    if (!next.pvalloc)
        next.pvalloc = pvalloc_from_memalign;
    if (!next.usable_size)
        next.usable_size = usable_size_missing;
    alloc_next_table = next;
}

/* The first caller looks up; the others (and the first, from inside
 * dlsym) get NULL until it is done (alloc.h). */
__attribute__((noinline)) const struct allocator *alloc_next_slow(void)
{
    int state = ALLOC_NEXT_UNKNOWN;
    if (!atomic_compare_exchange_strong(&alloc_next_state, &state,
                                        ALLOC_NEXT_RESOLVING))
        return state == ALLOC_NEXT_READY ? &alloc_next_table : NULL;
    lookup_next();
    atomic_store_explicit(&alloc_next_state, ALLOC_NEXT_READY,
                          memory_order_release);
    return &alloc_next_table;
}

void *alloc_boot_aligned(size_t align, size_t n)
{
    if (align > ALLOC_BOOT_MAX_ALIGN || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return alloc_boot(align, n);
}

void *alloc_real_calloc(size_t n, size_t size)
{
    const struct allocator *a = alloc_next();
    size_t total;
    if (a)
        return a->calloc(n, size);
    return __builtin_mul_overflow(n, size, &total)
               ? NULL
               : alloc_boot(ALLOC_BOOT_ALIGN, total); /* zero, never reused */
}

void alloc_real_free(void *p)
{
    const struct allocator *a = alloc_is_boot(p) ? NULL : alloc_next();
    if (a && p)
        a->free(p);
}

/* The first allocator function the program does not reach through us,
 * with the object that defines it instead, or NULL.  Such a program
 * allocates elsewhere (an allocator loaded or linked before cpprof, or
 * built into the executable): what we saw would be part of its heap at
 * best, and a block of ours could reach its free. */
const char *alloc_not_ours(const char **where)
{
    static const char *const fns[] = {
        "malloc",         "free",     "calloc",           "realloc",
        "posix_memalign", "memalign", "aligned_alloc",    "valloc",
        "pvalloc",        "reallocarray", "malloc_usable_size"};
    const void *self = object_of((const void *)alloc_not_ours);
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        /* An executable's PLT stub (global_definition) is taken as
         * reaching us: which definition it is bound to cannot be read
         * from the symbol (README, "Allocators"). */
        void *global = global_definition(fns[i]);
        if (!global || object_of(global) == self)
            continue;
        Dl_info info;
        *where = global && dladdr(global, &info) && info.dli_fname &&
                         *info.dli_fname
                     ? info.dli_fname
                     : "the program itself";
        return fns[i];
    }
    return NULL;
}

/* An allocator's operator new is its own malloc, never ours; libstdc++'s
 * calls malloc.  Told apart by whether its object defines malloc too. */
static bool new_is_allocators(void *f)
{
    const void *base = object_of(f);
    return base && defined_in(base, "malloc") != NULL;
}

const char *alloc_unseen(const char **where)
{
    static const struct {
        const char *symbol, *what;
        bool (*bypasses)(void *);
    } apis[] = {
        {"mallocx", "jemalloc's mallocx, rallocx, xallocx, sdallocx and "
                    "dallocx", NULL},
        {"tc_malloc", "tcmalloc's tc_* functions and sized delete", NULL},
        {"mi_malloc", "mimalloc's mi_* functions", NULL},
        {"_Znwm", "C++ operator new and delete", new_is_allocators},
    };
    for (size_t i = 0; i < sizeof apis / sizeof apis[0]; i++) {
        void *f = global_definition(apis[i].symbol);
        Dl_info info;
        if (!f || (apis[i].bypasses && !apis[i].bypasses(f)) ||
            !dladdr(f, &info))
            continue;
        *where = info.dli_fname && *info.dli_fname ? info.dli_fname
                                                   : "the program itself";
        return apis[i].what;
    }
    return NULL;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(alloc_next_slow);
