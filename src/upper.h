/*
 * upper.h -- the upper layers (profile data, symbolizer, entry points and
 * HTTP) as a separate object, libcpprof-upper.so, loaded on first need
 * (upper.c; both only in libcpprof.so).
 *
 * Only the upper layers use libmicrohttpd, GnuTLS, jansson, libdw,
 * protobuf-c and zlib.  Linked into libcpprof.so, those 17 libraries were
 * mapped into every program that loaded cpprof, and each fork paid for
 * them: their mappings copied, their destructors run at the child's exit,
 * about 100 page faults per fork+exit against 25 without cpprof
 * (bench/fork).  So libcpprof.so holds the lower layers, linked only to
 * the C library, and the upper layers' entry points there are forwarders
 * (upper_api.c): the first call dlopens libcpprof-upper.so, which is linked
 * against those libraries and against libcpprof.so (for the lower layers'
 * functions, exported under the prefix cpprof__: object_uses.h, upper_calls.h),
 * and exports one symbol, the table below.  A program that never serves,
 * encodes or symbolizes never maps any of them; a forked child of one that
 * does inherits them, as before.  Zero-code mode (CPPROF_HTTP set) loads
 * them at load, where the server starts.
 *
 * The object is looked for next to libcpprof.so, as the install puts it
 * ($(pkglibdir), cpprof/ under the library's directory), then in the same
 * directory (the build tree's .libs): found from where libcpprof.so is,
 * it follows a moved prefix and `make install DESTDIR=`.
 *
 * The tests and libcpprof.a link every module directly: there is no
 * libcpprof.so for the upper object to call down into, and no loading.
 */
#ifndef CPPROF_UPPER_H
#define CPPROF_UPPER_H

#include "cpprof.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What libcpprof-upper.so gives libcpprof.so (object_entry.c), under
 * the symbol cpprof_upper_entry.  version is the package's: an upper
 * object of another version is refused, not called. */
#define UPPER_VERSION CPPROF_VERSION_STRING

struct upper_entry {
    const char *version;
    int (*cpu_profile_start)(void);
    int (*cpu_profile_stop)(unsigned char **buf, size_t *len);
    int (*http_start)(const char *addr, bool one_thread);
    int (*http_stop)(void);
    int (*http_refused_setting)(void);
    int (*trace_flight_write)(int fd, int64_t until);
    void (*note_unisolated)(const char *why);
    int (*http_start_listening)(const char *addr, int fd);
    void (*worker_woken)(pid_t parent, const char *addr, int what);
};

/* The upper object's entry points, loaded by the first call (which may
 * take a while: the dynamic loader maps and relocates 18 objects); NULL,
 * said on stderr once, when it cannot be loaded.  Thread-safe; never from
 * a signal handler or a fork child's handlers. */
const struct upper_entry *upper_load(void);

/* Whether the upper object is there and its file passes the checks
 * upper_load makes before it maps it, without loading it (zero-code mode
 * says at load what it could not serve with); when not, said on stderr
 * once, and upper_load answers NULL without a word. */
bool upper_present(void);

/* The note in which libcpprof-upper.so records the build ID (as hex
 * text) of the libcpprof.so it was linked against (object_entry.c),
 * which upper_check.c compares with its own before mapping the file. */
#define UPPER_NOTE_NAME "cpprof"
#define UPPER_NOTE_PAIR 1
#define UPPER_BUILD_ID_MAX 64 /* bytes of a build ID it reads */

/* Opens the upper object at path and checks its file (upper_check.c):
 * the descriptor, or -1 with why it is refused in why, a sentence's end
 * after the path. */
int upper_open_checked(const char *path, char *why, size_t len);

/* Whether path still names the file open on fd, the one checked. */
bool upper_is_checked_file(int fd, const char *path);

#endif
