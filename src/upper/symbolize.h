/*
 * symbolize.h -- program counters to functions, files and lines, and the
 * process's executable mappings (symbolize.c, using elfutils' libdw).
 *
 * One symbolizer serves the whole process: decoding DWARF is costly, so the
 * tables decoded from it and a cache of every address looked up are kept
 * from one profile to the next, within a bound (symbolize_max_kb) and
 * until the symbolizer is idle (symbolize_idle_seconds); libdw itself is
 * open only during a session that needs it.  Lookups happen in a
 * session, between symbolize_begin() and symbolize_end(), which holds the
 * symbolizer's lock (libdw is not thread-safe) and gives the session one
 * consistent view of the mappings; every pointer handed out stays valid
 * until symbolize_end().
 * Never used from a signal handler.
 */
#ifndef CPPROF_SYMBOLIZE_H
#define CPPROF_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An executable mapping of /proc/self/maps. */
typedef struct {
    uintptr_t start, limit, offset;
    const char *file;     /* path, or "" for an anonymous mapping */
    const char *build_id; /* GNU build id in hex, or "" */
} symbolize_mapping;

/* One function of a (possibly inlined) call chain at an address. */
typedef struct {
    const char *name;        /* readable (demangled) name; never NULL or "" */
    const char *system_name; /* name as in the symbol table or DWARF */
    const char *file;        /* source file, or "" when unknown */
    int64_t line;            /* line in file, or 0 when unknown */
    int64_t start_line;      /* line of the function's declaration, or 0 */
} symbolize_frame;

typedef struct {
    const symbolize_frame *frames; /* innermost (inlined) first */
    size_t nframes;                /* at least 1 */
    int mapping;          /* index for symbolize_mapping_at(), or -1 */
    uintptr_t sym_offset; /* address minus its symbol's start (0: none) */
    /* What was really found, for pprof's per-mapping has_* flags: without
     * a symbol the name is made up ("libc.so.6+0x1234" or "0x7f..."). */
    bool has_function, has_file, has_line, has_inline_frames;
} symbolize_result;

/* Starts a session: takes the lock and, when the executable mappings
 * changed since the last session (dlopen, dlclose), reports the modules
 * again and empties the cache. */
void symbolize_begin(void);
void symbolize_end(void);

/* The frames at pc, exactly as given: callers pass a return address minus
 * one, so that the line is the call's.  Never NULL. */
const symbolize_result *symbolize_pc(uintptr_t pc);

/* An object that was mapped where a PC was taken and is not any more (a
 * plugin dlclosed since, unwind.h's "Generations"): its file, that file's
 * device and inode when it was mapped, and its load bias (address minus
 * ELF address). */
typedef struct {
    const char *file;
    unsigned long long dev, ino;
    uintptr_t bias;
} symbolize_gone;

/* The frame at pc in that object (its function and line, without inline
 * frames), from its file while the file is still the one that was mapped
 * (same device and inode) and a symbol holds pc, else one made-up frame
 * "[unloaded NAME]+0xADDR" (ADDR: pc minus the bias); never another
 * object's.  The result's mapping is -1 (the caller has its own); its
 * build id (or "") into *build_id.  Within a session, like symbolize_pc;
 * pointers valid until symbolize_end(). */
const symbolize_result *symbolize_gone_pc(const symbolize_gone *o,
                                          uintptr_t pc,
                                          const char **build_id);

/* Lets go of all the symbolizer holds (its decoded tables, the cache, the
 * mappings) once no session ran for symbolize_idle_seconds; the next
 * session decodes what it needs again.  Called periodically (the HTTP
 * server's watch thread); never blocks. */
void symbolize_release_if_idle(void);

/* Bytes of the symbolizer's decoded tables and cached results, of the
 * inflated copies of compressed debug files it keeps (memfds, not mapped
 * between sessions) and of the mappings it keeps, as of the last session:
 * all it keeps between sessions (libdw is closed). */
size_t symbolize_own_bytes(void);

/* The executable mappings, in address order (the main binary first in any
 * ordinary process). */
size_t symbolize_mapping_count(void);
const symbolize_mapping *symbolize_mapping_at(size_t i);

#endif
