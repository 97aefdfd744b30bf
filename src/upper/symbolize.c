/*
 * symbolize.c -- program counters to function, file, line and inline
 * frames, with elfutils' libdwfl on our own process.
 *
 * Shape: tables decoded once per compilation unit (symbolize_dwarf.c:
 * inline chains and line rows) and per module (symbolize_symtab.c:
 * symbols), so that each address is a few binary searches instead of a
 * walk of its unit or of its symbol table; and a cache from pc to result,
 * since profiles see the same addresses again and again.  The tables own
 * every string they answer with, and remember the modules they came from
 * and the units' address ranges, so a lookup the cache misses is answered
 * from them when they cover its address; libdw is needed only for a unit
 * or module not decoded yet.  Then a Dwfl, reported from /proc/self/maps,
 * is opened for the rest of the session and closed at its end, and
 * malloc_trim() gives the pages libdw freed back to the system (in a
 * process of at most 512 MB: give_back_pages).  libdw's
 * state is large for what it serves (the pages of every debug file it
 * touched, each compressed debug section inflated whole: see
 * symbolize_debuginfo.h), and the host would pay for it in RSS for as
 * long as it is kept; reopening costs under a millisecond for an ordinary
 * object, and for glibc's compressed debug file too once its inflated
 * copy is kept (37 ms to inflate: symbolize_debuginfo.h), in the sessions
 * that meet a new unit only.  The cache and the tables are emptied
 * between sessions once they hold more than CACHE_KEPT_ENTRIES or
 * symbolize_max_kb (the memory is the host's); all of it goes after
 * symbolize_idle_seconds without a session (symbolize_release_if_idle).
 * All is refreshed when the set of executable mappings changes
 * (dlopen, dlclose): symbolize_begin() compares the mappings with those
 * of the last session, reading /proc/self/maps only when the loader's
 * counts of objects loaded and unloaded moved (loader.h); the tables are
 * known by load addresses, which another object may take.  Checking at
 * the start of a session is enough: every pc a session looks up was
 * collected before it began, so its module was mapped by then (or is gone
 * for good).
 *
 * Strings in results point into the decoded tables (names, files) or are
 * made up here (demangled, "module+0xoffset" when there is no symbol, and
 * source paths made absolute with the compile unit's directory, as Go's
 * are) and kept with the cache: tables are therefore never flushed
 * without the cache.
 *
 * A PC of an object dlclosed since its sample was taken (unwind.h's
 * "Generations"; another object may be mapped at its address now) is
 * looked up in that object's file alone, reported at an old address in a
 * Dwfl of its own, one per file whatever the number of places it was
 * loaded at (symbolize_gone_pc), only while the file is still the
 * one that was mapped (device and inode); otherwise its frame says
 * "[unloaded NAME]+0xADDR".  Its function and line come from libdw
 * directly, never through the decoded tables or the cache, which are
 * keyed by address (so no inline frames there); those Dwfls end with the
 * session, as the process's does.
 *
 * C++ names are demangled with __cxa_demangle when the process has it (any
 * C++ program links libstdc++); we do not link libstdc++ for it.
 */
#define _GNU_SOURCE
#include "symbolize.h"
#include "own.h"
#include "config.h"
#include "loader.h"
#include "procmaps.h"
#include "symbolize_debuginfo.h"
#include "symbolize_dwarf.h"
#include "symbolize_symtab.h"
#include "util.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Deeper inline chains than this are cut at the innermost frames. */
#define MAX_INLINE_FRAMES 32

/* Distinct pcs the cache keeps from one session to the next.  A profile
 * sees a few thousand; a client of /debug/pprof/symbol may ask for any
 * number, and each request would otherwise grow the host's memory for
 * good.  Past this many the next session starts with an empty cache. */
#define CACHE_KEPT_ENTRIES 16384

struct mapping {
    symbolize_mapping pub; /* file and build_id point at the owned copies */
    unsigned long inode;
    char *file, *build_id;
};

/* A module a lookup met, remembered (with the tables) so that a later
 * session can answer from the tables alone. */
struct module {
    uintptr_t low, high; /* libdw's load address and end */
    char *name;
    bool no_dwarf; /* libdw found no DWARF for it: symbols only */
};

struct entry {
    uintptr_t pc;
    symbolize_result r;
    symbolize_frame frames[];
};

/* An object no longer mapped (symbolize_gone_pc): its file reported alone
 * in a Dwfl of its own at the address it had when first met this session
 * (key.bias), since another object may be mapped there now; a pc from
 * another of its load addresses is moved to that one. */
struct gone_module {
    symbolize_gone key; /* key.file is `file` */
    char *file, *build_id;
    Dwfl *dwfl; /* NULL: the file is gone or is another one now */
    Dwfl_Module *mod;
};

/* The lines of /proc/self/maps that libdwfl reports modules from (the
 * files' mappings: copy_object_line), read with the executable mappings,
 * and the vDSO's range. */
struct objects {
    char *text;
    size_t len;
    uintptr_t vdso_lo, vdso_hi;
};

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static struct {
    pthread_mutex_t lock;
    Dwfl *dwfl; /* open during a session that needed libdw, else NULL */
    bool dwfl_failed; /* libdw could not report the process this session */
    bool maps_known; /* maps is the view of the loader's counts below */
    struct mapping *maps;
    size_t nmaps;
    struct objects objects; /* read with maps, for libdwfl */
    loader_counts counts; /* the loader's, when maps was read */
    struct entry **entries; /* the cache, in order of insertion */
    size_t nentries, capentries;
    struct hashindex index; /* of the entries, by pc */
    struct module *modules; /* those libdw reported and a lookup used */
    size_t nmodules, capmodules;
    char **owned; /* names made up here, freed with the cache */
    size_t nowned, capowned;
    struct gone_module *gone; /* dropped with the modules */
    size_t ngone, capgone;
    struct entry **gone_results; /* not cached; freed with the cache */
    size_t ngone_results, capgone_results;
    size_t cache_bytes;      /* entries, index and owned names */
    int64_t last_used_ns; /* end of the last session, CLOCK_MONOTONIC */
    demangle_fn demangle;
    bool demangle_looked_up;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Bytes of tables, cache and the mappings kept, as of the last session's
 * end: read without the lock by the index page and /metrics. */
static atomic_size_t own_bytes;

/* The mappings kept between sessions: the executable ones and the text of
 * /proc/self/maps that libdwfl's report reads (a program with a thousand
 * threads has two thousand more lines there). */
static size_t mappings_bytes(void)
{
    size_t n = S.nmaps * sizeof *S.maps + S.objects.len;
    for (size_t i = 0; i < S.nmaps; i++)
        n += (S.maps[i].file ? strlen(S.maps[i].file) + 1 : 0) +
             (S.maps[i].build_id ? strlen(S.maps[i].build_id) + 1 : 0);
    return n;
}

static const symbolize_frame unknown_frame = {"unknown", "unknown", "", 0, 0};
static const symbolize_result unknown_result = {&unknown_frame, 1, -1, 0,
                                                false, false, false, false};

/* ---- Mappings ----------------------------------------------------------- */

/* The executable mappings read so far (read_mappings), and the stream
 * the objects' lines go to. */
struct exec_mappings {
    struct mapping *maps;
    size_t n, cap;
    FILE *objects;
    struct objects *o;
};

static void free_mappings(struct mapping *maps, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(maps[i].file);
        free(maps[i].build_id);
    }
    free(maps);
}

/* Whether a line of /proc/self/maps is libelf's own reading of a file
 * (libdw opens modules' files with ELF_C_READ_MMAP: private, writable, from
 * offset 0) or the unwinder's (unwind_tables.c maps object files the same
 * way): never a segment the loader mapped.  dwfl_linux_proc_report takes
 * consecutive lines of one file for one module, so such a mapping placed
 * next to its loaded object (mmap hands out addresses top-down, just
 * below the newest objects) gave the module a wrong start and bias after
 * the next dlopen or dlclose: a plugin symbolized once showed as
 * "plugin.so+0x6133" without names (test/dlclose_reuse). */
static bool is_file_reading(const procmaps_line *m)
{
    return m->path_len > 0 && m->path[0] == '/' && m->offset == 0 &&
           memcmp(m->perms, "rw-p", 4) == 0;
}

/* procmaps_foreach's callback: copies a file's line unless it is the
 * file's reading, and notes the vDSO's.  libdwfl passes over every line
 * without a path, so they are not copied: a process of 1,000 threads has
 * 2,000 of them (each thread's stack and guard), which libdwfl would
 * scan for nothing in every session that opens it. */
static int copy_object_line(const procmaps_line *m, const char *text,
                            size_t len, struct exec_mappings *a)
{
    if (procmaps_path_is(m, "[vdso]")) {
        a->o->vdso_lo = m->lo;
        a->o->vdso_hi = m->hi;
    }
    if (m->path_len > 0 && m->path[0] == '/' && !is_file_reading(m) &&
        (fwrite(text, 1, len, a->objects) != len ||
         fputc('\n', a->objects) == EOF))
        return -EIO;
    return 0;
}

/* procmaps_foreach's callback: keeps an executable line as a mapping,
 * and a file's line for libdwfl. */
static int add_mapping(const procmaps_line *l, const char *text, size_t len,
                       void *arg)
{
    struct exec_mappings *a = arg;
    int rc = copy_object_line(l, text, len, a);
    if (rc != 0 || l->perms[2] != 'x')
        return rc;
    if (ARRAY_RESERVE(a->maps, a->n, a->cap, 1) != 0)
        return -ENOMEM;
    char *file = strndup(l->path, l->path_len);
    if (!file)
        return -ENOMEM;
    struct mapping *m = &a->maps[a->n++];
    *m = (struct mapping){.inode = l->inode, .file = file};
    m->pub.start = l->lo;
    m->pub.limit = l->hi;
    m->pub.offset = l->offset;
    return 0;
}

/* The executable mappings of the process now, in address order, and the
 * lines libdwfl will report its modules from: one read of
 * /proc/self/maps, whose text grows with every thread (its stack and
 * guard), kept until the loader's counts move. */
static int read_mappings(struct mapping **out, size_t *count,
                         struct objects *o)
{
    *o = (struct objects){0};
    struct exec_mappings a = {NULL, 0, 0, open_memstream(&o->text, &o->len),
                              o};
    int rc = a.objects ? procmaps_foreach(add_mapping, &a) : -ENOMEM;
    if (a.objects && fclose(a.objects) != 0 && rc == 0)
        rc = -EIO;
    if (rc != 0) {
        free_mappings(a.maps, a.n);
        free(o->text);
        *o = (struct objects){0};
        return -1;
    }
    *out = a.maps;
    *count = a.n;
    return 0;
}

static bool same_mappings(const struct mapping *a, size_t na,
                          const struct mapping *b, size_t nb)
{
    if (na != nb)
        return false;
    for (size_t i = 0; i < na; i++)
        if (a[i].pub.start != b[i].pub.start ||
            a[i].pub.limit != b[i].pub.limit ||
            a[i].pub.offset != b[i].pub.offset ||
            a[i].inode != b[i].inode || strcmp(a[i].file, b[i].file) != 0)
            return false;
    return true;
}

/* Index of the mapping holding pc, or -1. */
static int mapping_index(uintptr_t pc)
{
    size_t lo = 0, hi = S.nmaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pc < S.maps[mid].pub.start)
            hi = mid;
        else if (pc >= S.maps[mid].pub.limit)
            lo = mid + 1;
        else
            return (int)mid;
    }
    return -1;
}

/* ---- Modules ------------------------------------------------------------ */

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = symdi_find_elf,             /* inflated copies */
    .find_debuginfo = symdi_find_debuginfo, /* never debuginfod */
    .debuginfo_path = &debuginfo_path,
};


/* Opens libdw on the process's modules, when the session has not yet:
 * from the mappings of loaded objects only (S.objects), plus the
 * vDSO under the name libdwfl's own report gives it, which its find_elf
 * reads from our memory.  S.dwfl stays NULL when libdw cannot report them
 * (lookups then find nothing but made-up names). */
static void open_modules(void)
{
    if (S.dwfl || S.dwfl_failed)
        return;
    S.dwfl = dwfl_begin(&callbacks);
    S.dwfl_failed = !S.dwfl;
    if (!S.dwfl)
        return;
    char vdso[32];
    const struct objects *o = &S.objects;
    FILE *maps = o->text ? fmemopen(o->text, o->len, "r") : NULL;
    dwfl_report_begin(S.dwfl);
    int rc = maps ? dwfl_linux_proc_maps_report(S.dwfl, maps) : -1;
    if (rc == 0)
        fclose(maps); /* a failed report: older libdwfl has closed it */
    snprintf(vdso, sizeof vdso, "[vdso: %d]", (int)getpid());
    if (rc == 0 && o->vdso_hi &&
        !dwfl_report_module(S.dwfl, vdso, o->vdso_lo, o->vdso_hi))
        rc = -1;
    if (dwfl_report_end(S.dwfl, NULL, NULL) != 0 || rc != 0) {
        dwfl_end(S.dwfl);
        S.dwfl = NULL;
        S.dwfl_failed = true;
    }
}

/* Processes this large are not trimmed (see give_back_pages). */
#define TRIM_MAX_RSS_BYTES (512ul << 20)

/* Has glibc give back the pages of what the symbolizer just freed (libdw
 * frees much in small blocks, which malloc keeps): 6.6 MB of the C++
 * benchmark's RSS, half the demo's.  malloc_trim() walks the free lists of
 * every arena, the program's too, holding each arena's lock: 10-60 ms per
 * GB of fragmented heap, measured.  In a process past TRIM_MAX_RSS_BYTES
 * a pause of its allocations matters more than a few MB: not done. */
static void give_back_pages(void)
{
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f)
        return;
    if (fscanf(f, "%*s %ld", &pages) == 1 &&
        (unsigned long)pages * (unsigned long)sysconf(_SC_PAGESIZE) <=
            TRIM_MAX_RSS_BYTES)
        malloc_trim(0);
    fclose(f);
}

/* libdw's state goes at the end of the session that opened it: the
 * tables hold what later sessions need. */
static void close_modules(void)
{
    S.dwfl_failed = false;
    if (!S.dwfl)
        return;
    dwfl_end(S.dwfl);
    S.dwfl = NULL;
    give_back_pages();
}

/* The module holding pc, or NULL.  dwfl_addrmodule() alone answers some
 * module for an address past every one (as [vsyscall] is). */
static Dwfl_Module *module_at(uintptr_t pc)
{
    open_modules();
    Dwfl_Module *mod = S.dwfl ? dwfl_addrmodule(S.dwfl, pc) : NULL;
    Dwarf_Addr low, high;
    if (mod && dwfl_module_info(mod, NULL, &low, &high, NULL, NULL, NULL,
                                NULL) &&
        (pc < low || pc >= high))
        return NULL;
    return mod;
}

/* The GNU build id of the module at m's start, in hex, or "".  libdw
 * knows it once the module's ELF file is open, which it does lazily. */
static char *build_id_of(const struct mapping *m)
{
    /* Anonymous code (a JIT's) is no module's, whatever module's span it
     * lies in (in_file_code). */
    Dwfl_Module *mod = m->file[0] ? module_at(m->pub.start) : NULL;
    const unsigned char *bits;
    GElf_Addr vaddr;
    Dwarf_Addr bias;
    int n = mod && dwfl_module_getelf(mod, &bias)
                ? dwfl_module_build_id(mod, &bits, &vaddr)
                : 0;
    char *hex = malloc(n > 0 ? 2 * (size_t)n + 1 : 1);
    if (!hex)
        return NULL;
    hex[0] = '\0';
    for (int i = 0; i < n; i++)
        sprintf(hex + 2 * i, "%02x", bits[i]);
    return hex;
}

static void publish_mappings(void)
{
    for (size_t i = 0; i < S.nmaps; i++) {
        struct mapping *m = &S.maps[i];
        m->build_id = build_id_of(m);
        m->pub.file = m->file;
        m->pub.build_id = m->build_id ? m->build_id : "";
    }
}

/* ---- Modules met -------------------------------------------------------- */

static void forget_modules(void)
{
    for (size_t i = 0; i < S.nmodules; i++)
        free(S.modules[i].name);
    free(S.modules);
    S.modules = NULL;
    S.nmodules = S.capmodules = 0;
}

/* The module met earlier that holds pc, or NULL. */
static const struct module *known_module(uintptr_t pc)
{
    for (size_t i = 0; i < S.nmodules; i++)
        if (S.modules[i].low <= pc && pc < S.modules[i].high)
            return &S.modules[i];
    return NULL;
}

/* mod's record, made on its first lookup; NULL when out of memory. */
static const struct module *remember_module(Dwfl_Module *mod)
{
    Dwarf_Addr low = 0, high = 0;
    const char *name =
        dwfl_module_info(mod, NULL, &low, &high, NULL, NULL, NULL, NULL);
    const struct module *known = known_module((uintptr_t)low);
    if (known && known->low == (uintptr_t)low)
        return known;
    if (ARRAY_RESERVE(S.modules, S.nmodules, S.capmodules, 1) != 0)
        return NULL;
    char *copy = name ? strdup(name) : NULL;
    if (name && !copy)
        return NULL;
    Dwarf_Addr bias;
    S.modules[S.nmodules] =
        (struct module){(uintptr_t)low, (uintptr_t)high, copy,
                        dwfl_module_getdwarf(mod, &bias) == NULL};
    return &S.modules[S.nmodules++];
}

/* ---- Cache -------------------------------------------------------------- */

static void flush_cache(void)
{
    for (size_t i = 0; i < S.nentries; i++)
        free(S.entries[i]);
    free(S.entries);
    S.entries = NULL;
    S.nentries = S.capentries = S.cache_bytes = 0;
    hashindex_free(&S.index);
    for (size_t i = 0; i < S.nowned; i++)
        free(S.owned[i]);
    free(S.owned);
    S.owned = NULL;
    S.nowned = S.capowned = 0;
    for (size_t i = 0; i < S.ngone_results; i++)
        free(S.gone_results[i]);
    free(S.gone_results);
    S.gone_results = NULL;
    S.ngone_results = S.capgone_results = 0;
}

static bool same_pc(const void *ctx, size_t item, const void *key)
{
    (void)ctx;
    return S.entries[item]->pc == *(const uintptr_t *)key;
}

/* The index's slot of pc's entry, or the empty one where it goes; NULL
 * when out of memory. */
static struct hashindex_slot *cache_slot(uintptr_t pc, uint64_t hash)
{
    size_t before = S.index.n_slots;
    struct hashindex_slot *slot =
        hashindex_find(&S.index, hash, same_pc, NULL, &pc);
    S.cache_bytes += (S.index.n_slots - before) * sizeof *S.index.slots;
    return slot;
}

/* Puts e in the empty slot cache_slot gave. */
static int cache_insert(struct hashindex_slot *slot, uint64_t hash,
                        struct entry *e)
{
    size_t before = S.capentries;
    if (ARRAY_RESERVE(S.entries, S.nentries, S.capentries, 1) != 0)
        return -1;
    S.cache_bytes += (S.capentries - before) * sizeof *S.entries;
    S.entries[S.nentries] = e;
    hashindex_set(&S.index, slot, hash, S.nentries++);
    return 0;
}

/* Keeps a string made up here until the cache is flushed. */
static const char *own(char *s)
{
    if (!s)
        return NULL;
    if (ARRAY_RESERVE(S.owned, S.nowned, S.capowned, 1) != 0) {
        free(s);
        return NULL;
    }
    S.owned[S.nowned++] = s;
    S.cache_bytes += strlen(s) + 1;
    return s;
}

/* ---- Symbolizing one pc ------------------------------------------------- */

/* `file` against the compilation directory `dir`, as Go's profiles name
 * sources: absolute, with "." and ".." resolved lexically (Go's
 * filepath.Clean), so that `go tool pprof -list` finds the source from any
 * directory.  file itself when already absolute or when dir is unknown or
 * relative; a joined name is kept until the cache is flushed. */
static const char *absolute_path(const char *dir, const char *file)
{
    if (!file || file[0] == '/' || !file[0] || !dir || dir[0] != '/')
        return file;
    size_t len = strlen(dir) + strlen(file) + 2;
    char *joined = malloc(len), *out = malloc(len);
    if (!joined || !out) {
        free(joined);
        free(out);
        return file;
    }
    snprintf(joined, len, "%s/%s", dir, file);
    size_t n = 0; /* out holds "/a/b" without a trailing slash */
    char *rest;
    for (char *part = strtok_r(joined, "/", &rest); part;
         part = strtok_r(NULL, "/", &rest)) {
        if (strcmp(part, ".") == 0)
            continue;
        if (strcmp(part, "..") == 0) {
            while (n > 0 && out[--n] != '/')
                ;
            continue;
        }
        out[n++] = '/';
        size_t plen = strlen(part);
        memcpy(out + n, part, plen);
        n += plen;
    }
    if (n == 0)
        out[n++] = '/';
    out[n] = '\0';
    free(joined);
    const char *kept = own(out);
    return kept ? kept : file;
}

/* Readable name for a symbol-table name: demangled C++ when possible. */
static const char *readable_name(const char *system_name)
{
    if (strncmp(system_name, "_Z", 2) != 0)
        return system_name;
    if (!S.demangle_looked_up) {
        S.demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
        S.demangle_looked_up = true;
    }
    int status = -1;
    const char *name = S.demangle
                           ? own(S.demangle(system_name, NULL, NULL, &status))
                           : NULL;
    return status == 0 && name ? name : system_name;
}

/* "libfoo.so+0x1234" (offset from the module's load address), or the bare
 * address outside every module. */
static const char *made_up_name(const struct module *m, uintptr_t pc)
{
    char *s = NULL;
    if (m && m->name) {
        const char *slash = strrchr(m->name, '/');
        if (asprintf(&s, "%s+0x%" PRIxPTR, slash ? slash + 1 : m->name,
                     pc - m->low) < 0)
            s = NULL;
    } else if (asprintf(&s, "0x%" PRIxPTR, pc) < 0) {
        s = NULL;
    }
    const char *name = own(s);
    return name ? name : "unknown";
}

/* Name of entry idx of the unit's file table, made absolute against its
 * compilation directory, or "". */
static const char *unit_file(const symdw_unit *unit, int64_t idx)
{
    const char *name =
        absolute_path(symdw_comp_dir(unit), symdw_file(unit, idx));
    return name ? name : "";
}

/* The innermost frame's file and line, from the unit's line table. */
static void source_line(const symdw_unit *unit, Dwarf_Addr addr,
                        symbolize_frame *f)
{
    const char *file = NULL;
    int64_t line = 0;
    if (unit && symdw_line(unit, addr, &file, &line) == 0)
        file = absolute_path(symdw_comp_dir(unit), file);
    f->file = file ? file : "";
    f->line = file ? line : 0;
}

/* What one pc's frames are made of: its module, symbol and chain of
 * functions from DWARF (symbolize_dwarf.c: chain[0] the innermost inlined
 * one, the last the subprogram holding pc). */
struct lookup {
    const struct module *module; /* NULL: outside every module */
    const char *symbol;
    uintptr_t offset;
    const symdw_unit *unit; /* NULL: no DWARF for pc */
    Dwarf_Addr bias;
    symdw_frame chain[MAX_INLINE_FRAMES];
    size_t nchain;
};

/* From the tables alone, when they hold pc: its module met before, that
 * module's symbols sorted, and pc in a unit already decoded or the module
 * without DWARF.  false when libdw must be asked. */
static bool look_up_in_tables(uintptr_t pc, struct lookup *l)
{
    l->module = known_module(pc);
    l->unit = NULL;
    l->bias = 0;
    l->nchain = 0;
    if (!l->module ||
        symst_lookup_built(l->module->low, pc, &l->symbol, &l->offset) != 0)
        return false;
    if (l->module->no_dwarf)
        return true;
    l->nchain = symdw_chain_decoded(pc, l->chain, MAX_INLINE_FRAMES,
                                    &l->unit, &l->bias);
    return l->unit != NULL;
}

/* Through libdw, opened for the session if it is not yet; what it finds
 * is decoded into the tables on the way. */
static void look_up_in_libdw(uintptr_t pc, struct lookup *l)
{
    Dwfl_Module *mod = module_at(pc);
    l->module = mod ? remember_module(mod) : NULL;
    l->symbol = mod ? symst_lookup(mod, pc, &l->offset) : NULL;
    l->nchain = mod ? symdw_chain(mod, pc, l->chain, MAX_INLINE_FRAMES,
                                  &l->unit, &l->bias)
                    : 0;
}

/* Fills r (frames allocated for MAX_INLINE_FRAMES) from l.  Files and
 * lines of frames but the innermost are call sites; the innermost's come
 * from the line table.  A function DWARF leaves unnamed is the symbol
 * when outermost, else a made-up name. */
static void make_result(uintptr_t pc, const struct lookup *l,
                        symbolize_result *r, symbolize_frame *frames)
{
    *r = (symbolize_result){.frames = frames, .mapping = mapping_index(pc)};
    r->sym_offset = l->symbol ? l->offset : 0;
    for (size_t i = 0; i < l->nchain; i++)
        frames[i] = (symbolize_frame){
            .system_name = l->chain[i].system_name,
            .file = i > 0 ? unit_file(l->unit, l->chain[i].call_file) : "",
            .line = l->chain[i].call_line,
            .start_line = l->chain[i].start_line,
        };
    r->nframes = l->nchain;
    r->has_inline_frames = l->unit != NULL;
    if (r->nframes == 0) {
        frames[0] = (symbolize_frame){.system_name = l->symbol, .file = ""};
        r->nframes = 1;
    }
    symbolize_frame *outer = &frames[r->nframes - 1];
    if (!outer->system_name)
        outer->system_name = l->symbol;
    r->has_function = true;
    for (size_t i = 0; i < r->nframes; i++) {
        if (!frames[i].system_name) {
            frames[i].system_name = made_up_name(l->module, pc);
            r->has_function = false;
        }
        frames[i].name = readable_name(frames[i].system_name);
    }
    source_line(l->unit, pc - l->bias, &frames[0]);
    r->has_file = frames[0].file[0] != '\0';
    r->has_line = frames[0].line > 0;
}

/* A result in memory of its own: r with its frames copied; NULL when out
 * of memory. */
static struct entry *entry_of(uintptr_t pc, const symbolize_result *r)
{
    struct entry *e = malloc(sizeof *e + r->nframes * sizeof *r->frames);
    if (!e)
        return NULL;
    e->pc = pc;
    e->r = *r;
    e->r.frames = e->frames;
    memcpy(e->frames, r->frames, r->nframes * sizeof *r->frames);
    S.cache_bytes += sizeof *e + r->nframes * sizeof *r->frames;
    return e;
}

/* Whether pc is in a file's executable mapping, as last read.  Other
 * code -- anonymous memory a JIT wrote (V8's, the JVM's), or memory
 * mapped since the last read, which only a dlopen or dlclose prompts --
 * belongs to no module and gets no symbol.  Asking libdw anyway named it
 * after the nearest symbol of whichever object's module spanned it:
 * libdwfl makes one module of all the mappings of a file, and node maps
 * part of its own file again far above its first mapping, so node's
 * module spanned V8's code space and every JIT frame was named "_end",
 * node's last symbol. */
static bool in_file_code(uintptr_t pc)
{
    int i = mapping_index(pc);
    return i >= 0 && S.maps[i].file[0] != '\0';
}

/* One pc's lookup and frames while it is symbolized, one pc at a time
 * under S.lock: here rather than on the stack of the thread building a
 * profile (cpprof_cpu_profile_stop's caller, whose stack may be 16 KiB),
 * where they took 2.5 KiB. */
static struct lookup scratch_lookup;
static symbolize_frame scratch_frames[MAX_INLINE_FRAMES];

const symbolize_result *symbolize_pc(uintptr_t pc)
{
    /* The slot is held across the lookup, which adds to no cache. */
    uint64_t hash = hash_mix(0, pc);
    struct hashindex_slot *slot = cache_slot(pc, hash);
    if (!slot)
        return &unknown_result;
    if (slot->item)
        return &S.entries[slot->item - 1]->r;
    symbolize_frame *frames = scratch_frames;
    symbolize_result r;
    struct lookup *l = &scratch_lookup;
    *l = (struct lookup){0};
    if (in_file_code(pc) && !look_up_in_tables(pc, l))
        look_up_in_libdw(pc, l);
    make_result(pc, l, &r, frames);
    struct entry *e = entry_of(pc, &r);
    if (!e || cache_insert(slot, hash, e) != 0) {
        free(e);
        return &unknown_result;
    }
    return &e->r;
}

/* ---- Objects no longer mapped -------------------------------------------- */

/* Reports o's file alone at its old address, when it is still the file
 * that was mapped (a plugin rebuilt since is another file). */
static void report_gone(struct gone_module *g)
{
    int fd = open(g->file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return;
    if (fstat(fd, &st) != 0 || (unsigned long long)st.st_dev != g->key.dev ||
        (unsigned long long)st.st_ino != g->key.ino ||
        !(g->dwfl = dwfl_begin(&callbacks))) {
        close(fd);
        return;
    }
    char *name = NULL;
    if (asprintf(&name, "%s (unloaded)", g->file) < 0)
        name = NULL;
    dwfl_report_begin(g->dwfl);
    g->mod = name ? dwfl_report_elf(g->dwfl, name, g->file, fd, g->key.bias,
                                    false)
                  : NULL;
    free(name);
    if (!g->mod)
        close(fd); /* consumed only on success */
    if (dwfl_report_end(g->dwfl, NULL, NULL) != 0)
        g->mod = NULL;
    const unsigned char *bits;
    GElf_Addr vaddr;
    Dwarf_Addr bias;
    int n = g->mod && dwfl_module_getelf(g->mod, &bias)
                ? dwfl_module_build_id(g->mod, &bits, &vaddr)
                : 0;
    g->build_id = malloc(n > 0 ? 2 * (size_t)n + 1 : 1);
    if (g->build_id) {
        g->build_id[0] = '\0';
        for (int i = 0; i < n; i++)
            sprintf(g->build_id + 2 * i, "%02x", bits[i]);
    }
}

/* The gone object o's file's module record, reported on first use (at
 * the bias it had then); NULL when out of memory.  One per file, however
 * many places it was loaded at: a plugin loaded and unloaded thousands of
 * times would otherwise cost a Dwfl, and a read of its debug information,
 * for every place (symbolize_gone_pc moves a pc to the record's bias). */
static struct gone_module *gone_module(const symbolize_gone *o)
{
    for (size_t i = 0; i < S.ngone; i++) {
        const symbolize_gone *k = &S.gone[i].key;
        if (k->dev == o->dev && k->ino == o->ino &&
            strcmp(k->file, o->file) == 0)
            return &S.gone[i];
    }
    if (ARRAY_RESERVE(S.gone, S.ngone, S.capgone, 1) != 0)
        return NULL;
    struct gone_module *g = &S.gone[S.ngone];
    *g = (struct gone_module){.key = *o, .file = strdup(o->file)};
    if (!g->file)
        return NULL;
    g->key.file = g->file;
    S.ngone++;
    report_gone(g);
    return g;
}

/* Lets go of the gone objects' modules: with the others, after the tables
 * known by their handles are flushed. */
static void drop_gone_modules(void)
{
    for (size_t i = 0; i < S.ngone; i++) {
        if (S.gone[i].dwfl)
            dwfl_end(S.gone[i].dwfl);
        free(S.gone[i].file);
        free(S.gone[i].build_id);
    }
    free(S.gone);
    S.gone = NULL;
    S.ngone = S.capgone = 0;
}

/* "[unloaded NAME]+0xADDR": all that is known of a pc in an object whose
 * file is gone, or is another file now. */
static void unloaded_frame(const symbolize_gone *o, uintptr_t pc,
                           symbolize_result *r, symbolize_frame *frame)
{
    const char *slash = strrchr(o->file, '/');
    char *s = NULL;
    if (asprintf(&s, "[unloaded %s]+0x%" PRIxPTR, slash ? slash + 1 : o->file,
                 pc - o->bias) < 0)
        s = NULL;
    const char *name = own(s);
    *frame = (symbolize_frame){.name = name ? name : "[unloaded]",
                               .system_name = name ? name : "[unloaded]",
                               .file = ""};
    *r = (symbolize_result){.frames = frame, .nframes = 1, .mapping = -1};
}

/* pc's function (from the symbol table) and source line (libdw's line
 * table) in the gone object's own Dwfl; false when no symbol holds pc.
 * No inline frames: the decoded tables (symbolize_dwarf.c,
 * symbolize_symtab.c) are known by load address, which the object's
 * successor may have taken, so nothing of a gone object enters them.  The
 * strings are copied (own), as the Dwfl goes at the session's end. */
static bool gone_symbol(struct gone_module *g, uintptr_t pc,
                        symbolize_result *r, symbolize_frame *frame)
{
    GElf_Off offset = 0;
    GElf_Sym sym;
    const char *symbol = dwfl_module_addrinfo(g->mod, pc, &offset, &sym,
                                              NULL, NULL, NULL);
    const char *name = symbol ? own(strdup(symbol)) : NULL;
    if (!name)
        return false;
    Dwfl_Line *line = dwfl_module_getsrc(g->mod, pc);
    int lineno = 0;
    const char *file =
        line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
    file = file ? absolute_path(dwfl_line_comp_dir(line), own(strdup(file)))
                : NULL;
    *frame = (symbolize_frame){.system_name = name,
                               .name = readable_name(name),
                               .file = file ? file : "",
                               .line = file ? lineno : 0};
    *r = (symbolize_result){.frames = frame, .nframes = 1, .mapping = -1,
                            .sym_offset = offset, .has_function = true,
                            .has_file = file != NULL,
                            .has_line = file && lineno > 0};
    return true;
}

const symbolize_result *symbolize_gone_pc(const symbolize_gone *o,
                                          uintptr_t pc,
                                          const char **build_id)
{
    struct gone_module *g = gone_module(o);
    *build_id = g && g->build_id ? g->build_id : "";
    symbolize_frame *frames = scratch_frames;
    symbolize_result r;
    if (!(g && g->mod &&
          gone_symbol(g, pc - o->bias + g->key.bias, &r, frames)))
        unloaded_frame(o, pc, &r, frames);
    struct entry *e = entry_of(pc, &r);
    if (!e)
        return &unknown_result;
    if (ARRAY_RESERVE(S.gone_results, S.ngone_results, S.capgone_results,
                      1) != 0) {
        free(e);
        return &unknown_result;
    }
    S.gone_results[S.ngone_results++] = e;
    return &e->r;
}

/* ---- Sessions ----------------------------------------------------------- */

/* Bytes of the decoded units and sorted symbol tables. */
static size_t tables_bytes(void)
{
    return symdw_bytes() + symst_bytes();
}

/* Empties the cache, the tables its results point into, and the modules
 * they are known by. */
static void flush_all_tables(void)
{
    flush_cache();
    symdw_flush();
    symst_flush();
    forget_modules();
}

/* Empties an overgrown cache, and the decoded units and the kept copies of
 * compressed debug files (symbolize_debuginfo.h) with it when they all
 * hold more than symbolize_max_kb; only between sessions, when no result
 * of an earlier one is in use.  A session itself is never cut short: it
 * may go past the bound, and the next one starts below it. */
static void bound_cache(void)
{
    size_t max = (size_t)cfg_int(CFG_SYMBOLIZE_MAX_KB) * 1024;
    if (S.nentries > CACHE_KEPT_ENTRIES || S.cache_bytes > max)
        flush_cache();
    if (S.cache_bytes + tables_bytes() + symdi_kept_bytes() > max) {
        flush_all_tables();
        symdi_drop_copies();
    }
}

/* Lets go of everything: cache, decoded units, symbols, mappings.  The
 * next session reads the mappings and opens the modules again. */
static void release_all(void)
{
    flush_all_tables();
    symdi_drop_copies();
    free_mappings(S.maps, S.nmaps);
    S.maps = NULL;
    S.nmaps = 0;
    free(S.objects.text);
    S.objects = (struct objects){0};
    S.maps_known = false;
    give_back_pages();
    atomic_store(&own_bytes, 0);
}

void symbolize_release_if_idle(void)
{
    if (pthread_mutex_trylock(&S.lock) != 0)
        return; /* a session is running: not idle */
    if (S.maps_known &&
        clock_mono_ns() - S.last_used_ns >=
            cfg_int(CFG_SYMBOLIZE_IDLE_SECONDS) * 1000000000LL) {
        own_work_enter(); /* frees what the internal scope took */
        release_all();
        own_work_leave();
    }
    pthread_mutex_unlock(&S.lock);
}

size_t symbolize_own_bytes(void)
{
    return atomic_load(&own_bytes);
}

void symbolize_begin(void)
{
    own_work_enter(); /* libdw's memory is cpprof's, not the program's */
    pthread_mutex_lock(&S.lock);
    bound_cache();
    /* No dlopen or dlclose since the last look: the modules are those. */
    loader_counts counts = loader_counts_now();
    if (S.maps_known && loader_counts_equal(counts, S.counts))
        return;
    struct mapping *maps;
    size_t n;
    struct objects objects;
    if (read_mappings(&maps, &n, &objects) != 0)
        return; /* keep the last view; lookups still work from it */
    S.counts = counts;
    free(S.objects.text);
    S.objects = objects;
    if (S.maps_known && same_mappings(maps, n, S.maps, S.nmaps)) {
        free_mappings(maps, n);
        return;
    }
    flush_all_tables(); /* known by load addresses, which may be others' now */
    free_mappings(S.maps, S.nmaps);
    S.maps = maps;
    S.nmaps = n;
    S.maps_known = true;
    open_modules(); /* for the build ids */
    publish_mappings();
}

void symbolize_end(void)
{
    close_modules();
    drop_gone_modules(); /* libdw's state, as for the others */
    S.last_used_ns = clock_mono_ns();
    atomic_store(&own_bytes, S.cache_bytes + tables_bytes() +
                                 symdi_kept_bytes() + mappings_bytes());
    pthread_mutex_unlock(&S.lock);
    own_work_leave();
}

size_t symbolize_mapping_count(void)
{
    return S.nmaps;
}

const symbolize_mapping *symbolize_mapping_at(size_t i)
{
    return i < S.nmaps ? &S.maps[i].pub : NULL;
}
