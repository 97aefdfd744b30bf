/*
 * cpu_overhead.c -- what a running CPU profile costs the program profiled.
 *
 * Worker threads run labelled jobs of a fixed CPU loop (the demo's shape:
 * cpprof_do() with tenant and kind labels around a hashing loop) without
 * pause; the main thread counts jobs finished in windows of W seconds,
 * alternately without and with a CPU profile at the cpu_hz setting
 * (default 100 Hz; CPPROF_CPU_HZ=1000 to see the cost grow), so that drift in the machine's speed hits both alike.  The profile is
 * started before its window opens and stopped (built and encoded) after it
 * closes, so the figure is the cost of sampling, not of encoding.
 *
 * Usage: cpu_overhead [THREADS [SECONDS [ROUNDS]]]
 *        cpu_overhead run cpprof|gperftools THREADS SECONDS ROUNDS
 *   THREADS defaults to min(4, online CPUs): more busy threads than cores
 *   measures the scheduler, not the profiler.  Prints each round and the
 *   medians:
 *     jobs_per_second_off N
 *     jobs_per_second_on N
 *     overhead_percent P        (goal: at most 1)
 *     jobs_per_cpu_second_off N
 *     jobs_per_cpu_second_on N
 *     cpu_overhead_percent P
 *   The per-CPU-second figures count the process's own CPU time only, so
 *   they stay meaningful on a machine that other work keeps busy, where
 *   wall-clock throughput swings by tens of percent between windows.
 *   Even so they swing by a few points between runs.  `run` is the
 *   workload alone, for bench/report.sh to watch from outside with perf
 *   (bench/perf_lib.sh): after a 1 s warm-up, per round one window without
 *   a profile and one with a 100 Hz profile of cpprof or of gperftools
 *   (libprofiler preloaded: ProfilerStart/ProfilerStop, found at run time,
 *   so the bench does not link it), the two in alternating order, each
 *   printed as
 *     window off|on ROUND OPEN,CLOSE
 *   with its CLOCK_MONOTONIC bounds in seconds, so that a profile's start
 *   and its encoding after stop stay out of the count.
 */
#define _GNU_SOURCE
#include "bench.h"
#include <cpprof.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define MAX_ROUNDS 64

static atomic_llong jobs_done;
static atomic_bool stopping;
static volatile uint32_t sink;

__attribute__((noinline)) static uint32_t hash_block(uint32_t seed)
{
    uint8_t block[4096];
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = (uint8_t)(seed + i * 2654435761u);
    uint32_t h = seed;
    for (size_t i = 0; i < sizeof block; i++)
        h = (h ^ block[i]) * 16777619u;
    return h;
}

/* One job: about a millisecond of CPU. */
static void job(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    uint32_t h = (uint32_t)(uintptr_t)arg;
    for (int i = 0; i < 40; i++)
        h = hash_block(h);
    sink = h;
}

static void *worker(void *arg)
{
    static const char *const tenants[] = {"acme", "globex", "initech"};
    cpprof_labelset *sets[3];
    for (int t = 0; t < 3; t++) {
        const char *kv[] = {"tenant", tenants[t], "kind", "reindex"};
        if (cpprof_labels(&sets[t], 4, kv) != 0)
            abort();
    }
    for (uintptr_t n = (uintptr_t)arg; !atomic_load(&stopping); n++) {
        cpprof_do(NULL, sets[n % 3], job, (void *)n);
        atomic_fetch_add(&jobs_done, 1);
    }
    for (int t = 0; t < 3; t++)
        cpprof_labelset_release(sets[t]);
    return NULL;
}

static double clock_seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Throughput over one window: per wall second, and per CPU second of the
 * whole process (the workers, the signal handler and the collector), which
 * other load on the machine does not disturb. */
struct rate {
    double wall, cpu;
    double opened, closed; /* the window's CLOCK_MONOTONIC bounds */
};

static struct rate measure(double seconds)
{
    long long j0 = atomic_load(&jobs_done);
    double t0 = clock_seconds(CLOCK_MONOTONIC);
    double c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    usleep((useconds_t)(seconds * 1e6));
    long long jobs = atomic_load(&jobs_done) - j0;
    double t1 = clock_seconds(CLOCK_MONOTONIC);
    return (struct rate){jobs / (t1 - t0),
                         jobs / (clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0),
                         t0, t1};
}

static struct rate measure_profiled(double seconds)
{
    int rc = cpprof_cpu_profile_start();
    if (rc != 0) {
        fprintf(stderr, "cpu_overhead: %s\n", cpprof_strerror(rc));
        exit(1);
    }
    struct rate rate = measure(seconds);
    unsigned char *buf;
    size_t len;
    if (cpprof_cpu_profile_stop(&buf, &len) != 0)
        exit(1);
    free(buf);
    return rate;
}

static void start_workers(pthread_t *t, int threads)
{
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
}

static void stop_workers(pthread_t *t, int threads)
{
    atomic_store(&stopping, true);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
}

/* gperftools' profiler, when libprofiler is preloaded. */
static int (*gperf_start)(const char *fname);
static void (*gperf_stop)(void);

static struct rate measure_gperftools(double seconds)
{
    /* The profile itself is not wanted, only its cost. */
    if (!gperf_start("/dev/null")) {
        fputs("cpu_overhead: ProfilerStart failed\n", stderr);
        exit(1);
    }
    struct rate rate = measure(seconds);
    gperf_stop();
    return rate;
}

static void print_window(const char *kind, int round, struct rate r)
{
    printf("window %s %d %.6f,%.6f\n", kind, round, r.opened, r.closed);
}

/* `cpu_overhead run cpprof|gperftools THREADS SECONDS ROUNDS` (see the
 * header). */
static int run_workload(char **argv)
{
    bool gperftools = strcmp(argv[2], "gperftools") == 0;
    int threads = atoi(argv[3]), rounds = atoi(argv[5]);
    double seconds = atof(argv[4]);
    if ((!gperftools && strcmp(argv[2], "cpprof") != 0) || threads < 1 ||
        threads > MAX_THREADS || !(seconds > 0) || rounds < 1) {
        fputs("usage: cpu_overhead run cpprof|gperftools THREADS SECONDS "
              "ROUNDS\n",
              stderr);
        return 2;
    }
    if (gperftools) {
        *(void **)&gperf_start = dlsym(RTLD_DEFAULT, "ProfilerStart");
        *(void **)&gperf_stop = dlsym(RTLD_DEFAULT, "ProfilerStop");
        if (!gperf_start || !gperf_stop) {
            fputs("cpu_overhead: no ProfilerStart; preload libprofiler\n",
                  stderr);
            return 2;
        }
    }
    pthread_t t[MAX_THREADS];
    start_workers(t, threads);
    measure(1); /* warm up, as the alternating mode does */
    for (int r = 1; r <= rounds; r++)
        for (int k = 0; k < 2; k++) {
            if ((r + k) % 2 == 0) {
                print_window("off", r, measure(seconds));
                continue;
            }
            print_window("on", r,
                         gperftools ? measure_gperftools(seconds)
                                    : measure_profiled(seconds));
        }
    stop_workers(t, threads);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "run") == 0)
        return run_workload(argv);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = argc > 1 ? atoi(argv[1]) : (cpus < 4 ? (int)cpus : 4);
    double seconds = argc > 2 ? atof(argv[2]) : 3;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (threads < 1 || threads > MAX_THREADS || seconds <= 0 || rounds < 1 ||
        rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: cpu_overhead [THREADS [SECONDS [ROUNDS]]]\n");
        return 2;
    }
    pthread_t t[MAX_THREADS];
    start_workers(t, threads);
    printf("threads %d window %.1f s rounds %d\n", threads, seconds, rounds);
    measure(1); /* warm up: caches, frequency, the label sets */
    double off[MAX_ROUNDS], on[MAX_ROUNDS], cpu_off[MAX_ROUNDS],
        cpu_on[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
        struct rate a = measure(seconds), b = measure_profiled(seconds);
        off[r] = a.wall, on[r] = b.wall;
        cpu_off[r] = a.cpu, cpu_on[r] = b.cpu;
        printf("round %d: off %.1f jobs/s (%.1f per CPU s), on %.1f jobs/s "
               "(%.1f per CPU s)\n",
               r + 1, a.wall, a.cpu, b.wall, b.cpu);
    }
    stop_workers(t, threads);
    double m_off = bench_median(off, rounds), m_on = bench_median(on, rounds);
    double c_off = bench_median(cpu_off, rounds), c_on = bench_median(cpu_on, rounds);
    printf("jobs_per_second_off %.1f\n", m_off);
    printf("jobs_per_second_on %.1f\n", m_on);
    printf("overhead_percent %.2f\n", 100 * (m_off - m_on) / m_off);
    printf("jobs_per_cpu_second_off %.1f\n", c_off);
    printf("jobs_per_cpu_second_on %.1f\n", c_on);
    printf("cpu_overhead_percent %.2f\n", 100 * (c_off - c_on) / c_off);
    return 0;
}
