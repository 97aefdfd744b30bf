/*
 * crash.c -- labels in crash tracebacks: Go 1.27 prints a goroutine's
 * labels when it panics; this is the C form, for the fatal signals.
 *
 * An opt-in handler (cpprof_crash_handler_install(), or CPPROF_CRASH_HANDLER
 * =1 at load) for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT writes to
 * stderr the signal, then the crashing thread as a goroutine of Go's
 * dumps in the lines goroutine?debug=2 is written in (godump.h), which
 * Go's parsers (panicparse) read: its header, the one debug=2 gives the
 * same thread (tid, name, label set unless the "tracebacklabels" setting
 * is 0, as GODEBUG=tracebacklabels=0), its frames named by object and
 * address (unwind_pc_name: "libc.so.6+0x891f5(...)" and "\t??:0"), who
 * created the thread (threadcreate.h), and the executable mappings of
 * /proc/self/maps, which place each object for addr2line or pprof.
 * Nothing is symbolized: naming a function needs the symbolizer's tables
 * and libdw, which allocate and lock, and the crashed process's heap or
 * locks may be what broke.  It then puts
 * back the signal's previous action and raises the signal again, so the
 * process dies exactly as it would have (same signal, same exit status,
 * same core dump), or the application's own handler, if it had one, runs.
 *
 * The handler runs in a process that is already broken, so it is strictly
 * async-signal-safe: no allocation, no locks, no stdio; numbers are
 * formatted by hand and written with write(2) (warn_write: only to the
 * stderr found at load).  The stack comes from the
 * signal-safe walker (unwind.h: CFI rows, frame pointers where there are
 * none), whose tables are read at install time (and refreshed by the
 * census and the CPU sampler): a
 * thread whose stack is newer than the last refresh gets its crashing PC
 * only, not a walk through memory nobody checked.
 */
#define _GNU_SOURCE
#include "config.h"
#include "cpprof.h"
#include "godump.h"
#include "interpose.h"
#include "procmaps.h"
#include "thread.h"
#include "threadcreate.h"
#include "unwind.h"
#include "warn.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
#define NCRASH (sizeof crash_signals / sizeof crash_signals[0])

static struct sigaction previous[NCRASH];
static pthread_mutex_t install_mu = PTHREAD_MUTEX_INITIALIZER;
static bool installed; /* under install_mu */

/* ---- The handler: everything in this section is SIGNAL-SAFE ------------ */

/* The report's parts are not inlined into one another, so that each
 * one's buffers are on the stack only while it runs: the handler may run
 * on a small sigaltstack (CRASH_REPORT_STACK). */
#define NOINLINE __attribute__((noinline))

/* A line being assembled for one write(2). */
struct line {
    char buf[512];
    size_t n;
};

static void put_str(struct line *l, const char *s)
{
    for (; *s && l->n < sizeof l->buf; s++)
        l->buf[l->n++] = *s;
}

static void put_uint(struct line *l, unsigned long v, unsigned base)
{
    char digits[24];
    size_t n = 0;
    do {
        digits[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    if (base == 16)
        put_str(l, "0x");
    while (n && l->n < sizeof l->buf)
        l->buf[l->n++] = digits[--n];
}

static void flush_line(struct line *l)
{
    if (l->n == sizeof l->buf)
        l->n--;
    l->buf[l->n++] = '\n';
    warn_write(l->buf, l->n);
    l->n = 0;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "SIGSEGV: segmentation violation";
    case SIGBUS: return "SIGBUS: bus error";
    case SIGILL: return "SIGILL: illegal instruction";
    case SIGFPE: return "SIGFPE: floating-point exception";
    default: return "SIGABRT: abort";
    }
}

/* SIGSEGV: segmentation violation / PC=0x... addr=0x... sigcode=1 */
static NOINLINE void write_signal(int sig, const siginfo_t *si, uintptr_t pc)
{
    struct line l = {.n = 0};
    put_str(&l, "cpprof: ");
    put_str(&l, signal_name(sig));
    flush_line(&l);
    put_str(&l, "PC=");
    put_uint(&l, pc, 16);
    if (sig != SIGABRT) {
        put_str(&l, " addr=");
        put_uint(&l, (uintptr_t)si->si_addr, 16);
    }
    put_str(&l, " sigcode=");
    if (si->si_code < 0) {
        put_str(&l, "-");
        put_uint(&l, (unsigned long)-(long)si->si_code, 10);
    } else {
        put_uint(&l, (unsigned long)si->si_code, 10);
    }
    flush_line(&l);
}

/* One of godump.h's lines, cut short to the buffer (a goroutine header
 * with labels beyond it ends "...]:"), with its newline. */
static void put_dump_line(char *line, size_t len, size_t need)
{
    if (need >= len) {
        need = len - 1;
        if (need >= 5 && line[0] == 'g')
            memcpy(line + need - 5, "...]:", 5);
    }
    line[need++] = '\n';
    warn_write(line, need);
}

/* The crashing thread's goroutine header (godump.h): the same as its
 * block in goroutine?debug=2 while it runs, "goroutine TID [running,
 * thread \"NAME\", labels:{...}]:", after a blank line as Go's is. */
static NOINLINE void write_thread(void)
{
    char name[17] = {0};
    prctl(PR_GET_NAME, name);
    godump_goroutine g = {.id = (uint64_t)gettid(), .state = "running",
                          .thread = name,
                          .labels = thread_labels_if_tid(gettid())};
    char line[768];
    warn_write("\n", 1);
    put_dump_line(line, sizeof line,
                  godump_header(line, sizeof line, &g));
}

/* A frame whose function and file are not known here (nothing is
 * symbolized in a crashed process): named by its object and address
 * there (unwind_pc_name), "??" as the file. */
static void write_raw_frame(uintptr_t pc)
{
    char name[128], line[160];
    unwind_pc_name(pc, name, sizeof name);
    put_dump_line(line, sizeof line,
                  godump_function(line, sizeof line, name));
    put_dump_line(line, sizeof line,
                  godump_file(line, sizeof line, "", 0, false, 0));
}

/* The frames, "...additional frames elided..." (Go's line) after a walk
 * cut short, and "created by" when cpprof saw the thread created; then a
 * blank line, which ends the goroutine for a parser. */
static NOINLINE void write_stack(const uintptr_t *pcs, size_t depth,
                                 unsigned flags)
{
    for (size_t i = 0; i < depth; i++)
        write_raw_frame(pcs[i]);
    if (flags & STACK_TRUNCATED) {
        static const char elided[] = "...additional frames elided...\n";
        warn_write(elided, sizeof elided - 1);
    }
    pid_t creator;
    uintptr_t at;
    if (threadcreate_creator(gettid(), &creator, &at)) {
        char name[128], line[192];
        unwind_pc_name(at, name, sizeof name);
        put_dump_line(line, sizeof line,
                      godump_created_by(line, sizeof line, name,
                                        (uint64_t)creator));
        put_dump_line(line, sizeof line,
                      godump_file(line, sizeof line, "", 0, false, 0));
    }
    warn_write("\n", 1);
}

/* Whether a line of /proc/self/maps (perhaps cut short: its path) is an
 * executable mapping.  Not inlined into write_mappings, so that the parsed
 * line is on the stack only while it is looked at. */
static NOINLINE bool is_executable(const char *text, size_t len)
{
    procmaps_line m;
    return procmaps_parse(text, len, &m) && m.perms[2] == 'x';
}

/* Copies the executable lines of /proc/self/maps to stderr. */
static NOINLINE void write_mappings(void)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    struct line l = {.n = 0};
    put_str(&l, "executable mappings:");
    flush_line(&l);
    char chunk[256]; /* small: the handler may run on a small altstack */
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (chunk[i] != '\n') {
                if (l.n < sizeof l.buf - 1)
                    l.buf[l.n++] = chunk[i];
                continue;
            }
            if (is_executable(l.buf, l.n))
                flush_line(&l);
            l.n = 0;
        }
    }
    close(fd);
}

static int crash_index(int sig)
{
    for (size_t i = 0; i < NCRASH; i++)
        if (crash_signals[i] == sig)
            return (int)i;
    return 0;
}

/* SIGNAL-SAFE: the whole report.  Not inlined: its frame (the PCs) and
 * its callees' are allocated only once on_crash found room for them. */
static __attribute__((noinline)) void report(int sig, siginfo_t *si,
                                             void *uc)
{
    uintptr_t pcs[STACK_MAX_FRAMES];
    unsigned flags;
    size_t depth = unwind_context(uc, pcs, STACK_MAX_FRAMES, &flags, NULL);
    write_signal(sig, si, pcs[0]);
    write_thread();
    write_stack(pcs, depth, flags);
    write_mappings();
}

/* What report and its callees may use below on_crash's frame address
 * (gcc -fstack-usage as in unwind.h, ASan+UBSan in brackets): on_crash's
 * 64 [64], report's 576 [736] (its PCs), then the deepest of the walk
 * (UNWIND_CONTEXT_STACK), write_thread about 900 (its 768-byte line) with
 * godump_header's small frames, write_stack about 500 (a name and a line)
 * with godump's small frames,
 * write_mappings 848 [1,184] (a chunk and a line) with is_executable 80
 * [208], procmaps_parse 96 [336] and take_number 32 [96]. */
#define CRASH_REPORT_STACK (UNWIND_CONTEXT_STACK + 1024)

/* SIGNAL-SAFE.  A crash on a stack with too little left for the report
 * (a stack overflow caught on a small sigaltstack) gets one line. */
static void on_crash(int sig, siginfo_t *si, void *uc)
{
    int saved_errno = errno;
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    if (unwind_stack_left(uc, sp) >= CRASH_REPORT_STACK) {
        report(sig, si, uc);
    } else {
        static const char short_of_stack[] =
            "cpprof: fatal signal; too little stack left for a report\n";
        ssize_t w = write(STDERR_FILENO, short_of_stack,
                          sizeof short_of_stack - 1);
        (void)w;
    }
    /* The previous action takes over; the signal, blocked while this
     * handler runs, is delivered to it as soon as we return. */
    __sigaction(sig, &previous[crash_index(sig)], NULL);
    raise(sig);
    errno = saved_errno;
}

/* ---- Installing --------------------------------------------------------- */

int cpprof_crash_handler_install(void)
{
    pthread_mutex_lock(&install_mu);
    int rc = 0;
    if (!installed) {
        /* The walker reads memory only inside the regions of this table. */
        unwind_refresh_maps();
        struct sigaction sa = {0};
        sa.sa_sigaction = on_crash;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; rc == 0 && i < NCRASH; i++)
            if (sigaction(crash_signals[i], &sa, &previous[i]) != 0)
                rc = -errno;
        installed = rc == 0;
    }
    pthread_mutex_unlock(&install_mu);
    return rc;
}

/* CPPROF_CRASH_HANDLER=1: the settings are read by then (config.c's
 * constructor runs first). */
__attribute__((constructor)) static void crash_handler_from_environment(void)
{
    cfg_freeze(CFG_CRASH_HANDLER);
    if (cfg_int(CFG_CRASH_HANDLER))
        cpprof_crash_handler_install();
}
