/*
 * unwind.c -- what the CFI unwinder (src/unwind.c, src/unwind_cfi.c) costs.
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
 *       jobs per process CPU second of 2 threads running 30-frame frameless
 *       chains, without a profile and with a 100 Hz CPU profile using each
 *       walker (medians of 5 alternating 2-second windows; goal <= 1%).
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
            w->frames = unwind_context(&uc, pcs, 64, &w->flags);
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

/* Jobs per process CPU second over a window of `seconds`. */
static double window(double seconds)
{
    long long j0 = atomic_load(&jobs_done);
    double c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    struct timespec ts = {(time_t)seconds, 0};
    nanosleep(&ts, NULL);
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

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return v[n / 2];
}

static void bench_overhead(void)
{
    enum { THREADS = 2, ROUNDS = 5 };
    cpprof_set("cpu_hz", "100");
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    double off[ROUNDS], fp[ROUNDS], cfi[ROUNDS];
    window(1); /* warm up */
    for (int r = 0; r < ROUNDS; r++) {
        off[r] = window(2);
        fp[r] = profiled_window(2, true);
        cfi[r] = profiled_window(2, false);
    }
    atomic_store(&stopping, true);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    double m_off = median(off, ROUNDS), m_fp = median(fp, ROUNDS),
           m_cfi = median(cfi, ROUNDS);
    printf("jobs_per_cpu_second off=%.0f fp=%.0f cfi=%.0f\n", m_off, m_fp,
           m_cfi);
    printf("overhead walker=fp cpu_overhead_percent %.2f\n",
           (m_off / m_fp - 1) * 100);
    printf("overhead walker=cfi cpu_overhead_percent %.2f\n",
           (m_off / m_cfi - 1) * 100);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    bench_walks();
    bench_tables(argc, argv);
    bench_overhead();
    return 0;
}
