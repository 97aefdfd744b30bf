/*
 * unwind.c -- what the CFI unwinder (src/unwind_walk.c, src/unwind_tables.c, src/unwind_cfi.c) costs.
 *
 * Prints, one figure a line:
 *   walk depth=D frames=N flags=F ns=T
 *       ns per unwind_context() of a chain D frames deep through code
 *       without frame pointers (bench/unwind_frames.c) plus the program's
 *       own frames down to _start: N frames walked (goal: <= 1000 ns at
 *       D=30).  Thread CPU time, best of 5 rounds of 20000 walks.
 *   table NAME fdes=F rows=R bytes=B build_ms=T first_ms=T0
 *       the rows cfi_build makes of one object's file, their bytes, and the
 *       build time (best of 3; first_ms: the first, with whatever the page
 *       cache held) for libc, libstdc++, libz, libm and large binaries
 *       (argv, default /usr/bin/node and /usr/lib/chromium/chromium).
 *   refresh_ms T
 *       a refresh of this process's maps with every table already built.
 *   overhead walker=fp|cfi cpu_overhead_percent P
 *       jobs per process CPU second of a thread running 30-frame frameless
 *       chains, without a profile and with a 100 Hz CPU profile using each
 *       walker: per round, one 1-second window of each in rotating order,
 *       the overhead against that round's unprofiled window; the median
 *       and quartiles of 21 rounds (goal <= 1%).
 */
#define _GNU_SOURCE
#include "unwind.h"
#include "unwind_cfi.h"
#include "unwind_frames.h"

#include <cpprof.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

static double clock_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* ---- Walk time --------------------------------------------------------- */

struct walk_result {
    size_t frames;
    unsigned flags;
    double ns;
};

static int walk_leaf(void *arg)
{
    struct walk_result *w = arg;
    ucontext_t uc;
    uintptr_t pcs[64];
    getcontext(&uc);
    enum { WALKS = 20000 };
    w->ns = 1e18;
    for (int round = 0; round < 5; round++) {
        double t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        for (int i = 0; i < WALKS; i++)
            w->frames = unwind_context(&uc, pcs, 64, &w->flags, NULL);
        double ns = (clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / WALKS;
        if (ns < w->ns)
            w->ns = ns;
    }
    return 0;
}

static void bench_walks(void)
{
    static const int depths[] = {10, 30, 60};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        struct walk_result w;
        bench_chain(depths[i], walk_leaf, &w);
        printf("walk depth=%d frames=%zu flags=%u ns=%.0f\n", depths[i],
               w.frames, w.flags, w.ns);
    }
}

/* ---- Table build ------------------------------------------------------- */

static void bench_table(const char *name, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        printf("table %s missing (%s)\n", name, path);
        if (fd >= 0)
            close(fd);
        return;
    }
    void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (img == MAP_FAILED) {
        printf("table %s unreadable\n", name);
        return;
    }
    double best = 1e18, first = 0;
    struct cfi_table *t = NULL;
    struct cfi_stats stats;
    for (int round = 0; round < 3; round++) {
        cfi_free(t);
        double t0 = clock_ns(CLOCK_MONOTONIC);
        int rc = cfi_build(img, (size_t)st.st_size, &t, &stats);
        double ms = (clock_ns(CLOCK_MONOTONIC) - t0) / 1e6;
        if (rc != 0) {
            printf("table %s: %s\n", name, cpprof_strerror(rc));
            munmap(img, (size_t)st.st_size);
            return;
        }
        if (round == 0)
            first = ms;
        if (ms < best)
            best = ms;
    }
    printf("table %s fdes=%zu rows=%zu bytes=%zu unsupported=%zu source=%s "
           "build_ms=%.2f first_ms=%.2f file_mb=%.1f\n",
           name, stats.fdes, t ? t->nrows : 0, t ? t->bytes : 0,
           stats.unsupported, stats.source ? stats.source : "none", best,
           first, st.st_size / 1e6);
    cfi_free(t);
    munmap(img, (size_t)st.st_size);
}

/* The file a shared library was loaded from, by its soname. */
static void bench_library(const char *soname)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    struct link_map *lm;
    if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
        printf("table %s not loadable\n", soname);
        return;
    }
    bench_table(soname, lm->l_name);
}

static void bench_tables(int argc, char **argv)
{
    static const char *const libs[] = {"libc.so.6", "libstdc++.so.6",
                                       "libz.so.1", "libm.so.6"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        bench_library(libs[i]);
    static const char *const big[] = {"/usr/bin/node",
                                      "/usr/lib/chromium/chromium"};
    if (argc > 1)
        for (int i = 1; i < argc; i++)
            bench_table(argv[i], argv[i]);
    else
        for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
            bench_table(big[i], big[i]);
    double t0 = clock_ns(CLOCK_MONOTONIC);
    unwind_refresh_maps();
    printf("refresh_ms %.3f\n", (clock_ns(CLOCK_MONOTONIC) - t0) / 1e6);
}

/* ---- Profile overhead -------------------------------------------------- */

static atomic_llong jobs_done;
static atomic_bool stopping;

static int work_leaf(void *arg)
{
    uint32_t h = *(uint32_t *)arg;
    for (int i = 0; i < 20000; i++)
        h = (h ^ (uint32_t)i) * 16777619u;
    *(uint32_t *)arg = h;
    return (int)(h & 1);
}

static void *worker(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg;
    while (!atomic_load(&stopping)) {
        bench_chain(30, work_leaf, &seed);
        atomic_fetch_add(&jobs_done, 1);
    }
    return NULL;
}

#define OVERHEAD_WINDOW_S 1.0

/* CLOCK_MONOTONIC ns when the last window opened and closed. */
static double window_opened, window_closed;

/* Jobs per process CPU second over a window of `seconds`. */
static double window(double seconds)
{
    window_opened = clock_ns(CLOCK_MONOTONIC);
    long long j0 = atomic_load(&jobs_done);
    double c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    struct timespec ts = {(time_t)seconds,
                          (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    window_closed = clock_ns(CLOCK_MONOTONIC);
    return (atomic_load(&jobs_done) - j0) /
           ((clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / 1e9);
}

static double profiled_window(double seconds, bool frame_pointers)
{
    unwind_set_frame_pointers_only(frame_pointers);
    if (cpprof_cpu_profile_start() != 0) {
        fputs("unwind: cannot start a CPU profile\n", stderr);
        exit(1);
    }
    double rate = window(seconds);
    unsigned char *buf;
    size_t len;
    if (cpprof_cpu_profile_stop(&buf, &len) == 0)
        free(buf);
    unwind_set_frame_pointers_only(false);
    return rate;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v[0..n) (sorts v). */
static double quantile(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return v[(int)(q * (n - 1) + 0.5)];
}

/* One window of each kind, in an order that rotates with the round so
 * that no kind always follows another; returns jobs per CPU second. */
static void overhead_round(int r, double *off, double *fp, double *cfi)
{
    for (int k = 0; k < 3; k++)
        switch ((r + k) % 3) {
        case 0: *off = window(OVERHEAD_WINDOW_S); break;
        case 1: *fp = profiled_window(OVERHEAD_WINDOW_S, true); break;
        case 2: *cfi = profiled_window(OVERHEAD_WINDOW_S, false); break;
        }
}

static void print_overhead(const char *walker, double *pct, int n)
{
    double lo = quantile(pct, n, 0.25), med = quantile(pct, n, 0.5),
           hi = quantile(pct, n, 0.75);
    printf("overhead walker=%s cpu_overhead_percent %.2f "
           "(quartiles %.2f..%.2f of %d rounds)\n",
           walker, med, lo, hi, n);
}

/* One worker, so that the collector and the rest of the machine have the
 * other core; each round's overhead is against the unprofiled window of
 * the same round, so drift in the machine's speed cancels. */
static void bench_overhead(void)
{
    enum { ROUNDS = 21 };
    cpprof_set("cpu_hz", "100");
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)(uintptr_t)1);
    double pct_fp[ROUNDS], pct_cfi[ROUNDS];
    window(1); /* warm up */
    for (int r = 0; r < ROUNDS; r++) {
        double off, fp, cfi;
        overhead_round(r, &off, &fp, &cfi);
        pct_fp[r] = (off / fp - 1) * 100;
        pct_cfi[r] = (off / cfi - 1) * 100;
    }
    atomic_store(&stopping, true);
    pthread_join(t, NULL);
    print_overhead("fp", pct_fp, ROUNDS);
    print_overhead("cfi", pct_cfi, ROUNDS);
}

/* `unwind run off|fp|cfi SECONDS`: the overhead workload alone, one
 * worker for SECONDS without a profile or with a 100 Hz profile using that
 * walker, for bench/overhead_perf.sh to watch from outside with perf; it
 * prints the window's CLOCK_MONOTONIC bounds in seconds, so that the
 * profile's start (tables) and stop (encoding) stay out of the count. */
static int run_workload(const char *mode, const char *seconds)
{
    double s = atof(seconds);
    bool off = strcmp(mode, "off") == 0, fp = strcmp(mode, "fp") == 0;
    if ((!off && !fp && strcmp(mode, "cfi") != 0) || !(s > 0)) {
        fputs("usage: unwind run off|fp|cfi SECONDS\n", stderr);
        return 2;
    }
    cpprof_set("cpu_hz", "100");
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)(uintptr_t)1);
    double rate = off ? window(s) : profiled_window(s, fp);
    atomic_store(&stopping, true);
    pthread_join(t, NULL);
    printf("run mode=%s jobs_per_cpu_second %.0f window %.6f,%.6f\n", mode,
           rate, window_opened / 1e9, window_closed / 1e9);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 4 && strcmp(argv[1], "run") == 0)
        return run_workload(argv[2], argv[3]);
    bench_walks();
    bench_tables(argc, argv);
    bench_overhead();
    return 0;
}
