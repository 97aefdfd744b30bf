/*
 * stress_sampler.c -- the CPU profiler at 1000 Hz against the things that
 * deadlock or crash profilers whose signal handler unwinds: for 60 s (or
 * argv[1] seconds, or STRESS_SECONDS) worker threads dlopen and dlclose a
 * library, throw and catch C++ exceptions, call backtrace() and allocate
 * heavily (all of them take the loader lock or the allocator's locks), and
 * start short-lived threads, while the main thread takes one 5-second
 * profile after another.  This program and the library are built without
 * frame pointers (Makefile.am), so every sample is walked by call-frame
 * information, as in users' programs, through tables that are built for
 * each library dlopened and dropped with each dlclose.
 *
 * It fails when a worker makes no progress for 10 s, or the profile loop
 * none for 60 s (the watchdog aborts: a deadlock), when it crashes, or when a profile is
 * not valid: google/pprof's parser (test/gocheck) must accept every one,
 * and every worker's label must appear in it.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROFILE_SECONDS 5
#define STALL_SECONDS 10
/* One turn of the profile loop: PROFILE_SECONDS of profiling, then the
 * stop symbolizes every new pc.  That takes about 1 s, but 11 s under
 * ThreadSanitizer (libdw's locks are intercepted, and libtsan's own large
 * compilation units are walked for its frames); a deadlock never ends, so
 * a generous limit finds it as surely. */
#define PROFILE_STALL_SECONDS 60

int stress_throw_catch(int depth);

struct worker {
    const char *kind;          /* the value of its "stress" label */
    void (*step)(void);        /* one unit of work, repeated */
    atomic_ulong progress;     /* steps done */
    pthread_t thread;
};

static atomic_bool stopping;

static void dlopen_step(void)
{
    void *h = dlopen(STRESS_DSO, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "stress: dlopen: %s\n", dlerror());
        exit(1);
    }
    unsigned long (*work)(unsigned long) =
        (unsigned long (*)(unsigned long))dlsym(h, "stress_dso_work");
    if (work)
        work(20000);
    dlclose(h);
}

static void throw_step(void)
{
    if (stress_throw_catch(8) != 1)
        abort();
}

__attribute__((noinline)) static int backtrace_at(int depth)
{
    void *pcs[64];
    if (depth > 0)
        return backtrace_at(depth - 1) + 1;
    return backtrace(pcs, 64);
}

static void backtrace_step(void)
{
    if (backtrace_at(10) < 10)
        abort();
}

/* The blocks malloc_step keeps live on this thread. */
static __thread void *live[512];

static void malloc_step(void)
{
    static __thread unsigned seed = 1;
    for (int i = 0; i < 64; i++) {
        unsigned slot = (seed = seed * 1103515245 + 12345) % 512;
        free(live[slot]);
        live[slot] = malloc(16 + seed % 65536);
        if (!live[slot])
            abort();
        memset(live[slot], 1, 16);
    }
}

/* Frees what malloc_step kept, before its thread exits (else every
 * short-lived thread leaks up to 512 blocks). */
static void malloc_release(void)
{
    for (size_t i = 0; i < sizeof live / sizeof live[0]; i++) {
        free(live[i]);
        live[i] = NULL;
    }
}

/* Allocates for 50 ms of CPU: longer than the sampler's 20 ms thread scan,
 * so that the thread is sampled, short enough that many come and go. */
static void *short_lived(void *arg)
{
    struct timespec t;
    do {
        malloc_step();
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while (t.tv_sec == 0 && t.tv_nsec < 50000000);
    malloc_release();
    return arg;
}

/* A new thread (which inherits the label) that works briefly and exits:
 * timers are created for threads about to go, and deleted after them. */
static void spawn_step(void)
{
    pthread_t t;
    if (cpprof_thread_create(&t, NULL, short_lived, NULL) != 0)
        abort();
    pthread_join(t, NULL);
}

static struct worker workers[] = {
    {"dlopen", dlopen_step, 0, 0},   {"throw", throw_step, 0, 0},
    {"backtrace", backtrace_step, 0, 0}, {"malloc", malloc_step, 0, 0},
    {"spawn", spawn_step, 0, 0},
};
#define NWORKERS (sizeof workers / sizeof workers[0])
static atomic_ulong profiles_done;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const char *kv[] = {"stress", w->kind};
    cpprof_labelset *set;
    if (cpprof_labels(&set, 2, kv) != 0 || cpprof_set_thread_labels(set) != 0)
        abort();
    cpprof_labelset_release(set);
    while (!atomic_load(&stopping)) {
        w->step();
        atomic_fetch_add(&w->progress, 1);
    }
    malloc_release();
    return NULL;
}

static double monotonic_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void sleep_seconds(double s)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    long ns = until.tv_nsec + (long)((s - (long)s) * 1e9);
    until.tv_sec += (long)s + ns / 1000000000;
    until.tv_nsec = ns % 1000000000;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) ==
           EINTR)
        ;
}

/* Aborts when a worker's counter stays still for STALL_SECONDS, or the
 * profile loop's for PROFILE_STALL_SECONDS. */
static void *watchdog_main(void *arg)
{
    (void)arg;
    unsigned long last[NWORKERS + 1] = {0};
    int still[NWORKERS + 1] = {0};
    while (!atomic_load(&stopping)) {
        sleep_seconds(1);
        for (size_t i = 0; i <= NWORKERS; i++) {
            unsigned long now = i < NWORKERS
                                    ? atomic_load(&workers[i].progress)
                                    : atomic_load(&profiles_done);
            still[i] = now == last[i] ? still[i] + 1 : 0;
            last[i] = now;
            int limit = i == NWORKERS ? PROFILE_STALL_SECONDS : STALL_SECONDS;
            if (still[i] >= limit && !atomic_load(&stopping)) {
                fprintf(stderr, "stress: watchdog: %s made no progress for "
                                "%d s\n",
                        i < NWORKERS ? workers[i].kind : "the profile loop",
                        still[i]);
                abort();
            }
        }
    }
    return NULL;
}

/* Runs gocheck on the profile; fails unless pprof's parser accepts it and
 * every worker's label is in it. */
static void validate(const unsigned char *gz, size_t len, int n)
{
    if (len < 2 || gz[0] != 0x1f || gz[1] != 0x8b) {
        fprintf(stderr, "stress: profile %d is not gzip\n", n);
        exit(1);
    }
    if (access(GOCHECK, X_OK) != 0) {
        fprintf(stderr, "stress: %s missing: checked the gzip header only\n",
                GOCHECK);
        return;
    }
    char path[] = "/tmp/stress_sampler.XXXXXX", cmd[300], line[512];
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, gz, len) != (ssize_t)len)
        abort();
    close(fd);
    snprintf(cmd, sizeof cmd, "%s %s", GOCHECK, path);
    FILE *out = popen(cmd, "r");
    bool seen[NWORKERS] = {false};
    long stacks = 0, samples = 0;
    while (out && fgets(line, sizeof line, out)) {
        sscanf(line, "samples %ld", &stacks);
        sscanf(line, "total 0 %ld", &samples);
        for (size_t i = 0; i < NWORKERS; i++) {
            char tag[64];
            snprintf(tag, sizeof tag, "tag stress %s 0 ", workers[i].kind);
            seen[i] |= strncmp(line, tag, strlen(tag)) == 0;
        }
    }
    int status = out ? pclose(out) : -1;
    unlink(path);
    if (status != 0) {
        fprintf(stderr, "stress: gocheck rejected profile %d\n", n);
        exit(1);
    }
    for (size_t i = 0; i < NWORKERS; i++)
        if (!seen[i]) {
            fprintf(stderr, "stress: profile %d has no samples of %s\n", n,
                    workers[i].kind);
            exit(1);
        }
    printf("profile %d: %zu bytes, %ld samples in %ld stacks, valid\n", n, len,
           samples, stacks);
}

int main(int argc, char **argv)
{
    const char *env = getenv("STRESS_SECONDS");
    int seconds = argc > 1 ? atoi(argv[1]) : env ? atoi(env) : 60;
    pthread_t watchdog;
    setvbuf(stdout, NULL, _IOLBF, 0); /* the log shows how far an abort got */
    if (cpprof_set("cpu_hz", "1000") != 0)
        return 1;
    for (size_t i = 0; i < NWORKERS; i++)
        pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
    pthread_create(&watchdog, NULL, watchdog_main, NULL);
    int n = 0;
    /* Wall time, not profile count: a slow (sanitized) build takes fewer
     * profiles in the same time. */
    double end = monotonic_seconds() + seconds;
    while (n == 0 || monotonic_seconds() + PROFILE_SECONDS <= end) {
        unsigned char *gz;
        size_t len;
        int rc = cpprof_cpu_profile_start();
        if (rc != 0) {
            fprintf(stderr, "stress: start: %s\n", cpprof_strerror(rc));
            return 1;
        }
        sleep_seconds(PROFILE_SECONDS);
        rc = cpprof_cpu_profile_stop(&gz, &len);
        if (rc != 0) {
            fprintf(stderr, "stress: stop: %s\n", cpprof_strerror(rc));
            return 1;
        }
        validate(gz, len, n++);
        free(gz);
        atomic_fetch_add(&profiles_done, 1);
    }
    atomic_store(&stopping, true);
    for (size_t i = 0; i < NWORKERS; i++) {
        pthread_join(workers[i].thread, NULL);
        printf("%s: %lu steps\n", workers[i].kind,
               atomic_load(&workers[i].progress));
    }
    pthread_join(watchdog, NULL);
    return 0;
}
