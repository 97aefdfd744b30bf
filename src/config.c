/*
 * config.c -- every cpprof setting in one table.
 *
 * A setting has a name ("cpu_hz"), an environment variable (CPPROF_CPU_HZ),
 * a default and limits.  The environment is read once when the library is
 * loaded (unless the process is AT_SECURE: config_load), so the zero-code
 * mode (LD_PRELOAD) needs nothing else; a bad value
 * is reported once on stderr and the default stays, never a silent guess.
 * The setting also remembers that it was refused (cfg_refused), so that what
 * guards access (the HTTP server) can fail closed instead of running with a
 * default the user did not choose; a secret's value is never printed.
 * cpprof_set() changes a setting at run time with the same parser.
 * Integer values are atomics because collectors read them from any thread.
 */
#define _GNU_SOURCE
#include "addr.h"
#include "config.h"
#include "cpprof.h"
#include "warn.h"
#include "upper_calls.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

typedef int (*str_check_fn)(const char *value);
typedef int (*int_check_fn)(long value);

struct setting {
    const char *name;
    const char *doc;      /* what it means, for messages */
    const char *expect;   /* the form a value must have, for messages */
    long min, max, def;   /* integer settings */
    int_check_fn icheck;  /* integer settings: extra rule, 1 when valid */
    const char *sdef;     /* string settings: non-NULL default */
    str_check_fn check;   /* string settings: returns 0 when valid */
    atomic_long ival;
    char *sval;
    atomic_bool frozen; /* read for good: cpprof_set() refuses it */
    bool secret;        /* never printed: its value is a credential */
    atomic_bool refused; /* the environment's value failed validation and
                            no valid value has been set since */
};

/* Table rows.  An integer's expected form defaults to its range. */
#define INT(id, nm, what, lo, hi, dflt) \
    [id] = {.name = nm, .doc = what, .min = lo, .max = hi, .def = dflt}
#define SIGNAL(id, nm, what, dflt, rule, form) \
    [id] = {.name = nm, .doc = what, .min = 1, .max = 64, .def = dflt, \
            .icheck = rule, .expect = form}
#define STR(id, nm, what, dflt, rule, form) \
    [id] = {.name = nm, .doc = what, .sdef = dflt, .check = rule, \
            .expect = form}
#define SECRET(id, nm, what, rule, form) \
    [id] = {.name = nm, .doc = what, .sdef = "", .check = rule, \
            .expect = form, .secret = true}

static int check_host_port(const char *v);
static int check_nonempty(const char *v);
static int check_optional_host_port(const char *v);
static int check_token(const char *v);
static int check_host_list(const char *v);
static int check_path(const char *v);
static int check_accounting_cpu(const char *v);
static int cpu_signal_usable(long sig);
static void env_var_name(const char *name, char *buf, size_t len);
static int realtime_signal(long sig);

static struct setting settings[CFG__COUNT] = {
    INT(CFG_LABEL_CAP, "label_cap", "distinct label sets before folding", 1,
        100000000, 10000),
    INT(CFG_CPU_HZ, "cpu_hz", "CPU samples per second", 1, 1000, 100),
    SIGNAL(CFG_CPU_SIGNAL, "cpu_signal", "signal number of the CPU sampler",
           SIGPROF, cpu_signal_usable, "a signal number other than 9 and 19"),
    INT(CFG_PROFILE_MAX_SECONDS, "profile_max_seconds",
        "largest seconds= of a CPU profile", 1, 86400, 3600),
    STR(CFG_HTTP_ADDR, "http_addr", "HOST:PORT of the HTTP server",
        "127.0.0.1:6060", check_host_port, ADDR_FORM),
    INT(CFG_CENSUS_TIMEOUT_MS, "census_timeout_ms",
        "longest wait in ms for threads' stacks in a thread census", 1, 10000,
        100),
    /* 39 is SIGRTMIN + 5 under glibc (which keeps 32 and 33 for itself). */
    SIGNAL(CFG_CENSUS_SIGNAL, "census_signal",
           "real-time signal number of the thread census", 39,
           realtime_signal, "a real-time signal number (SIGRTMIN..SIGRTMAX)"),
    /* async-profiler's 50 ms: a census of 10 to 100 threads, two of them
     * running, costs 0.4 to 0.9 ms of CPU (bench/wall), 1 to 2% of one
     * CPU at this rate, which wall_cpu_percent then caps. */
    INT(CFG_WALL_HZ, "wall_hz", "censuses a second in a wall profile", 1,
        1000, 20),
    INT(CFG_WALL_CPU_PERCENT, "wall_cpu_percent",
        "CPU a wall profile's censuses may use, in % of one CPU (fewer "
        "censuses a second past it)",
        1, 100, 1),
    INT(CFG_CRASH_HANDLER, "crash_handler",
        "1 to install the crash handler at load", 0, 1, 0),
    INT(CFG_TRACEBACKLABELS, "tracebacklabels",
        "0 to leave labels out of crash tracebacks", 0, 1, 1),
    INT(CFG_OTEL_CONTEXT, "otel_context",
        "1 to publish the OpenTelemetry thread and process context at load",
        0, 1, 0),
    /* "" stands for OpenTelemetry's default, unknown_service:EXECUTABLE. */
    STR(CFG_SERVICE_NAME, "service_name",
        "service.name of the OpenTelemetry process context", "",
        check_nonempty, "a non-empty name"),
    /* Go's runtime.MemProfileRate, SetBlockProfileRate (in ns) and
     * SetMutexProfileFraction: same meanings, same defaults. */
    INT(CFG_MEM_PROFILE_RATE, "mem_profile_rate",
        "mean bytes allocated between heap samples", 0, 1L << 40, 524288),
    /* Read once, when heap.c's constructor decides whether to track. */
    INT(CFG_HEAP_INTERPOSE, "heap_interpose",
        "0 to leave allocations unsampled (no heap or allocs profile)", 0, 1,
        1),
    INT(CFG_INHERIT_LABELS, "inherit_labels",
        "0 to start threads from pthread_create without their creator's "
        "labels", 0, 1, 1),
    /* The symbolizer's memory (symbolize.c): what it keeps between
     * profiles, and how long libdw's state of the objects stays. */
    INT(CFG_SYMBOLIZE_MAX_KB, "symbolize_max_kb",
        "KiB of decoded debug information, cached results and inflated "
        "copies of compressed debug files the symbolizer keeps between "
        "profiles", 0, 1L << 30, 32768),
    INT(CFG_SYMBOLIZE_IDLE_SECONDS, "symbolize_idle_seconds",
        "seconds without symbolization before the symbolizer lets go of "
        "the objects' debug information", 1, 86400, 60),
    /* Bounds a task table that grows on demand (task.c): a program that
     * leaks tasks is refused more, not given the machine's memory. */
    INT(CFG_TASKS_MAX, "tasks_max", "tasks live at once", 1, 4194304, 100000),
    /* The trace recorder (trace.c): its memory in all, whatever the thread
     * count; what the flight recorder keeps; the shortest wait traced. */
    INT(CFG_TRACE_KB, "trace_kb",
        "KiB of trace buffers in all (events past them are dropped, "
        "counted)",
        256, 4194304, 32768),
    INT(CFG_TRACE_FLIGHT_SECONDS, "trace_flight_seconds",
        "seconds of events the flight recorder keeps; 0: off", 0, 3600, 0),
    INT(CFG_TRACE_LOCK_US, "trace_lock_us",
        "shortest lock or condition wait a trace shows, microseconds", 0,
        60000000, 10),
    INT(CFG_BLOCK_PROFILE_RATE, "block_profile_rate",
        "nanoseconds blocked per block sample", 0, 1L << 40, 0),
    INT(CFG_MUTEX_PROFILE_FRACTION, "mutex_profile_fraction",
        "1 in N mutex contentions sampled", 0, 1000000000, 0),
    /* The HTTP server's exposure and limits (http.c): loopback only unless
     * asked, a token whenever it is not, and bounds on what one client can
     * hold (connections, idle seconds, seconds to be authorized, body bytes). */
    STR(CFG_HTTP, "http", "HOST:PORT to serve from program start", "",
        check_optional_host_port, ADDR_FORM " or empty"),
    INT(CFG_HTTP_ALLOW_REMOTE, "http_allow_remote",
        "1 to let the HTTP server bind a non-loopback address", 0, 1, 0),
    INT(CFG_HTTP_REQUIRE_TOKEN, "http_require_token",
        "0 to serve a non-loopback address without a token", 0, 1, 1),
    SECRET(CFG_HTTP_TOKEN, "http_token", "bearer token of the HTTP server",
           check_token, "visible ASCII characters"),
    INT(CFG_HTTP_MAX_CONNECTIONS, "http_max_connections",
        "concurrent HTTP connections", 1, 10000, 32),
    INT(CFG_HTTP_CONNECTION_TIMEOUT, "http_connection_timeout",
        "seconds an HTTP connection may idle", 1, 86400, 30),
    INT(CFG_HTTP_HEADER_TIMEOUT, "http_header_timeout",
        "seconds from connecting by which a client's request headers must "
        "have come in and passed the server's checks", 1, 3600, 10),
    INT(CFG_HTTP_MAX_BODY, "http_max_body", "largest HTTP request body", 1024,
        16777216, 65536),
    /* What replies hold until their clients read them (http_reply.c):
     * large ones gzip'd, all clients' together; a large reply past it is
     * a 503 with Retry-After. */
    INT(CFG_HTTP_REPLY_KB, "http_reply_kb",
        "KiB the HTTP server's replies may hold, across clients, until "
        "their clients read them (large ones held gzip'd; past it a large "
        "reply is answered 503)",
        1024, 4194304, 32768),
    INT(CFG_HTTP_CMDLINE, "http_cmdline", "0 to refuse /debug/pprof/cmdline",
        0, 1, 1),
    /* The pool serving requests, and as many threads for requests that
     * wait out a window (http_window.c). */
    INT(CFG_HTTP_THREADS, "http_threads",
        "threads of the HTTP server's pool, and requests that may wait out "
        "a profile window at once", 2, CFG_HTTP_THREADS_MAX, 4),
    /* A loopback server answers only loopback Host names (DNS
     * rebinding): these names too. */
    STR(CFG_HTTP_ALLOWED_HOSTS, "http_allowed_hosts",
        "Host names a loopback HTTP server answers besides loopback ones", "",
        check_host_list, "comma-separated host names, or empty"),
    /* TLS (http_tls.c): files read when the server starts. */
    STR(CFG_HTTP_TLS_CERT, "http_tls_cert",
        "PEM certificate file of the HTTPS server", "", check_path,
        "a file name, or empty for plain HTTP"),
    STR(CFG_HTTP_TLS_KEY, "http_tls_key", "PEM private key file of the "
        "HTTPS server", "", check_path, "a file name, or empty"),
    STR(CFG_HTTP_TLS_CA, "http_tls_ca",
        "PEM CA file whose client certificates the HTTPS server requires",
        "", check_path, "a file name, or empty"),
    /* Pre-fork servers (http_forks.c, forkwake.c): a forked child of a
     * serving process is a worker, reached through its parent's address;
     * its part starts when asked and stops again after the idle time.  41
     * is SIGRTMIN + 7 under glibc, past the census's and the tick's. */
    INT(CFG_HTTP_FORKS, "http_forks",
        "0 to keep forked children of a serving process from serving", 0, 1,
        1),
    INT(CFG_HTTP_WORKER_IDLE_MS, "http_worker_idle_ms",
        "milliseconds a woken worker serves without a request before its "
        "part stops", 100, 86400000, 30000),
    SIGNAL(CFG_WORKER_SIGNAL, "worker_signal",
           "real-time signal number that wakes a pre-fork worker", 41,
           realtime_signal, "a real-time signal number (SIGRTMIN..SIGRTMAX)"),
    /* Per-label-set accounting (accounting.c).  The tick only sets how
     * fresh a thread's CPU count is while it keeps one set; 40 is
     * SIGRTMIN + 6 under glibc, next to the census's. */
    INT(CFG_ACCOUNTING, "accounting",
        "1 to count CPU, allocations and lock waits per label set from load",
        0, 1, 0),
    INT(CFG_ACCOUNTING_HZ, "accounting_hz",
        "accounting ticks per thread CPU-second", 1, 1000, 19),
    SIGNAL(CFG_ACCOUNTING_SIGNAL, "accounting_signal",
           "real-time signal number of the accounting tick", 40,
           realtime_signal, "a real-time signal number (SIGRTMIN..SIGRTMAX)"),
    /* Read when accounting is enabled: "sampled" trades the exact CPU
     * split for label switches that read no clock (accounting.c). */
    STR(CFG_ACCOUNTING_CPU, "accounting_cpu",
        "how CPU time is charged to label sets", "exact",
        check_accounting_cpu, "exact or sampled"),
};

static pthread_mutex_t str_lock = PTHREAD_MUTEX_INITIALIZER;

/* An address the server accepts (addr.c), checked when the setting is. */
static int check_host_port(const char *v)
{
    struct sockaddr_storage ss;
    socklen_t len;
    return addr_parse(v, &ss, &len) == 0 ? 0 : -1;
}

/* Empty (off) or HOST:PORT. */
static int check_optional_host_port(const char *v)
{
    return *v ? check_host_port(v) : 0;
}

/* Visible ASCII only: a token travels in an HTTP header. */
static int check_token(const char *v)
{
    for (; *v; v++)
        if (*v < 0x21 || *v > 0x7e)
            return -1;
    return 0;
}

/* Host names (letters, digits, '.', '-'), comma-separated, or "". */
static int check_host_list(const char *v)
{
    for (bool name_started = false; *v; v++) {
        if (*v == ',' && name_started)
            name_started = false;
        else if (isalnum((unsigned char)*v) || *v == '.' || *v == '-')
            name_started = true;
        else
            return -1;
    }
    return 0;
}

/* A file name: no control characters (a stray \r from a config file
 * would name another file). */
static int check_path(const char *v)
{
    for (; *v; v++)
        if ((unsigned char)*v < 0x20 || *v == 0x7f)
            return -1;
    return 0;
}

static int check_accounting_cpu(const char *v)
{
    return strcmp(v, "exact") == 0 || strcmp(v, "sampled") == 0 ? 0 : -1;
}

static int check_nonempty(const char *v)
{
    return *v ? 0 : -1;
}

static int parse_long(const char *v, long min, long max, long *out)
{
    if (!v || !*v || isspace((unsigned char)*v))
        return -1;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (*end || errno || n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

static int cpu_signal_usable(long sig)
{
    return sig != SIGKILL && sig != SIGSTOP && sig <= SIGRTMAX;
}

/* The census and the accounting tick need queued signals of their own:
 * real-time ones that glibc has not kept for itself. */
static int realtime_signal(long sig)
{
    return sig >= SIGRTMIN && sig <= SIGRTMAX;
}

static int apply(struct setting *s, const char *value)
{
    if (s->sdef) {
        if (!value || s->check(value) != 0)
            return CPPROF_EVALUE;
        char *copy = strdup(value);
        if (!copy)
            return -ENOMEM;
        pthread_mutex_lock(&str_lock);
        free(s->sval);
        s->sval = copy;
        pthread_mutex_unlock(&str_lock);
    } else {
        long n;
        if (parse_long(value, s->min, s->max, &n) != 0)
            return CPPROF_EVALUE;
        if (s->icheck && !s->icheck(n))
            return CPPROF_EVALUE;
        atomic_store(&s->ival, n);
    }
    atomic_store(&s->refused, false);
    return 0;
}

static struct setting *find(const char *name)
{
    for (int i = 0; i < CFG__COUNT; i++)
        if (strcmp(settings[i].name, name) == 0)
            return &settings[i];
    return NULL;
}

int cpprof_set(const char *name, const char *value)
{
    if (!name || !value)
        return -EINVAL;
    struct setting *s = find(name);
    if (!s)
        return CPPROF_ESETTING;
    return atomic_load(&s->frozen) ? CPPROF_EFROZEN : apply(s, value);
}

void cfg_freeze(cfg_id id)
{
    atomic_store(&settings[id].frozen, true);
}

/* SIGNAL-SAFE: one atomic load (the crash handler reads a setting). */
long cfg_int(cfg_id id)
{
    return atomic_load(&settings[id].ival);
}

bool cfg_refused(cfg_id id)
{
    return atomic_load(&settings[id].refused);
}

void cfg_env_name(cfg_id id, char *buf, size_t len)
{
    env_var_name(settings[id].name, buf, len);
}

const char *cfg_str(cfg_id id)
{
    pthread_mutex_lock(&str_lock);
    const char *v = settings[id].sval;
    pthread_mutex_unlock(&str_lock);
    return v;
}

static void env_var_name(const char *name, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "CPPROF_%s", name);
    for (size_t i = 7; i < n && i < len; i++)
        buf[i] = (char)toupper((unsigned char)buf[i]);
}

static void describe_limits(const struct setting *s, char *buf, size_t len)
{
    if (s->sdef)
        snprintf(buf, len, "%s, keeping \"%s\"", s->expect, s->sdef);
    else if (s->expect)
        snprintf(buf, len, "%s, keeping %ld", s->expect, s->def);
    else
        snprintf(buf, len, "an integer in %ld..%ld, keeping %ld", s->min,
                 s->max, s->def);
}

/* Says once on stderr that the environment's value of s was refused, and
 * marks it so.  A secret is described, never shown: a token read from a
 * file with a stray \r must not end up in a log. */
static void report_refused(struct setting *s, const char *var, const char *v)
{
    char limits[128];
    atomic_store(&s->refused, true);
    describe_limits(s, limits, sizeof limits);
    if (s->secret)
        warn_stderr("cpprof: %s (%zu characters, not shown) is not valid "
                "for %s: expected %s\n", var, strlen(v), s->doc, s->expect);
    else
        warn_stderr("cpprof: %s=\"%s\" is not valid for %s: expected "
                "%s\n", var, v, s->doc, limits);
}

/* Adds var to the comma-separated list of what was ignored (cut short
 * rather than overflow: the list only informs). */
static void note_ignored(char *list, size_t len, const char *var)
{
    size_t used = strlen(list);
    snprintf(list + used, len - used, "%s%s", used ? ", " : "", var);
}

/* Runs when the library is loaded: defaults, then the environment.  Its
 * priority runs it before every other constructor, so that a module reading
 * a setting at load (the crash handler) sees the environment's value.
 * A process the kernel marks AT_SECURE (setuid, setgid, or gaining file
 * capabilities) has more rights than whoever started it and wrote its
 * environment: that caller must not choose what it serves (CPPROF_HTTP
 * would show it the stacks, command line and memory map that /proc
 * refuses it), so every variable is ignored, as the dynamic linker ignores
 * LD_PRELOAD there, and the line says which (names only: values may be
 * secrets).  The program itself may still use the API. */
__attribute__((constructor(101))) static void config_load(void)
{
    warn_remember_stderr(); /* before anything could warn */
    bool untrusted = getauxval(AT_SECURE) != 0;
    char ignored[512] = "";
    for (int i = 0; i < CFG__COUNT; i++) {
        struct setting *s = &settings[i];
        atomic_store(&s->ival, s->def);
        s->sval = s->sdef ? strdup(s->sdef) : NULL;
        char var[64];
        env_var_name(s->name, var, sizeof var);
        const char *v = getenv(var);
        if (v && untrusted)
            note_ignored(ignored, sizeof ignored, var);
        else if (v && apply(s, v) != 0)
            report_refused(s, var, v);
    }
    if (ignored[0] != '\0')
        warn_stderr("cpprof: ignoring %s: this process is setuid, setgid "
                "or has file capabilities (AT_SECURE), and its environment "
                "comes from whoever started it; every setting keeps its "
                "default unless the program sets it\n", ignored);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(cfg_env_name);
UPPER_CALLS(cfg_int);
UPPER_CALLS(cfg_refused);
UPPER_CALLS(cfg_str);

/* The server's settings; a refused value among them keeps it from starting
 * (fail closed): a token with a stray \r must not leave the server open to
 * everyone, nor a bad limit leave it with one nobody chose.  Here, below
 * the server, so that zero-code mode checks them at load, before it holds
 * the address for the server (zerolisten.c). */
int cfg_server_refused(void)
{
    static const cfg_id server_settings[] = {
        CFG_HTTP_ADDR, CFG_HTTP_ALLOW_REMOTE, CFG_HTTP_REQUIRE_TOKEN,
        CFG_HTTP_TOKEN, CFG_HTTP_MAX_CONNECTIONS, CFG_HTTP_CONNECTION_TIMEOUT,
        CFG_HTTP_HEADER_TIMEOUT, CFG_HTTP_MAX_BODY, CFG_HTTP_CMDLINE,
        CFG_HTTP_THREADS, CFG_HTTP_ALLOWED_HOSTS, CFG_HTTP_TLS_CERT,
        CFG_HTTP_TLS_KEY, CFG_HTTP_TLS_CA,
    };
    for (size_t i = 0; i < sizeof server_settings / sizeof *server_settings;
         i++)
        if (cfg_refused(server_settings[i]))
            return (int)server_settings[i];
    return -1;
}
UPPER_CALLS(cfg_server_refused);

/* Profiles and the command line can hold secrets: anything but loopback
 * needs "http_allow_remote", and then a token unless "http_require_token"
 * is 0. */
int cfg_server_address_allowed(const struct sockaddr_storage *ss)
{
    if (addr_is_loopback(ss))
        return 0;
    if (!cfg_int(CFG_HTTP_ALLOW_REMOTE))
        return CPPROF_EREMOTE;
    if (cfg_str(CFG_HTTP_TOKEN)[0] == '\0' && cfg_int(CFG_HTTP_REQUIRE_TOKEN))
        return CPPROF_ENOTOKEN;
    return 0;
}
UPPER_CALLS(cfg_server_address_allowed);
