/*
 * errors.c -- cpprof_strerror(): one message for every code the API returns;
 * and cpprof_version(), what a program checks before anything else.
 *
 * Codes are 0, a negative errno, or one of enum cpprof_error for the cases
 * errno has no word for.  Messages of the cpprof codes match the wording
 * users of Go's pprof see for the same situation where there is one.
 */
#define _GNU_SOURCE
#include "cpprof.h"

#include <string.h>

unsigned int cpprof_version(void)
{
    return CPPROF_VERSION_HEX;
}

static const char *cpprof_code_message(int code)
{
    switch (code) {
    case CPPROF_EUNEVEN:
        return "uneven number of arguments to cpprof_labels: keys and values "
               "must come in pairs";
    case CPPROF_ENULLKEY: return "label key is NULL";
    case CPPROF_EEMPTYKEY: return "label key is empty";
    case CPPROF_ENULLVALUE: return "label value is NULL";
    case CPPROF_EBUSY: return "cpu profiling already in use";
    case CPPROF_ESIGTAKEN:
        return "a signal cpprof needs already has a handler in this "
               "process (choose another with the cpu_signal, census_signal "
               "or accounting_signal setting)";
    case CPPROF_ESETTING: return "no such setting";
    case CPPROF_EVALUE: return "bad value for this setting";
    case CPPROF_ERUNNING: return "the HTTP server is already running";
    case CPPROF_ENOTRUNNING: return "not running";
    case CPPROF_EREMOTE:
        return "a non-loopback address needs the http_allow_remote setting";
    case CPPROF_ENOTOKEN:
        return "a non-loopback address needs the http_token setting (or "
               "http_require_token=0)";
    case CPPROF_EFROZEN:
        return "this setting is read once and has been: the value in force "
               "stays (set it in the environment, or before enabling what "
               "reads it)";
    case CPPROF_ENOTIMER:
        return "the system refused cpprof a CPU-time timer (timer_create "
               "failed: a seccomp filter or container policy?), so no CPU "
               "profile can be taken";
    case CPPROF_EREFUSED:
        return "a setting of the HTTP server had a value refused at load "
               "(stderr said which): the server does not start on a default "
               "nobody chose";
    case CPPROF_ETLS:
        return "a TLS file of the HTTP server (http_tls_cert, http_tls_key, "
               "http_tls_ca) cannot be used (stderr said which and why)";
    case CPPROF_EADDRFORM:
        return "bad address: expected HOST:PORT, such as 127.0.0.1:6060, "
               "localhost:6060, :6060 or [::1]:6060";
    case CPPROF_EADDRHOST:
        return "bad address: HOST must be an IPv4 address, an IPv6 address "
               "in brackets, localhost or empty (names are not looked up)";
    case CPPROF_EADDRPORT:
        return "bad address: PORT must be a number from 0 to 65535";
    case CPPROF_ETASKLIMIT:
        return "as many tasks are live as the tasks_max setting allows";
    case CPPROF_ETASKENDED:
        return "not a live task: it was ended already, or never created";
    case CPPROF_ETASKRUNNING:
        return "the task is running on another thread";
    case CPPROF_ETASKNOTHERE:
        return "the calling thread is not running that task";
    case CPPROF_ETASKBUSY:
        return "the calling thread is running a task already (tasks do not "
               "nest: leave it first)";
    case CPPROF_ESCOPEMOVED:
        return "a label scope ended on another thread or task than it began "
               "on (held across a co_await or a fiber switch outside a "
               "task): no thread's labels were changed";
    case CPPROF_ENOTRACE:
        return "the flight recorder is off: set trace_flight_seconds (or "
               "CPPROF_TRACE_FLIGHT_SECONDS) to keep the last seconds";
    case CPPROF_ENOPROC:
        return "/proc/self cannot be read: /proc is not mounted where "
               "this process can see it (a chroot without /proc?); the "
               "thread census, the CPU profile and every stack's frames "
               "need it";
    case CPPROF_EUPPER:
        return "cpprof's upper part (libcpprof-upper.so: the HTTP server, "
               "the CPU profile, symbolization) cannot be loaded (stderr "
               "said why)";
    default: return NULL;
    }
}

const char *cpprof_strerror(int code)
{
    if (code == 0)
        return "success";
    const char *msg = cpprof_code_message(code);
    if (msg)
        return msg;
    if (code < 0 && (msg = strerrordesc_np(-code)) != NULL)
        return msg;
    return "unknown cpprof error";
}
