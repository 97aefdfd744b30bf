/*
 * stack_min -- cpprof's public calls, and the program's calls cpprof
 * interposes, made on a thread of PTHREAD_STACK_MIN (16 KiB) stack, as a
 * program may run a small worker: for test/stack_min.sh.
 *
 * A call that keeps a large buffer on its caller's stack ran past such a
 * thread's guard page and the program died of SIGSEGV
 * (cpprof_cpu_profile_start read the queued-signal count into 8 KiB).
 * Each call here is made in turn on one such thread, the first ones
 * before anything loaded cpprof's upper object (so the first call loads
 * it there), and the stack each one used is measured: the thread's stack
 * below the caller is filled with a pattern before the call, and the
 * lowest byte the call changed tells how deep it went (signal handlers
 * that ran on the thread meanwhile, cpprof's sampler among them, count
 * too: they are cpprof's use of the caller's stack, and so does the
 * kernel's signal frame under them).  Prints
 *     stack BYTES                (PTHREAD_STACK_MIN)
 *     room BYTES                 (the stack below the first call)
 *     signal_frame BYTES         (the kernel's at least: AT_MINSIGSTKSZ)
 *     call NAME BYTES RESULT     (one per call; RESULT 0 or an error)
 * and "done", and exits 0 when every call returned what it should.  A
 * call that overruns the stack ends the program by SIGSEGV instead.
 *
 * Usage: stack_min FLIGHTFILE (run with CPPROF_TRACE_FLIGHT_SECONDS set:
 * the flight recorder's snapshot is written there).
 */
#define _GNU_SOURCE
#include "cpprof.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { PATTERN = 0xa5, PAINTER_FRAME = 512 };

static const char *flight_file;
static uintptr_t stack_lo; /* the thread's lowest usable address */
static bool failed;

/* Fills the stack below this function's frame (and the memset's) with
 * PATTERN, down to the stack's low end. */
static __attribute__((noinline)) void paint(void)
{
    volatile char here;
    uintptr_t top = (uintptr_t)&here - PAINTER_FRAME;
    memset((void *)stack_lo, PATTERN, top - stack_lo);
}

/* How far below `from` the pattern was changed. */
static size_t depth_below(uintptr_t from)
{
    const unsigned char *p = (const unsigned char *)stack_lo;
    while ((uintptr_t)p < from && *p == PATTERN)
        p++;
    return from - (uintptr_t)p;
}

static void burn(long ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    volatile uint64_t x = 1;
    do {
        for (int i = 0; i < 10000; i++)
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000L +
                 (t.tv_nsec - t0.tv_nsec) / 1000000L < ms);
}

/* ---- The calls ---------------------------------------------------------- */

static cpprof_labelset *set;
static cpprof_task task;

static int profile_start(void) { return cpprof_cpu_profile_start(); }

static int profile_stop(void)
{
    burn(200); /* samples to build, taken on this thread */
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = cpprof_cpu_profile_stop(&buf, &len);
    free(buf);
    return rc == 0 && len == 0 ? -ENODATA : rc;
}

static int labels(void)
{
    const char *kv[] = {"tenant", "acme", "shard", "7"};
    return cpprof_labels(&set, 4, kv);
}

static void labelled(void *arg, const cpprof_labelset *l)
{
    (void)l;
    *(int *)arg = cpprof_trace_log("stack_min", "inside cpprof_do");
}

static int do_labelled(void)
{
    int rc = -1;
    int done = cpprof_do(NULL, set, labelled, &rc);
    return done ? done : rc;
}

static int set_thread_labels(void) { return cpprof_set_thread_labels(set); }

static int trace_region(void)
{
    int rc = cpprof_trace_region_begin("stack_min");
    return rc ? rc : cpprof_trace_region_end("stack_min");
}

static int task_round(void)
{
    int rc = cpprof_task_create(&task, set);
    if (rc == 0)
        rc = cpprof_task_enter(task);
    if (rc == 0)
        rc = cpprof_task_leave(task, "queue", 0);
    if (rc == 0)
        rc = cpprof_task_end(task);
    return rc;
}

static void *nothing(void *arg) { return arg; }

static int thread_create(void)
{
    pthread_t t;
    int rc = cpprof_thread_create(&t, NULL, nothing, NULL);
    return rc ? rc : -pthread_join(t, NULL);
}

static int program_thread(void)
{
    pthread_t t;
    int rc = pthread_create(&t, NULL, nothing, NULL);
    return rc ? -rc : -pthread_join(t, NULL);
}

static int flight_write(void)
{
    int fd = open(flight_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    int rc = cpprof_trace_flight_write(fd);
    close(fd);
    return rc;
}

static int http_round(void)
{
    int rc = cpprof_http_start("127.0.0.1:0");
    return rc ? rc : cpprof_http_stop();
}

static int set_setting(void) { return cpprof_set("cpu_hz", "100"); }

static int accounting(void) { return cpprof_accounting_enable(); }

static int counter(void) { return cpprof_counter_add("stack_min_calls", 1); }

static int crash_handler(void) { return cpprof_crash_handler_install(); }

static int otel(void) { return cpprof_otel_context_enable(); }

static void on_usr1(int signo) { (void)signo; }

static int program_sigaction(void)
{
    struct sigaction sa = {.sa_handler = on_usr1};
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGUSR1, &sa, NULL) ? -errno : 0;
}

static int release(void)
{
    cpprof_labelset_release(set);
    set = NULL;
    return 0;
}

/* An exec that fails (no such file) runs the whole interposed execve and
 * returns; one that succeeds is judged by its status (run_in_child). */
static int exec_missing(void)
{
    char *argv[] = {"stack_min-missing", NULL};
    return execve("/nonexistent/stack_min-missing", argv, environ) == 0
               ? -EINVAL
               : errno == ENOENT ? 0 : -errno;
}

/* fork (cpprof's fork handlers run on this stack) and, in the child,
 * execv /bin/true on it: the child must exit 0. */
static int fork_exec(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        char *argv[] = {"true", NULL};
        execv("/bin/true", argv);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid)
        return -errno;
    if (WIFSIGNALED(status)) {
        printf("fork_exec: the child died of signal %d\n", WTERMSIG(status));
        return -EFAULT;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

static const struct call {
    const char *name;
    int (*run)(void);
} calls[] = {
    /* First: nothing loaded cpprof's upper object yet. */
    {"cpprof_cpu_profile_start", profile_start},
    {"cpprof_labels", labels},
    {"cpprof_do", do_labelled},
    {"cpprof_set_thread_labels", set_thread_labels},
    {"cpprof_trace_region", trace_region},
    {"cpprof_task", task_round},
    {"cpprof_thread_create", thread_create},
    {"pthread_create", program_thread},
    {"cpprof_cpu_profile_stop", profile_stop},
    {"cpprof_trace_flight_write", flight_write},
    {"cpprof_http_start_stop", http_round},
    {"cpprof_set", set_setting},
    {"cpprof_accounting_enable", accounting},
    {"cpprof_counter_add", counter},
    {"cpprof_crash_handler_install", crash_handler},
    {"cpprof_otel_context_enable", otel},
    {"sigaction", program_sigaction},
    {"execve", exec_missing},
    {"fork_execv", fork_exec},
    {"cpprof_labelset_release", release},
};

/* Runs one call on painted stack and prints how deep it went. */
static __attribute__((noinline)) void measure(const struct call *c)
{
    volatile char here;
    paint();
    int rc = c->run();
    printf("call %s %zu %d\n", c->name, depth_below((uintptr_t)&here), rc);
    fflush(stdout);
    if (rc != 0) {
        printf("%s: %s\n", c->name, cpprof_strerror(rc));
        failed = true;
    }
}

static void *run_calls(void *arg)
{
    (void)arg;
    pthread_attr_t attr;
    void *lo;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0 ||
        pthread_attr_getstack(&attr, &lo, &size) != 0) {
        failed = true;
        return NULL;
    }
    pthread_attr_destroy(&attr);
    stack_lo = (uintptr_t)lo;
    volatile char here;
    printf("stack %zu\nroom %zu\nsignal_frame %lu\n",
           (size_t)PTHREAD_STACK_MIN, (size_t)((uintptr_t)&here - stack_lo),
           getauxval(AT_MINSIGSTKSZ));
    fflush(stdout); /* a call that overruns the stack loses no line */
    for (size_t i = 0; i < sizeof calls / sizeof *calls; i++)
        measure(&calls[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: stack_min FLIGHTFILE\n");
        return 2;
    }
    flight_file = argv[1];
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN);
    int rc = pthread_create(&t, &attr, run_calls, NULL);
    if (rc != 0) {
        fprintf(stderr, "stack_min: pthread_create: %s\n", strerror(rc));
        return 2;
    }
    pthread_join(t, NULL);
    printf("done\n");
    return failed ? 1 : 0;
}
