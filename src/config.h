/*
 * config.h -- settings (config.c).
 *
 * One table holds every setting: its name, its environment variable
 * (CPPROF_ + the name in capitals), its default and its limits, so that the
 * API (cpprof_set), the environment and README's table cannot drift apart.
 * Values are read from the environment once, at load; a bad value is
 * reported once on stderr and the default stays, marked as refused so that
 * the HTTP server can refuse to start on it (cfg_refused).
 */
#ifndef CPPROF_CONFIG_H
#define CPPROF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    CFG_LABEL_CAP,            /* distinct interned label sets before folding */
    CFG_CPU_HZ,               /* CPU sampling rate, 1..1000 */
    CFG_CPU_SIGNAL,           /* signal the CPU sampler uses (SIGPROF) */
    CFG_PROFILE_MAX_SECONDS,  /* largest ?seconds= on /profile */
    CFG_HTTP_ADDR,            /* HOST:PORT served by cpprof_http_start(NULL) */
    CFG_MEM_PROFILE_RATE,     /* mean bytes between heap samples; 0: off */
    CFG_BLOCK_PROFILE_RATE,   /* ns blocked per block-profile sample; 0: off */
    CFG_MUTEX_PROFILE_FRACTION, /* 1/N contention events sampled; 0: off */
    CFG_CENSUS_TIMEOUT_MS,    /* longest wait for threads' stacks in a census */
    CFG_CENSUS_SIGNAL,        /* real-time signal the census sends threads */
    CFG_WALL_HZ,              /* censuses a second in a wall profile */
    CFG_WALL_CPU_PERCENT,     /* a wall profile's CPU budget, % of one CPU */
    CFG_CRASH_HANDLER,        /* 1: install the crash handler at load */
    CFG_TRACEBACKLABELS,      /* 0: the crash handler prints no labels */
    CFG_OTEL_CONTEXT,         /* 1: publish the OpenTelemetry context at load */
    CFG_SERVICE_NAME,         /* service.name in it ("": unknown_service:EXE) */
    CFG_HTTP,                 /* HOST:PORT served from load (zero-code); "" off */
    CFG_HTTP_ALLOW_REMOTE,    /* 1: the server may bind a non-loopback address */
    CFG_HTTP_REQUIRE_TOKEN,   /* 0: a non-loopback server needs no token */
    CFG_HTTP_TOKEN,           /* bearer token every request needs, if set */
    CFG_HTTP_MAX_CONNECTIONS, /* concurrent connections the server accepts */
    CFG_HTTP_CONNECTION_TIMEOUT, /* seconds a connection may sit idle */
    CFG_HTTP_HEADER_TIMEOUT,  /* seconds a connection has to be authorized */
    CFG_HTTP_MAX_BODY,        /* largest request body in bytes (413 past it) */
    CFG_HTTP_REPLY_KB,        /* KiB replies hold for clients, across them */
    CFG_HTTP_CMDLINE,         /* 0: /debug/pprof/cmdline answers 403 */
    CFG_HTTP_THREADS,         /* the server's fixed pool of threads */
    CFG_HTTP_ALLOWED_HOSTS,   /* Host names a loopback server also answers */
    CFG_HTTP_TLS_CERT,        /* PEM certificate chain: serve HTTPS */
    CFG_HTTP_TLS_KEY,         /* its PEM private key */
    CFG_HTTP_TLS_CA,          /* PEM CA: client certificates required */
    CFG_HTTP_FORKS,           /* 0: forked children of a server never serve */
    CFG_HTTP_WORKER_IDLE_MS,  /* a woken worker's part stops after this idle */
    CFG_WORKER_SIGNAL,        /* real-time signal that wakes a worker */
    CFG_ACCOUNTING,           /* 1: per-label-set accounting from load */
    CFG_ACCOUNTING_HZ,        /* accounting ticks per thread CPU-second */
    CFG_ACCOUNTING_SIGNAL,    /* real-time signal of the accounting tick */
    CFG_ACCOUNTING_CPU,       /* "exact" or "sampled" CPU charging */
    CFG_HEAP_INTERPOSE,       /* 0: malloc & co. only forward, nothing tracked */
    CFG_INHERIT_LABELS,       /* 0: pthread_create passes no labels */
    CFG_SYMBOLIZE_MAX_KB,     /* symbolizer's tables and cache kept, KiB */
    CFG_SYMBOLIZE_IDLE_SECONDS, /* idle time before libdw's state goes */
    CFG_TASKS_MAX,            /* live tasks (cpprof_task_create) at once */
    CFG_TRACE_KB,             /* the trace recorder's buffers, KiB in all */
    CFG_TRACE_FLIGHT_SECONDS, /* the flight recorder keeps this much; 0 off */
    CFG_TRACE_LOCK_US,        /* lock and condition waits traced from this */
    CFG__COUNT
} cfg_id;

/* The largest http_threads: the window threads' table is this long
 * (http_window.c), so it holds as many as any server makes. */
#define CFG_HTTP_THREADS_MAX 64

/* Integer settings. */
long cfg_int(cfg_id id);
/* String settings (valid until the setting changes). */
const char *cfg_str(cfg_id id);
/* The setting has been read for good (at load, or by a switch that cannot
 * be undone): cpprof_set() answers CPPROF_EFROZEN from now on, not a
 * change that would never act. */
void cfg_freeze(cfg_id id);
/* The environment's value was refused at load and nothing valid has been
 * set since: the setting holds its default, not what the user asked for. */
bool cfg_refused(cfg_id id);
/* The first of the HTTP server's settings whose value was refused, or -1. */
int cfg_server_refused(void);
/* Whether the server may listen on ss: 0 on loopback; elsewhere
 * CPPROF_EREMOTE without "http_allow_remote", CPPROF_ENOTOKEN without a
 * token while "http_require_token" is 1. */
struct sockaddr_storage;
int cfg_server_address_allowed(const struct sockaddr_storage *ss);
/* The setting's environment variable, CPPROF_<NAME>. */
void cfg_env_name(cfg_id id, char *buf, size_t len);

#endif
