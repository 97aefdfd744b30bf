/*
 * upper_api.c -- the upper layers' entry points in libcpprof.so, which
 * holds only the lower layers: each loads libcpprof-upper.so (upper.h) and
 * calls its own.  When it cannot be loaded (stderr said why):
 * CPPROF_EUPPER.  Not in the tests' library nor in libcpprof.a, which hold
 * the entry points themselves.
 */
#include "upper.h"

#include "cpprof.h"
#include "server_entry.h"
#include "trace.h"
#include "util.h"

#include <unistd.h>

int cpprof_cpu_profile_start(void)
{
    const struct upper_entry *u = upper_load();
    return u ? u->cpu_profile_start() : CPPROF_EUPPER;
}

int cpprof_cpu_profile_stop(unsigned char **buf, size_t *len)
{
    const struct upper_entry *u = upper_load();
    return u ? u->cpu_profile_stop(buf, len) : CPPROF_EUPPER;
}

/* The recorder is in this library: off, the upper one is not loaded; on,
 * the last seconds are those before the call, not before the load. */
int cpprof_trace_flight_write(int fd)
{
    if (!trace_flight_on())
        return CPPROF_ENOTRACE;
    int64_t now = clock_mono_ns();
    const struct upper_entry *u = upper_load();
    return u ? u->trace_flight_write(fd, now) : CPPROF_EUPPER;
}

int cpprof_http_start(const char *addr)
{
    return http_start(addr, false);
}

int http_start(const char *addr, bool one_thread)
{
    const struct upper_entry *u = upper_load();
    return u ? u->http_start(addr, one_thread) : CPPROF_EUPPER;
}

int cpprof_http_stop(void)
{
    const struct upper_entry *u = upper_load();
    return u ? u->http_stop() : CPPROF_EUPPER;
}

int http_refused_setting(void)
{
    const struct upper_entry *u = upper_load();
    return u ? u->http_refused_setting() : -1;
}

int http_start_listening(const char *addr, int fd)
{
    const struct upper_entry *u = upper_load();
    if (u == NULL) {
        close(fd);
        return CPPROF_EUPPER;
    }
    return u->http_start_listening(addr, fd);
}

void http_forks_woken(pid_t parent, const char *addr, int what)
{
    const struct upper_entry *u = upper_load();
    if (u != NULL)
        u->worker_woken(parent, addr, what);
}
