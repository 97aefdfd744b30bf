/*
 * http_upper_entry.c -- the one symbol libcpprof-upper.so exports: its entry
 * points, for the forwarders in libcpprof.so (upper.h).  Not in the tests'
 * library nor in libcpprof.a, which call the entry points directly.
 */
#include "upper.h"

#include "cpprof.h"
#include "http_server.h"
#include "tracefile.h"

extern const struct upper_entry cpprof_upper_entry;
const struct upper_entry cpprof_upper_entry = {
    .version = UPPER_VERSION,
    .cpu_profile_start = cpprof_cpu_profile_start,
    .cpu_profile_stop = cpprof_cpu_profile_stop,
    .http_start = http_start,
    .http_stop = cpprof_http_stop,
    .http_refused_setting = http_refused_setting,
    .trace_flight_write = tracefile_flight_write,
};
