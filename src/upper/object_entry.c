/*
 * object_entry.c -- the one symbol libcpprof-upper.so exports: its entry
 * points, for the forwarders in libcpprof.so (upper.h).  Not in the tests'
 * library nor in libcpprof.a, which call the entry points directly.
 */
#include "upper.h"

#include "cpprof.h"
#include "http_server.h"
#include "tracefile.h"
#include "upper_pair.h" /* generated: UPPER_PAIR_BUILD_ID */

#include <link.h>

/* The build ID of the libcpprof.so this object was linked against, in a
 * note, which libcpprof.so reads from the file before it maps it
 * (upper_check.c): a note survives stripping. */
static const struct {
    ElfW(Nhdr) head;
    char name[(sizeof UPPER_NOTE_NAME + 3) & ~3];
    char desc[(sizeof UPPER_PAIR_BUILD_ID + 3) & ~3];
} pair_note __attribute__((section(".note.cpprof.pair"), aligned(4), used)) = {
    {sizeof UPPER_NOTE_NAME, sizeof UPPER_PAIR_BUILD_ID - 1, UPPER_NOTE_PAIR},
    UPPER_NOTE_NAME,
    UPPER_PAIR_BUILD_ID,
};

extern const struct upper_entry cpprof_upper_entry;
__attribute__((visibility("default")))
const struct upper_entry cpprof_upper_entry = {
    .version = UPPER_VERSION,
    .cpu_profile_start = cpprof_cpu_profile_start,
    .cpu_profile_stop = cpprof_cpu_profile_stop,
    .http_start = http_start,
    .http_stop = cpprof_http_stop,
    .http_refused_setting = http_refused_setting,
    .trace_flight_write = tracefile_flight_write,
    .note_unisolated = http_note_unisolated,
    .http_start_listening = http_start_listening,
    .worker_woken = http_forks_woken,
};
