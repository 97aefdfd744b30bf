/*
 * upper.c -- loads libcpprof-upper.so, the upper layers with their
 * libraries, on first need (upper.h says why and where it is looked for).
 * In libcpprof.so only.
 *
 * RTLD_NOW, so that an object that cannot be bound is refused here, with
 * the loader's reason, not at a later call; RTLD_LOCAL, so that the
 * libraries it brings do not join the program's symbol lookup (a program
 * that defines a function of the same name as one of theirs keeps its
 * own); RTLD_NODELETE, because the fork handlers it registers (atfork.h)
 * point into it.  Loaded as cpprof's own work: what its libraries'
 * constructors allocate is not the program's (own.h).
 *
 * RTLD_DEEPBIND, so that the object and the libraries it brings look a
 * name up in their own tree before the program's scope: RTLD_LOCAL alone
 * leaves the program's exports first, and PostgreSQL's json_object took
 * jansson's calls (a crash at the index page), a -rdynamic program's
 * crc32 zlib's.  The allocator and cpprof's interposers still reach the
 * program's definitions, through object_forward.c.  Not under a sanitizer
 * runtime, whose dlopen kills the process it is given RTLD_DEEPBIND in:
 * there the program's exports come first, as stderr says once.  Other
 * ways cost more: dlmopen gives the libraries a second C library, with a
 * heap, locks and thread state of its own, from which the server's
 * threads would be started; linking them in with hidden symbols needs
 * static archives Debian does not ship for all of them (p11-kit,
 * libunistring).  Loading costs the same either way (docs/limits.md).
 *
 * Its file is checked first (upper_check.c): one cut short would fault
 * with SIGBUS in dlopen.
 */
#define _GNU_SOURCE
#include "upper.h"
#include "own.h"
#include "warn.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Where the object may be, relative to libcpprof.so's directory: installed
 * ($(pkglibdir), the package's directory under $(libdir)), then in the
 * build tree (beside it, in .libs). */
static const char *const places[] = {"cpprof/libcpprof-upper.so",
                                     "libcpprof-upper.so"};

static const struct upper_entry *entry;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
/* libcpprof.so's directory, absolute; empty if it could not be told. */
static char library_dir[PATH_MAX];

/* At load, while the working directory is still the one a relative
 * LD_PRELOAD path (the loader keeps it as given) was relative to; before
 * the constructors without a priority, zero-code mode's among them, which
 * loads the upper object at once. */
__attribute__((constructor(102))) static void find_library_dir(void)
{
    Dl_info info;
    if (!dladdr((void *)find_library_dir, &info) || info.dli_fname == NULL)
        return;
    const char *slash = strrchr(info.dli_fname, '/');
    int dir_len = slash ? (int)(slash - info.dli_fname) : 0;
    /* A relative path is the working directory's, written first into
     * library_dir itself: no PATH_MAX buffer on the stack of the thread
     * that loads the library (a dlopen from a small thread). */
    size_t at = 0;
    if (info.dli_fname[0] != '/') {
        if (getcwd(library_dir, sizeof library_dir) == NULL) {
            library_dir[0] = '\0';
            return;
        }
        at = strlen(library_dir);
    }
    int n = snprintf(library_dir + at, sizeof library_dir - at, "%s%.*s",
                     at && dir_len ? "/" : "", dir_len, info.dli_fname);
    if (n < 0 || (size_t)n >= sizeof library_dir - at)
        library_dir[0] = '\0';
}

/* dir/name, with dir libcpprof.so's directory; false if it does not fit. */
static bool beside_library(const char *name, char *out, size_t size)
{
    if (library_dir[0] == '\0')
        return false;
    int n = snprintf(out, size, "%s/%s", library_dir, name);
    return n > 0 && (size_t)n < size;
}

/* Why the object is loaded without RTLD_DEEPBIND, or NULL: said on
 * stderr here and handed to the index once loaded (load). */
static const char *unisolated;

/* RTLD_DEEPBIND, or 0 where the dlopen a sanitizer runtime puts before
 * the C library's (its interceptor, under either of its names) would
 * kill the process for it. */
static int own_tree_first(void)
{
    if (dlsym(RTLD_DEFAULT, "__interceptor_dlopen") == NULL &&
        dlsym(RTLD_DEFAULT, "___interceptor_dlopen") == NULL)
        return RTLD_DEEPBIND;
    unisolated = "under a sanitizer runtime, which refuses RTLD_DEEPBIND, "
                 "libcpprof-upper.so's libraries look names up in the "
                 "program first: a function the program exports under a "
                 "name of theirs takes their calls";
    warn_stderr("cpprof: %s\n", unisolated);
    return 0;
}

/* The first place's object with its file checked (upper_check.c): its
 * descriptor, its path in path; or -1, said on stderr. */
static int find_checked(char *path, size_t size)
{
    for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
        if (!beside_library(places[i], path, size) || access(path, F_OK) != 0)
            continue;
        char why[256];
        int fd = upper_open_checked(path, why, sizeof why);
        if (fd < 0)
            warn_stderr("cpprof: %s %s: not used; no HTTP server, CPU "
                        "profile or symbolization in this process\n",
                        path, why);
        return fd;
    }
    if (beside_library(places[0], path, size))
        warn_stderr("cpprof: %s is missing (cpprof is not installed whole); "
                    "no HTTP server, CPU profile or symbolization in this "
                    "process\n", path);
    else
        warn_stderr("cpprof: libcpprof.so's directory, where "
                    "libcpprof-upper.so is looked for, is unknown; no HTTP "
                    "server, CPU profile or symbolization in this process\n");
    return -1;
}

static void *open_first(char *path, size_t size)
{
    int fd = find_checked(path, size);
    if (fd < 0)
        return NULL;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE |
                               own_tree_first());
    const char *error = h == NULL ? dlerror() : NULL;
    bool checked = upper_is_checked_file(fd, path);
    close(fd);
    if (h == NULL)
        warn_stderr("cpprof: cannot load %s: %s; no HTTP server, CPU "
                    "profile or symbolization in this process\n",
                    path, error);
    else if (!checked)
        warn_stderr("cpprof: %s was replaced while it was loaded: not "
                    "used; no HTTP server, CPU profile or symbolization "
                    "in this process\n", path);
    return checked ? h : NULL;
}

/* Runs once (load_once), on the thread of the first call that needs the
 * object: its path is kept here rather than on that thread's stack, which
 * may be 16 KiB and has glibc's dlopen to hold besides. */
static char upper_path[PATH_MAX];

static void load(void)
{
    own_work_enter();
    void *h = open_first(upper_path, sizeof upper_path);
    own_work_leave();
    if (h == NULL)
        return;
    const struct upper_entry *e = dlsym(h, "cpprof_upper_entry");
    if (e == NULL || strcmp(e->version, UPPER_VERSION) != 0)
        warn_stderr("cpprof: %s is not of this cpprof (%s): not used; no "
                    "HTTP server, CPU profile or symbolization in this "
                    "process\n", upper_path, UPPER_VERSION);
    else {
        if (unisolated != NULL)
            e->note_unisolated(unisolated);
        entry = e;
    }
}

static void never_loaded(void) {}

bool upper_present(void)
{
    static char path[PATH_MAX];
    int fd = find_checked(path, sizeof path);
    if (fd < 0) {
        pthread_once(&load_once, never_loaded); /* said once, here */
        return false;
    }
    close(fd);
    return true;
}

const struct upper_entry *upper_load(void)
{
    pthread_once(&load_once, load);
    return entry;
}
