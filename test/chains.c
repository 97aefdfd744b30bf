/*
 * chains.c -- programs users really run, for the stack walker's acceptance
 * tests (test/chains.sh): built with -O2 -fomit-frame-pointer
 * (Makefile.am), like Debian's libraries and any plain -O2 build, each
 * workload has a known call chain from main (or a thread's start routine)
 * to its hot spot, and every function of the chain is noipa (never inlined,
 * cloned or renamed) and does something after its call (never a tail
 * call), so the true stack holds each of them.
 *
 *   chains cpu SECONDS DIR WORKLOAD...
 *       For each workload in turn: a CPU profile (1000 Hz) while the main
 *       thread runs it over and over for SECONDS of its CPU time (at most
 *       ten times that in wall time), written to DIR/WORKLOAD.pb.gz.
 *       Every call runs inside cpprof_do with the label chain=WORKLOAD,
 *       and the label covers exactly that call, so the samples a test
 *       judges are picked by their label, not by their (maybe broken)
 *       stack.  The chain of each:
 *         main -> profile_workload -> cpprof_do -> run_once -> HEAD...
 *       a        chain_a1 .. chain_a5 -> chain_a6, a frameless leaf
 *       b_qsort  chain_b1 -> chain_b2 -> glibc's qsort -> cmp_b -> cmp_b_key
 *       b_mem    chain_bm1 -> chain_bm2 -> memcpy / strlen (glibc)
 *       c        chain_c1 -> chain_c2 -> deflate (Debian's zlib)
 *       d_sort   chain_d1 -> chain_d2<Item> -> std::sort (chains_cxx.cc)
 *       d_throw  chain_dt1 -> chain_dt2<uint64_t> -> chain_dt3 -> chain_dt4,
 *                which throws, caught in chain_dt2 (chains_cxx.cc)
 *       control  control_1 -> control_2 -> control_3, built with frame
 *                pointers, leaf included (chains_control.c): the harness's
 *                own check, which today's walker passes too
 *       e        chain_e1 -> plugin_e1 -> plugin_e2 -> plugin_e3 in
 *                chains_plugin.so, dlopened before each call and dlclosed
 *                after it (outside the label); the last handle stays open
 *                until the profile is stopped, so the plugin is mapped when
 *                the profile is symbolized.
 *
 *   chains --addr ADDR --park NPARK
 *       Serves /debug/pprof/ on ADDR with, first, allocation sampling of
 *       every allocation (mem_profile_rate 1) and allocations of exactly
 *       HEAP_BYTES made only inside a qsort comparator:
 *         main -> heap_workload -> chain_h1 -> glibc's qsort -> cmp_h
 *              -> alloc_h -> malloc
 *       then NPARK threads parked inside a qsort comparator, blocked in
 *       read(2) on a pipe, with the label chain=park:
 *         park_main -> cpprof_do -> park_scope -> chain_p1 -> glibc's qsort
 *              -> cmp_park -> park_wait -> read
 *       It prints "serving ..." once every thread is parked, and exits 0
 *       on SIGTERM or SIGINT, after releasing them.
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* The allocation size only cmp_h's chain makes (the heap test's filter). */
#define HEAP_BYTES 3001

uint64_t chain_d1(void);  /* chains_cxx.cc */
uint64_t chain_dt1(void); /* chains_cxx.cc */
uint64_t control_1(void); /* chains_control.c */

/* Every result lands here, so no work is optimized away. */
static volatile uint64_t sink;

static void die(const char *what, const char *why)
{
    fprintf(stderr, "chains: %s: %s\n", what, why);
    exit(1);
}

static double clock_s(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* A 64-bit mix, shared by the workloads' hot loops. */
static inline uint64_t mix(uint64_t h)
{
    return (h ^ (h >> 31)) * 0x9e3779b97f4a7c15u;
}

/* ---- (a) six calls deep in the program's own code ----------------------- */

/* The hot spot: a frameless leaf (no push, no stack frame at -O2). */
__attribute__((noipa)) static uint64_t chain_a6(uint64_t n)
{
    uint64_t h = n;
    for (uint64_t i = 0; i < n; i++)
        h = mix(h + i);
    return h;
}

__attribute__((noipa)) static uint64_t chain_a5(uint64_t n) { return chain_a6(n) + 1; }
__attribute__((noipa)) static uint64_t chain_a4(uint64_t n) { return chain_a5(n) + 1; }
__attribute__((noipa)) static uint64_t chain_a3(uint64_t n) { return chain_a4(n) + 1; }
__attribute__((noipa)) static uint64_t chain_a2(uint64_t n) { return chain_a3(n) + 1; }
__attribute__((noipa)) static uint64_t chain_a1(void) { return chain_a2(4000000) + 1; }

/* ---- (b) the hot loop inside glibc: qsort's callback, memcpy, strlen ---- */

#define QSORT_N 20000
static uint64_t qsort_in[QSORT_N];

/* The comparator's work, so that a good share of qsort's time is spent
 * below glibc's frames, in the program's code again. */
__attribute__((noipa)) static uint64_t cmp_b_key(uint64_t x)
{
    for (int i = 0; i < 24; i++)
        x = mix(x);
    return x;
}

__attribute__((noipa)) static int cmp_b(const void *a, const void *b)
{
    uint64_t ka = cmp_b_key(*(const uint64_t *)a);
    uint64_t kb = cmp_b_key(*(const uint64_t *)b);
    return (ka > kb) - (ka < kb);
}

__attribute__((noipa)) static uint64_t chain_b2(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_b);
    return v[0] + 1;
}

__attribute__((noipa)) static uint64_t chain_b1(void)
{
    static uint64_t v[QSORT_N];
    memcpy(v, qsort_in, sizeof v);
    return chain_b2(v, QSORT_N) + 1;
}

#define MEM_BYTES (8u << 20)
static char mem_src[MEM_BYTES], mem_dst[MEM_BYTES];

__attribute__((noipa)) static uint64_t chain_bm2(char *dst, const char *src,
                                                 size_t len)
{
    memcpy(dst, src, len);
    return strlen(dst) + strlen(src) + 1;
}

/* The source is a string of MEM_BYTES - 1 bytes, set on the first call
 * (outside the profile's window), so that both strlen calls scan it
 * whole, as the chain says.  With the zeroed source they returned at
 * once, and on a loaded machine samples piled up at cpprof_scope_end's
 * first instruction, the label still on, right after memcpy's 8 MB rep
 * movsb (a tick delivered late, it seems): 17 of 1,471 in CI; under three
 * busy loops 30 in five runs, against 4 with the string. */
__attribute__((noipa)) static uint64_t chain_bm1(void)
{
    if (!mem_src[0])
        memset(mem_src, 'x', MEM_BYTES - 1);
    return chain_bm2(mem_dst, mem_src, MEM_BYTES) + 1;
}

/* ---- (c) the hot loop inside zlib's deflate ------------------------------ */

#define DEFLATE_IN (1u << 20)
static unsigned char deflate_in[DEFLATE_IN], deflate_out[2 * DEFLATE_IN];
static z_stream zs;

__attribute__((noipa)) static uint64_t chain_c2(const unsigned char *in,
                                                size_t len)
{
    if (deflateReset(&zs) != Z_OK)
        die("deflateReset", zs.msg ? zs.msg : "failed");
    zs.next_in = (unsigned char *)in;
    zs.avail_in = (uInt)len;
    zs.next_out = deflate_out;
    zs.avail_out = sizeof deflate_out;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
        die("deflate", zs.msg ? zs.msg : "did not finish");
    return zs.total_out + 1;
}

__attribute__((noipa)) static uint64_t chain_c1(void)
{
    return chain_c2(deflate_in, DEFLATE_IN) + 1;
}

/* ---- (e) the work in a plugin dlopened and dlclosed around each call ---- */

static uint64_t (*plugin_e1)(uint64_t);

__attribute__((noipa)) static uint64_t chain_e1(void)
{
    return plugin_e1(20000000) + 1;
}

/* ---- CPU profiles of the workloads --------------------------------------- */

struct workload {
    const char *name;
    uint64_t (*head)(void); /* the chain's first function after run_once */
    bool plugin;            /* (e): dlopen the plugin around each call */
};

static const struct workload workloads[] = {
    {"a", chain_a1, false},       {"b_qsort", chain_b1, false},
    {"b_mem", chain_bm1, false},  {"c", chain_c1, false},
    {"d_sort", chain_d1, false},  {"d_throw", chain_dt1, false},
    {"control", control_1, false}, {"e", chain_e1, true},
};

static void fill_inputs(void)
{
    uint64_t x = 1;
    for (size_t i = 0; i < QSORT_N; i++)
        qsort_in[i] = x = mix(x + i);
    memset(mem_src, 'x', MEM_BYTES - 1);
    /* Text-like input: words from a small vocabulary, so deflate works on
     * matches and literals as on real data. */
    static const char *const words[] = {"profile ", "sample ", "label ",
                                        "stack ",   "frame ",  "tenant ",
                                        "cpu ",     "heap "};
    size_t at = 0;
    while (at < DEFLATE_IN) {
        x = mix(x);
        const char *w = words[x % 8];
        for (size_t i = 0; w[i] && at < DEFLATE_IN; i++)
            deflate_in[at++] = (unsigned char)w[i];
    }
    if (deflateInit(&zs, 6) != Z_OK)
        die("deflateInit", "failed");
}

static void *open_plugin(void)
{
    void *h = dlopen(CHAINS_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        die("dlopen", dlerror());
    plugin_e1 = (uint64_t(*)(uint64_t))dlsym(h, "plugin_e1");
    if (!plugin_e1)
        die("dlsym", dlerror());
    return h;
}

__attribute__((noipa)) static void run_once(void *arg,
                                            const cpprof_labelset *labels)
{
    (void)labels;
    const struct workload *w = arg;
    sink += w->head();
}

static void write_file(const char *path, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
        die(path, strerror(errno));
}

/* Profiles `w` for `seconds` of CPU time into dir/NAME.pb.gz; prints how many calls
 * ran and, for the plugin, at how many addresses it was mapped (samples in
 * a mapping gone by the end cannot be symbolized). */
__attribute__((noipa)) static void profile_workload(const struct workload *w,
                                                    double seconds,
                                                    const char *dir)
{
    const char *kv[] = {"chain", w->name};
    cpprof_labelset *set;
    int rc = cpprof_labels(&set, 2, kv);
    if (rc != 0)
        die("cpprof_labels", cpprof_strerror(rc));
    void *bases[8];
    unsigned nbases = 0, calls = 0;
    void *handle = NULL;
    /* One call first, outside the window: a workload's state built once
     * (d_sort's vector, value-initialized on its first call) is not the
     * chain, and under ASan building it took 1.2% of d_sort's samples. */
    if (!w->plugin)
        sink += w->head();
    if ((rc = cpprof_cpu_profile_start()) != 0)
        die("cpprof_cpu_profile_start", cpprof_strerror(rc));
    /* CPU time, so that a loaded machine does not thin the samples; the
     * wall-clock bound only keeps a starved run from going on for ever. */
    double cpu_until = clock_s(CLOCK_THREAD_CPUTIME_ID) + seconds;
    double wall_until = clock_s(CLOCK_MONOTONIC) + 10 * seconds;
    do {
        if (w->plugin) {
            if (handle)
                dlclose(handle);
            handle = open_plugin();
            Dl_info info;
            if (dladdr((void *)plugin_e1, &info) == 0)
                die("dladdr", "plugin_e1 not found");
            unsigned i = 0;
            while (i < nbases && bases[i] != info.dli_fbase)
                i++;
            if (i == nbases && nbases < 8)
                bases[nbases++] = info.dli_fbase;
        }
        if ((rc = cpprof_do(NULL, set, run_once, (void *)w)) != 0)
            die("cpprof_do", cpprof_strerror(rc));
        calls++;
    } while (clock_s(CLOCK_THREAD_CPUTIME_ID) < cpu_until &&
             clock_s(CLOCK_MONOTONIC) < wall_until);
    unsigned char *buf;
    size_t len;
    if ((rc = cpprof_cpu_profile_stop(&buf, &len)) != 0)
        die("cpprof_cpu_profile_stop", cpprof_strerror(rc));
    if (handle)
        dlclose(handle);
    cpprof_labelset_release(set);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.pb.gz", dir, w->name);
    write_file(path, buf, len);
    free(buf);
    printf("%s: %u calls", w->name, calls);
    if (w->plugin)
        printf(", plugin mapped at %u address%s", nbases,
               nbases == 1 ? "" : "es");
    printf("\n");
}

static int cpu_main(int argc, char **argv)
{
    double seconds = atof(argv[2]);
    if (seconds <= 0)
        die("SECONDS", "must be positive");
    int rc = cpprof_set("cpu_hz", "1000");
    if (rc != 0)
        die("cpprof_set cpu_hz", cpprof_strerror(rc));
    fill_inputs();
    for (int i = 4; i < argc; i++) {
        size_t k = 0, n = sizeof workloads / sizeof workloads[0];
        while (k < n && strcmp(workloads[k].name, argv[i]) != 0)
            k++;
        if (k == n)
            die(argv[i], "no such workload");
        profile_workload(&workloads[k], seconds, argv[3]);
    }
    return 0;
}

/* ---- Serve: allocations in a comparator, threads parked in one ---------- */

__attribute__((noipa)) static void *alloc_h(uint64_t x)
{
    uint64_t *p = malloc(HEAP_BYTES);
    if (!p)
        die("malloc", "failed");
    *p = x;
    return p;
}

__attribute__((noipa)) static int cmp_h(const void *a, const void *b)
{
    uint64_t *pa = alloc_h(*(const uint64_t *)a);
    uint64_t *pb = alloc_h(*(const uint64_t *)b);
    int r = (*pa > *pb) - (*pa < *pb);
    free(pa);
    free(pb);
    return r;
}

__attribute__((noipa)) static uint64_t chain_h1(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_h);
    return v[0] + 1;
}

__attribute__((noipa)) static void heap_workload(void)
{
    static uint64_t v[2000];
    uint64_t x = 7;
    for (size_t i = 0; i < 2000; i++)
        v[i] = x = mix(x + i);
    sink += chain_h1(v, 2000);
}

static int park_pipe[2];
static atomic_uint parked;

__attribute__((noipa)) static uint64_t park_wait(void)
{
    char c;
    atomic_fetch_add(&parked, 1);
    ssize_t n;
    while ((n = read(park_pipe[0], &c, 1)) < 0 && errno == EINTR)
        ;
    return (uint64_t)n + 1;
}

__attribute__((noipa)) static int cmp_park(const void *a, const void *b)
{
    sink += park_wait();
    return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b);
}

__attribute__((noipa)) static uint64_t chain_p1(void)
{
    int v[2] = {2, 1};
    qsort(v, 2, sizeof v[0], cmp_park);
    return (uint64_t)v[0] + 1;
}

__attribute__((noipa)) static void park_scope(void *arg,
                                              const cpprof_labelset *labels)
{
    (void)arg, (void)labels;
    sink += chain_p1();
}

__attribute__((noipa)) static void *park_main(void *arg)
{
    cpprof_labelset *set = arg;
    int rc = cpprof_do(NULL, set, park_scope, NULL);
    if (rc != 0)
        die("cpprof_do", cpprof_strerror(rc));
    return NULL;
}

static int serve_main(char **argv)
{
    int npark = atoi(argv[4]), rc;
    if (npark < 1 || npark > 256)
        die("NPARK", "must be 1..256");
    if ((rc = cpprof_set("mem_profile_rate", "1")) != 0)
        die("cpprof_set mem_profile_rate", cpprof_strerror(rc));
    heap_workload();
    /* Only the main thread takes SIGTERM and SIGINT (sigwait below). */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    if (pipe(park_pipe) != 0)
        die("pipe", strerror(errno));
    const char *kv[] = {"chain", "park"};
    cpprof_labelset *set;
    if ((rc = cpprof_labels(&set, 2, kv)) != 0)
        die("cpprof_labels", cpprof_strerror(rc));
    pthread_t *threads = calloc((size_t)npark, sizeof *threads);
    if (!threads)
        die("calloc", "failed");
    for (int i = 0; i < npark; i++)
        if (pthread_create(&threads[i], NULL, park_main, set) != 0)
            die("pthread_create", "failed");
    while (atomic_load(&parked) < (unsigned)npark)
        usleep(1000);
    if ((rc = cpprof_http_start(argv[2])) != 0)
        die("cpprof_http_start", cpprof_strerror(rc));
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);
    int sig;
    sigwait(&stop, &sig);
    close(park_pipe[1]);
    for (int i = 0; i < npark; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    cpprof_labelset_release(set);
    cpprof_http_stop();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "cpu") == 0)
        return cpu_main(argc, argv);
    if (argc == 5 && strcmp(argv[1], "--addr") == 0 &&
        strcmp(argv[3], "--park") == 0)
        return serve_main(argv);
    fprintf(stderr, "usage: chains cpu SECONDS DIR WORKLOAD...\n"
                    "       chains --addr ADDR --park NPARK\n");
    return 2;
}
