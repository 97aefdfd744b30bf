/*
 * cpprof.h -- the whole public API of cpprof.
 *
 * cpprof gives C and C++ programs what Go programs get from runtime/pprof
 * labels and net/http/pprof: string key/value labels attached to a thread,
 * copied onto every CPU sample and shown in the thread census, and an
 * embedded HTTP server serving /debug/pprof/ to `go tool pprof`, curl and
 * continuous profilers.
 *
 * Conventions (as in libuv and jansson): one prefix, opaque types, and every
 * call that can fail returns 0 or a negative error code; cpprof_strerror()
 * turns a code into a message.  Label sets are immutable values: build one,
 * pass it around like Go's context, and apply it to a thread as a separate
 * step (cpprof_do() scoped, cpprof_set_thread_labels() unscoped).
 */
#ifndef CPPROF_H
#define CPPROF_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpprof_version.h"

/* What libcpprof.so exports, which is built with -fvisibility=hidden
 * (docs/abi.md), as libuv's UV_EXTERN. */
#if defined(__GNUC__)
#define CPPROF_API __attribute__((visibility("default")))
#else
#define CPPROF_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ----------------------------------------------------------- */

/* The version of the library the program runs with, as CPPROF_VERSION_HEX
 * (cpprof_version.h) is the one it was compiled against: 0xMMmmpp. */
CPPROF_API unsigned int cpprof_version(void);

/* ---- Errors ------------------------------------------------------------ */

/* Errors are negative.  Plain errno values (-EINVAL, -ENOMEM, ...) are used
 * where they say enough; the codes below say what errno cannot. */
enum cpprof_error {
    CPPROF_EUNEVEN = -10001,   /* odd number of strings for key/value pairs */
    CPPROF_ENULLKEY = -10002,  /* a label key is NULL */
    CPPROF_EEMPTYKEY = -10003, /* a label key is the empty string */
    CPPROF_ENULLVALUE = -10004,/* a label value is NULL */
    CPPROF_EBUSY = -10005,     /* CPU profiling already in use */
    CPPROF_ESIGTAKEN = -10006, /* the profiling signal has another handler */
    CPPROF_ESETTING = -10007,  /* no setting of that name */
    CPPROF_EVALUE = -10008,    /* bad value for a setting */
    CPPROF_ERUNNING = -10009,  /* the HTTP server is already running */
    CPPROF_ENOTRUNNING = -10010,/* the HTTP server or profile is not running */
    CPPROF_EREMOTE = -10011,   /* non-loopback address without the
                                  "http_allow_remote" setting */
    CPPROF_ENOTOKEN = -10012,  /* non-loopback address without an
                                  "http_token" (or http_require_token=0) */
    CPPROF_EFROZEN = -10013,   /* a setting that is read once, and was */
    CPPROF_ENOTIMER = -10014,  /* the system refused a CPU-time timer
                                  (timer_create: seccomp, a container) */
    CPPROF_EREFUSED = -10015,  /* a setting the HTTP server depends on was
                                  refused at load: it does not start */
    CPPROF_ETLS = -10016,      /* a TLS file (http_tls_*) cannot be used;
                                  stderr names it and why */
    CPPROF_EADDRFORM = -10017, /* the address is not HOST:PORT */
    CPPROF_EADDRHOST = -10018, /* its HOST is not an IPv4 address, [IPv6],
                                  localhost or empty */
    CPPROF_EADDRPORT = -10019, /* its PORT is not a number in 0..65535 */
    CPPROF_ENOPROC = -10020,   /* /proc/self/task cannot be opened (no /proc
                                  in a chroot, or not mounted) */
    CPPROF_ETASKLIMIT = -10021,  /* as many tasks live as "tasks_max" */
    CPPROF_ETASKENDED = -10022,  /* not a live task: ended, or never made */
    CPPROF_ETASKRUNNING = -10023,/* the task runs on another thread */
    CPPROF_ETASKNOTHERE = -10024,/* the calling thread does not run it */
    CPPROF_ETASKBUSY = -10025,   /* the calling thread runs a task already */
    CPPROF_EUPPER = -10026,      /* libcpprof-upper.so (the HTTP server, the
                                    CPU profile's encoder, the symbolizer)
                                    cannot be loaded; stderr says why */
    CPPROF_ESCOPEMOVED = -10027, /* a label scope ended on another thread
                                    or task than it began on */
    CPPROF_ENOTRACE = -10028     /* the flight recorder is off (setting
                                    "trace_flight_seconds") */
};

/* A message for any code returned by cpprof (never NULL). */
CPPROF_API const char *cpprof_strerror(int code);

/* ---- Label sets (Go: pprof.Labels, WithLabels, Label, ForLabels) -------- */

/* An immutable, interned, reference-counted set of key/value strings,
 * sorted by key.  NULL is a valid set: the empty one. */
typedef struct cpprof_labelset cpprof_labelset;

/* Builds a set from `n` strings: key, value, key, value...  A duplicate key
 * keeps its later value.  On success *out holds a reference the caller
 * releases with cpprof_labelset_release().  Errors: CPPROF_EUNEVEN,
 * CPPROF_ENULLKEY, CPPROF_EEMPTYKEY, CPPROF_ENULLVALUE, -ENOMEM, -EINVAL. */
CPPROF_API int cpprof_labels(cpprof_labelset **out, size_t n,
                             const char *const *kv);

/* Like cpprof_labels() but starting from `parent` (may be NULL): a key in
 * kv overrides the parent's value; the parent is unchanged. */
CPPROF_API int cpprof_labels_with(cpprof_labelset **out,
                                  const cpprof_labelset *parent, size_t n,
                                  const char *const *kv);

/* Reference counting.  Both accept NULL. */
CPPROF_API cpprof_labelset *cpprof_labelset_ref(const cpprof_labelset *set);
CPPROF_API void cpprof_labelset_release(const cpprof_labelset *set);

/* Looks up one key.  *found says whether it was there; *value is set to the
 * value (valid while the set is) or to NULL.  Error: -EINVAL. */
CPPROF_API int cpprof_label(const cpprof_labelset *set, const char *key,
                            const char **value, bool *found);

/* Number of pairs in the set (0 for NULL). */
CPPROF_API size_t cpprof_labelset_size(const cpprof_labelset *set);

/* Calls fn for each pair in key order until fn returns false. */
typedef bool (*cpprof_label_fn)(const char *key, const char *value, void *arg);
CPPROF_API int cpprof_labels_foreach(const cpprof_labelset *set,
                                     cpprof_label_fn fn, void *arg);

/* Writes Go's printed form, {"k1":"v1", "k2":"v2"}, into buf (always NUL
 * terminated when len > 0).  Returns the length the whole text needs, like
 * snprintf, or a negative error. */
CPPROF_API int cpprof_labelset_format(const cpprof_labelset *set, char *buf,
                                      size_t len);

/* ---- Applying labels to threads (Go: pprof.Do, SetGoroutineLabels) ------ */

/* The calling thread's current set, with a reference for the caller
 * (NULL when it has no labels). */
CPPROF_API cpprof_labelset *cpprof_thread_labels(void);

/* Sets the calling thread's labels to `set` (NULL clears them), with no
 * restore.  Takes its own reference. */
CPPROF_API int cpprof_set_thread_labels(const cpprof_labelset *set);

/* The function cpprof_do() runs: `labels` is the derived set in force. */
typedef void (*cpprof_do_fn)(void *arg, const cpprof_labelset *labels);

/* Go's pprof.Do: derives parent-plus-labels (parent NULL means the calling
 * thread's current set; CPPROF_BACKGROUND, no labels at all), applies it to
 * the calling thread, runs fn(arg, derived) and restores the thread's
 * previous set on every exit path: a normal return, a C++ exception or a
 * pthread_cancel unwinding through it.  The caller keeps its references to
 * parent and labels for the call.
 *
 * A longjmp (or siglongjmp) out of fn skips the restore: the thread keeps
 * the derived set.  Code that jumps out takes the set before the call with
 * cpprof_thread_labels() and puts it back with cpprof_set_thread_labels()
 * where it lands.  cpprof_do is not async-signal-safe; from a signal
 * handler that interrupted cpprof on the same thread (building a set, or
 * the thread's first use) it returns -EDEADLK instead of deadlocking.
 * Errors: -EINVAL, -ENOMEM, -EDEADLK; CPPROF_ESCOPEMOVED after fn ran,
 * when fn returned on another thread or task (cpprof_scope_end). */
CPPROF_API int cpprof_do(const cpprof_labelset *parent,
                         const cpprof_labelset *labels, cpprof_do_fn fn,
                         void *arg);

/* cpprof_do()'s explicitly empty parent, Go's Do(context.Background(),
 * ...): the derived set is `labels` alone, whatever the thread holds.  Only
 * cpprof_do() accepts it (it is not a set). */
CPPROF_API extern const char cpprof_background_parent[];
#define CPPROF_BACKGROUND \
    ((const cpprof_labelset *)(const void *)cpprof_background_parent)

/* cpprof_do() as two calls, for code whose scope is a block, not a
 * callback (C++'s cpprof::scope): cpprof_scope_begin applies what
 * cpprof_do would (parent and labels alike), cpprof_scope_end puts back
 * the set the thread had before.  Scopes nest and end in reverse order.
 * The struct is the caller's (on its stack), its contents cpprof's.
 *
 * A scope must end in the work it began in: on the same thread, or in the
 * same task (a task carries its labels from thread to thread, so a scope
 * may span its leave and enter).  One that ends elsewhere -- held across a
 * coroutine's co_await or a fiber switch without a task -- would put one
 * thread's labels on another: cpprof_scope_end then changes no thread's
 * labels, says so on stderr once, and returns CPPROF_ESCOPEMOVED (as does
 * cpprof_do, after its function ran).  docs/tasks.md shows the fix.
 * Errors of begin (nothing applied): -EINVAL, -ENOMEM, -EDEADLK; of end:
 * CPPROF_ESCOPEMOVED, -EINVAL for a scope ended already (nothing
 * changed).  A scope's struct must be zeroed or begun before its end. */
typedef struct cpprof_scope {
    void *opaque_[6];
} cpprof_scope;
CPPROF_API int cpprof_scope_begin(cpprof_scope *scope,
                                  const cpprof_labelset *parent,
                                  const cpprof_labelset *labels);
CPPROF_API int cpprof_scope_end(cpprof_scope *scope);

/* pthread_create whose new thread starts with the creator's current labels,
 * as a goroutine inherits its creator's, whatever the setting
 * "inherit_labels" says (with it on, the default, every pthread_create
 * does the same).  Returns 0 or a negative errno. */
CPPROF_API int cpprof_thread_create(pthread_t *thread,
                                    const pthread_attr_t *attr,
                                    void *(*start)(void *), void *arg);

/* Number of label sets folded into the overflow set by the cardinality cap
 * (setting "label_cap"). */
CPPROF_API unsigned long cpprof_labelsets_folded(void);

/* ---- Tasks: labels that follow the work (Go: the goroutine) ------------
 *
 * A task is a unit of work that moves between threads: a job taken from a
 * queue, a connection's callbacks on an event loop, a coroutine resumed by
 * whichever pool thread is free.  Like a goroutine it carries a label set
 * of its own.  The thread that runs it holds the task's labels (CPU
 * samples, accounting and the OpenTelemetry context see them); when it
 * leaves, the thread gets back the labels it had before, and the task
 * takes along any label the work applied meanwhile (cpprof_do,
 * cpprof_set_thread_labels) to the next thread that enters it.  While it
 * is parked, the goroutine profile lists it with its labels, the reason
 * it parked, how long ago, and the stack where it did.  A thread that
 * runs no task is what it always was.  A thread that exits while it
 * runs a task leaves it, with the reason "thread exited" (stderr says so,
 * once): the task keeps its labels, to be entered elsewhere or ended.
 * docs/tasks.md.
 *
 * A task is a handle, a value: a handle whose task has ended stays
 * recognisably stale (CPPROF_ETASKENDED), however often its record is
 * reused.  Enter and leave take no lock, allocate nothing and make no
 * system call (but a thread's first use of the label API registers it,
 * and leave's stack walk reads the thread's stack bounds once). */
typedef struct cpprof_task {
    uint64_t id; /* 0: no task */
} cpprof_task;

/* Makes a task, parked, carrying `labels` (NULL: the calling thread's
 * current set, as a goroutine inherits its creator's; CPPROF_BACKGROUND:
 * none), with the creating call's stack and the reason "new" until it is
 * first entered.  Takes its own reference.  At most the setting
 * "tasks_max" tasks are live at once.  Errors: CPPROF_ETASKLIMIT, -EINVAL,
 * -ENOMEM. */
CPPROF_API int cpprof_task_create(cpprof_task *task,
                                  const cpprof_labelset *labels);

/* The calling thread runs `task` from now: the task's labels become the
 * thread's, the thread's own kept for cpprof_task_leave.  Errors (nothing
 * changed): CPPROF_ETASKENDED, CPPROF_ETASKRUNNING (another thread runs
 * it), CPPROF_ETASKBUSY (this thread runs a task: tasks do not nest),
 * -ENOMEM (the thread's first use of the API could not register it). */
CPPROF_API int cpprof_task_enter(cpprof_task task);

/* cpprof_task_leave() at its cheapest: no stack walk (the census shows
 * the task with no stack, "left without its stack") and no clock read (its
 * wait is timed from the first census that finds it parked, as Go times a
 * goroutine's from the first garbage collection that does). */
#define CPPROF_TASK_NO_STACK 1u

/* The calling thread stops running `task`, which parks: it keeps the
 * thread's current labels, the thread gets back those it had at enter.
 * `reason` says what it waits for ("io", "queue", "timer"; NULL:
 * "parked"), as Go's goroutine dump does ("chan receive"): a string that
 * lives as long as the task (a literal), kept by address.  The stack of
 * this call is recorded, unless `flags` has CPPROF_TASK_NO_STACK.
 * Errors (nothing changed): CPPROF_ETASKENDED, CPPROF_ETASKNOTHERE (parked,
 * or run by another thread), -EINVAL (unknown flags). */
CPPROF_API int cpprof_task_leave(cpprof_task task, const char *reason,
                                 unsigned flags);

/* Ends a parked task, or the one the calling thread runs (which leaves it
 * first); its handle is stale from then on.  Errors (nothing changed):
 * CPPROF_ETASKENDED (ended twice), CPPROF_ETASKRUNNING (another thread
 * runs it). */
CPPROF_API int cpprof_task_end(cpprof_task task);

/* The task the calling thread runs, or {0}. */
CPPROF_API cpprof_task cpprof_task_current(void);

/* ---- Fleet profilers (OpenTelemetry thread and process context) -------- */

/* Publishes every thread's current labels where out-of-process profilers
 * read them: the OpenTelemetry thread context (TLS symbol
 * otel_thread_ctx_v1, OTEP 4947) with its key table in the process context
 * (the OTEL_CTX mapping, OTEP 4719, with service.name from the
 * "service_name" setting), and the polarsignals custom-labels v1 symbols.
 * Each label set's record is built once, on its first use; applying a set
 * then costs two pointer stores more.  A thread's labels appear from its
 * next apply (the calling thread's at once).  There is no off switch: the
 * context stays until the process exits.  Calling it again republishes the
 * process context (after changing "service_name").  The environment
 * variable CPPROF_OTEL_CONTEXT=1 calls it at load.  Returns 0 or a
 * negative errno. */
CPPROF_API int cpprof_otel_context_enable(void);

/* Like cpprof_labels_with(): parent plus a W3C trace context, stored as the
 * labels "trace_id" (32 lowercase hex digits), "span_id" (16) and
 * "trace_flags" (2), which pprof shows as labels and the OpenTelemetry
 * thread context carries in its trace-id, span-id and trace-flags fields.
 * Each span makes a new set, so the "label_cap" setting bounds how many
 * spans can be live at once.  Errors as cpprof_labels_with(). */
CPPROF_API int cpprof_labels_with_trace(cpprof_labelset **out,
                                        const cpprof_labelset *parent,
                                        const uint8_t trace_id[16],
                                        const uint8_t span_id[8],
                                        uint8_t trace_flags);

/* ---- Per-label-set accounting (README, "Per-tenant memory and contention")
 *
 * Exact counters per label set, for ops tooling rather than profiles: CPU
 * time, bytes and objects allocated (through the interposed allocator), time
 * blocked waiting for contended pthread mutexes and rwlocks (while block or
 * mutex profiling is on), threads holding the set now, and the
 * application's own counters.  Served as JSON at /debug/pprof/accounting and
 * as Prometheus text at /metrics. */

/* Starts accounting for the whole process, for good (there is no off
 * switch).  Each thread is accounted from its first label switch after
 * this call; while it keeps one set, a timer on its CPU-time clock
 * (setting "accounting_hz", default 19 per CPU-second; signal
 * "accounting_signal", default 40) brings its CPU count up to date.
 * Applying a set then costs two cycle-counter reads more per scoped apply
 * (bench/accounting), or none with the setting "accounting_cpu" set to
 * "sampled", where only the tick charges CPU, to the set held then.  The
 * environment variable CPPROF_ACCOUNTING=1 calls it at load.  Calling it
 * again does nothing.  Errors: CPPROF_ESIGTAKEN (the application handles
 * that signal), -errno. */
CPPROF_API int cpprof_accounting_enable(void);

/* Adds `value` to the counter `name` of the calling thread's current label
 * set (the empty set when it has none), served as cpprof_user_NAME_total.
 * `name` matches [a-zA-Z_][a-zA-Z0-9_]* and has at most 48 characters; at
 * most 32 distinct names per process.  Works whether or not accounting is
 * enabled.  Errors: -EINVAL (bad name), -ENOSPC (too many names),
 * -ENOMEM. */
CPPROF_API int cpprof_counter_add(const char *name, uint64_t value);

/* ---- Settings ------------------------------------------------------------ */

/* Every setting has a name and an environment variable CPPROF_<NAME> read at
 * load time (README lists them all), except in a setuid, setgid or
 * file-capability process (AT_SECURE), which ignores them all.  cpprof_set() changes one at run time;
 * errors: CPPROF_ESETTING, CPPROF_EVALUE (with the setting unchanged), and
 * CPPROF_EFROZEN for a setting read once that has been: those acting at
 * load (accounting, crash_handler, otel_context, http) from then on, and
 * accounting_hz, accounting_signal and accounting_cpu once accounting is
 * enabled, which cannot be undone. */
CPPROF_API int cpprof_set(const char *name, const char *value);

/* ---- Unlabelled profiles (Go: SetBlockProfileRate, SetMutexProfileFraction)
 *
 * The heap, allocs, block, mutex and threadcreate profiles carry no labels,
 * exactly as in Go (README, "Unlabelled profiles").  Allocation sampling is
 * on by default (setting "mem_profile_rate", 524288 bytes, 0 turns it off);
 * block and mutex profiling are off until enabled here or by the settings
 * "block_profile_rate" and "mutex_profile_fraction". */

/* Go's runtime.SetBlockProfileRate: one blocking event sampled per `rate_ns`
 * nanoseconds spent blocked (1: every event; <= 0: off). */
CPPROF_API void cpprof_set_block_profile_rate(long rate_ns);

/* Go's runtime.SetMutexProfileFraction: on average 1 in `fraction`
 * contention events is reported (0: off; negative: only reads).  Returns
 * the previous fraction. */
CPPROF_API int cpprof_set_mutex_profile_fraction(int fraction);

/* ---- CPU profiling and the HTTP server ---------------------------------- */

/* Starts a CPU profile of every thread at the "cpu_hz" rate.
 * Errors: CPPROF_EBUSY, CPPROF_ESIGTAKEN, CPPROF_ENOTIMER, -errno. */
CPPROF_API int cpprof_cpu_profile_start(void);

/* Stops the running CPU profile and returns it as gzip-compressed
 * profile.proto in *buf (free() it).  Error: CPPROF_ENOTRUNNING. */
CPPROF_API int cpprof_cpu_profile_stop(unsigned char **buf, size_t *len);

/* Serves /debug/pprof/ on addr, "HOST:PORT" (NULL: the "http_addr" setting,
 * default 127.0.0.1:6060), on threads of its own.  HOST is an IPv4
 * address, an IPv6 one in brackets ("[::1]:6060"), "localhost" or empty
 * (":6060"); the last two mean 127.0.0.1, never every interface as in Go.
 * A bad address: CPPROF_EADDRFORM, CPPROF_EADDRHOST or CPPROF_EADDRPORT.  Only loopback addresses
 * unless the "http_allow_remote" setting is 1 (else CPPROF_EREMOTE); a
 * non-loopback server then needs the "http_token" setting (else
 * CPPROF_ENOTOKEN, unless "http_require_token" is 0).  When a token is set,
 * every request must carry "Authorization: Bearer TOKEN" or gets a 401.
 * When the environment gave an http_* setting a value that was refused
 * (stderr said which), the server does not start: CPPROF_EREFUSED, until
 * cpprof_set() gives the setting a valid value.
 * Limits: settings "http_max_connections", "http_connection_timeout"
 * (idle seconds), "http_max_body" (bytes).  Zero-code mode: with the
 * environment variable CPPROF_HTTP=HOST:PORT the library starts the server
 * itself when it is loaded (e.g. with LD_PRELOAD). */
CPPROF_API int cpprof_http_start(const char *addr);

/* Stops the server and frees everything it holds. */
CPPROF_API int cpprof_http_stop(void);

/* ---- Traces (Go: runtime/trace; /debug/pprof/trace) --------------------- */

/* Marks the start and end of a named region of the calling thread's work
 * in a trace being recorded (Go: trace.StartRegion, Region.End): the
 * trace's timeline draws it as a span.  Regions nest; end them in reverse
 * order, by the same name.  Names are copied (at most 127 bytes kept).
 * While no trace or flight recorder records: nothing but a branch.
 * 0, or -EINVAL for a NULL name. */
CPPROF_API int cpprof_trace_region_begin(const char *name);
CPPROF_API int cpprof_trace_region_end(const char *name);

/* An instant event with a message on the calling thread's timeline (Go:
 * trace.Log); category may be NULL.  Texts are copied (127 bytes each).
 * 0, or -EINVAL for a NULL message. */
CPPROF_API int cpprof_trace_log(const char *category, const char *message);

/* Writes the flight recorder's last "trace_flight_seconds" (the setting,
 * or CPPROF_TRACE_FLIGHT_SECONDS, which turns it on at load) to fd in
 * Perfetto's format, for a program's own "something went wrong" path (not
 * from a signal handler: it symbolizes and allocates).  0;
 * CPPROF_ENOTRACE when the flight recorder is off; a negative errno when
 * writing fails. */
CPPROF_API int cpprof_trace_flight_write(int fd);

/* ---- Crash tracebacks (Go 1.27: labels in tracebacks) -------------------- */

/* Installs a handler for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT that
 * writes to stderr the signal, the crashing thread's id, name and labels
 * (left out when the "tracebacklabels" setting is 0, as Go's
 * GODEBUG=tracebacklabels=0), its stack as raw PCs and the executable
 * mappings, using only async-signal-safe calls; it then restores the
 * signal's previous action and raises it again, so the process dies as it
 * would have (same signal, exit status and core dump), or the
 * application's own handler runs.  Calling it again does nothing.  The
 * environment variable CPPROF_CRASH_HANDLER=1 installs it at load.
 * Returns 0 or a negative errno. */
CPPROF_API int cpprof_crash_handler_install(void);

#ifdef __cplusplus
}
#endif

#endif /* CPPROF_H */
