/*
 * dlclose_reuse.c -- samples in a plugin that was
 * dlclosed must not be credited to the plugin loaded next at its address.
 *
 * Under a 1000 Hz CPU profile, the program dlopens plugin A
 * (test/reuse_plugin.c built with PLUGIN=a), spends CPU in its
 * reuse_hot_a with the label phase=a, dlcloses it, dlopens plugin B (the
 * same layout, PLUGIN=b), checks that the loader put B where A was (if
 * not, the test cannot show anything and fails saying so), spends CPU in
 * reuse_hot_b with phase=b, and stops the profile while B is still
 * loaded at A's address.  google/pprof's parser (test/gocheck -chain)
 * then says, per phase, how many samples hold each function: A's samples
 * must be in reuse_hot_a (at least NEED percent) and never in
 * reuse_hot_b, B's in reuse_hot_b and never in reuse_hot_a.  The label
 * comes from the thread, not from the stack, so which samples are judged
 * never depends on how they were symbolized.  A's file must also be a
 * mapping of the profile of its own.
 *
 * The second round does the same with a copy of A whose file is deleted
 * after its dlclose: nothing can name its functions any more, and its
 * samples must be shown as "[unloaded NAME]+0xADDR", still never as B's.
 *
 * The heap round (first) does it for the allocation profiler, whose
 * stacks are kept for the process's life, not for one profile: with every
 * allocation sampled (mem_profile_rate 1), A allocates NALLOC blocks of
 * A_SIZE bytes from reuse_alloc_a and frees every other one, is
 * dlclosed, and B, at A's address, does the same with B_SIZE from
 * reuse_alloc_b.  The heap profile served then must show A's live blocks
 * (inuse_objects, judged by the "bytes" label, not by the stack) in
 * reuse_alloc_a and none in reuse_alloc_b, and B's the other way round;
 * the allocs profile likewise for every allocation (alloc_objects), and
 * so must the heap profile's debug=1 text.  Each plugin also creates one
 * thread (reuse_spawn_a, reuse_spawn_b): the threadcreate profile must
 * show one in each function.
 * Where the heap profiler declines (a sanitizer's allocator comes first)
 * the round is skipped, saying so.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cpprof.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define A_CPU_NS 600000000LL /* ~600 samples in A */
#define B_CPU_NS 400000000LL /* ~400 in B */
#define MIN_SAMPLES 100      /* a loaded machine still gives this many */
#define NEED 90              /* percent of a phase's samples in its function */
#define A_SIZE 3001          /* bytes of each of A's blocks */
#define B_SIZE 3003          /* of B's: sizes nothing else allocates */
#define NALLOC 200           /* blocks each plugin allocates; half kept */

typedef uint64_t entry_fn(uint64_t);

static int failures;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "FAIL: " __VA_ARGS__);                         \
            fputc('\n', stderr);                                           \
            failures++;                                                    \
        }                                                                  \
    } while (0)

static int64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

struct spin {
    entry_fn *entry;
    int64_t ns;
};

/* Calls the plugin's entry until this thread has spent s->ns of CPU.  A
 * call is about 1.5 ms of work: reading the thread's CPU clock is a system
 * call, and with a call of 0.1 ms it took 10% of the samples on a loaded
 * machine (CI), below the share the checks want in the plugin. */
/* gocheck's chain of spin's clock reads (thread_cpu_ns inlined). */
#define SPIN_CLOCK "^spin$;.*clock_gettime"

static void spin(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    const struct spin *s = arg;
    int64_t end = thread_cpu_ns() + s->ns;
    volatile uint64_t sink = 0;
    while (thread_cpu_ns() < end)
        sink += s->entry(1 << 20);
}

/* dlopens `path`; its load address into *base. */
static void *load(const char *path, uintptr_t *base)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    struct link_map *lm;
    if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    *base = lm->l_addr;
    return h;
}

/* Runs `path`'s entry for `ns` of CPU under the label phase=`phase`. */
static void run(void *h, const char *phase, int64_t ns)
{
    struct spin s = {(entry_fn *)dlsym(h, "reuse_entry"), ns};
    const char *kv[] = {"phase", phase};
    cpprof_labelset *set;
    if (!s.entry || cpprof_labels(&set, 2, kv) != 0 ||
        cpprof_do(NULL, set, spin, &s) != 0) {
        fprintf(stderr, "dlsym, cpprof_labels or cpprof_do failed\n");
        exit(1);
    }
    cpprof_labelset_release(set);
}

/* gocheck's judgement of the samples it selects with `select` (its -where,
 * -numwhere and -value options): how much there is (*judged) and how much
 * holds a function matching `fn`. */
static long count(const char *profile, const char *select, const char *fn,
                  long *judged)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s %s -chain '%s' %s", GOCHECK, select, fn,
             profile);
    FILE *p = popen(cmd, "r");
    char line[4096];
    long n = -1, c = -1;
    while (p && fgets(line, sizeof line, p))
        sscanf(line, "chain judged %ld complete %ld", &n, &c);
    if (!p || pclose(p) != 0 || n < 0) {
        fprintf(stderr, "%s: failed\n", cmd);
        exit(1);
    }
    *judged = n;
    return c;
}

/* Whether gocheck -mappings lists a mapping of file `path`. */
static bool has_mapping(const char *profile, const char *path)
{
    char cmd[16384], line[16384], want[8192];
    snprintf(cmd, sizeof cmd, "%s -mappings %s", GOCHECK, profile);
    snprintf(want, sizeof want, "mapping %s ", path);
    FILE *p = popen(cmd, "r");
    bool found = false;
    while (p && fgets(line, sizeof line, p))
        found |= strncmp(line, want, strlen(want)) == 0;
    if (p)
        pclose(p);
    return found;
}

/* Copies file `from` to `to`, or exits. */
static void copy_file(const char *from, const char *to)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s failed\n", cmd);
        exit(1);
    }
}

/* One round: A (from a_path) then B at its address, under one profile.
 * a_fn is the pattern A's samples must match; with remove_a, a_path is
 * deleted once A is unloaded. */
static bool round_trip(const char *name, const char *a_path, bool remove_a,
                       const char *a_fn, const char *dir)
{
    printf("%s:\n", name);
    if (cpprof_cpu_profile_start() != 0) {
        fprintf(stderr, "cpprof_cpu_profile_start failed\n");
        exit(1);
    }
    uintptr_t base_a, base_b;
    void *a = load(a_path, &base_a);
    run(a, "a", A_CPU_NS);
    dlclose(a);
    if (dlopen(a_path, RTLD_NOW | RTLD_NOLOAD)) {
        fprintf(stderr, "%s was not unloaded by dlclose\n", a_path);
        exit(1);
    }
    if (remove_a)
        unlink(a_path);
    void *b = load(PLUGIN_B, &base_b);
    if (base_b != base_a) {
        fprintf(stderr, "FAIL: %s: plugin B was loaded at %#lx, not at A's "
                        "%#lx: this test cannot show what it tests here\n",
                name, (unsigned long)base_b, (unsigned long)base_a);
        exit(1);
    }
    printf("  B loaded at A's address %#lx\n", (unsigned long)base_a);
    run(b, "b", B_CPU_NS);
    unsigned char *buf;
    size_t len;
    if (cpprof_cpu_profile_stop(&buf, &len) != 0) {
        fprintf(stderr, "cpprof_cpu_profile_stop failed\n");
        exit(1);
    }
    dlclose(b);
    char profile[8192];
    snprintf(profile, sizeof profile, "%s/%s.pb.gz", dir, name);
    FILE *f = fopen(profile, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", profile);
        exit(1);
    }
    free(buf);

    long na, nb, unused;
    long a_in_a = count(profile, "-where phase=a", a_fn, &na);
    long a_in_b = count(profile, "-where phase=a", "reuse_hot_b", &unused);
    long b_in_b = count(profile, "-where phase=b", "reuse_hot_b", &nb);
    long b_in_a = count(profile, "-where phase=b", a_fn, &unused);
    /* spin's own reads of its CPU clock are neither plugin's work: on a
     * loaded machine they took 12% of a phase once (75 of 601). */
    long a_clock = count(profile, "-where phase=a", SPIN_CLOCK, &unused);
    long b_clock = count(profile, "-where phase=b", SPIN_CLOCK, &unused);
    printf("  phase a: %ld samples, %ld in %s, %ld in reuse_hot_b, %ld in "
           "spin's clock reads\n", na, a_in_a, a_fn, a_in_b, a_clock);
    printf("  phase b: %ld samples, %ld in reuse_hot_b, %ld in %s, %ld in "
           "spin's clock reads\n", nb, b_in_b, b_in_a, a_fn, b_clock);
    na -= a_clock;
    nb -= b_clock;
    if (na < MIN_SAMPLES || nb < MIN_SAMPLES) {
        long all, pseudo = count(profile, "", "^cpprof\\.", &all);
        printf("  too few samples to judge (need %d per phase): the profile "
               "holds %ld, %ld of them cpprof.* (CPU not sampled, events "
               "lost)\n", MIN_SAMPLES, all, pseudo);
        return false;
    }
    CHECK(a_in_b == 0, "%s: %ld of A's samples shown in B's function", name,
          a_in_b);
    CHECK(b_in_a == 0, "%s: %ld of B's samples shown in A's function", name,
          b_in_a);
    CHECK(100 * a_in_a >= NEED * na, "%s: only %ld of A's %ld samples in %s",
          name, a_in_a, na, a_fn);
    CHECK(100 * b_in_b >= NEED * nb,
          "%s: only %ld of B's %ld samples in reuse_hot_b", name, b_in_b, nb);
    CHECK(has_mapping(profile, a_path), "%s: no mapping of %s", name, a_path);
    return true;
}

/* A round whose phases got too few samples says nothing about the
 * plugins (a thread seen blocking the signal, or starved on a loaded
 * machine, is sampled less): it is run once more, and fails only if the
 * second try is no better. */
static void judged_round(const char *name, const char *a_path, bool remove_a,
                         const char *a_fn, const char *dir)
{
    for (int try = 0; try < 2; try++) {
        if (remove_a)
            copy_file(PLUGIN_A, a_path);
        if (round_trip(name, a_path, remove_a, a_fn, dir))
            return;
    }
    CHECK(false, "%s: too few samples to judge, twice", name);
}

static int port; /* of this process's server */

/* Starts this process's server on a free loopback port (asked of the
 * kernel with a socket of our own, closed again). */
static void serve(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        perror("socket");
        exit(1);
    }
    port = ntohs(a.sin_port);
    close(fd);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    if (cpprof_http_start(addr) != 0) {
        fprintf(stderr, "cpprof_http_start %s failed\n", addr);
        exit(1);
    }
}

/* GETs /debug/pprof/`name` from this process's server into
 * dir/name-tag.pb.gz (its path into out); returns the HTTP status. */
static int fetch(const char *dir, const char *name, const char *tag,
                 char *out, size_t len)
{
    char cmd[16384];
    snprintf(out, len, "%s/%s-%s.pb.gz", dir, name, tag);
    snprintf(cmd, sizeof cmd,
             "curl -s --max-time 60 -o '%s' -w '%%{http_code}' "
             "'http://127.0.0.1:%d/debug/pprof/%s'",
             out, port, name);
    FILE *p = popen(cmd, "r");
    int status = 0;
    if (!p || fscanf(p, "%d", &status) != 1 || pclose(p) != 0 ||
        status == 0) {
        fprintf(stderr, "%s failed\n", cmd);
        exit(1);
    }
    return status;
}

/* fetch, which must answer 200. */
static void fetch_ok(const char *dir, const char *name, const char *tag,
                     char *out, size_t len)
{
    int status = fetch(dir, name, tag, out, len);
    if (status != 200) {
        fprintf(stderr, "GET /debug/pprof/%s: %d\n", name, status);
        exit(1);
    }
}

/* Allocates NALLOC blocks of `size` through h's reuse_alloc, frees every
 * other one at once and keeps the rest in keep[0..NALLOC/2); creates and
 * joins one thread through h's reuse_spawn. */
static void allocate(void *h, size_t size, void **keep)
{
    int (*spawn)(void) = (int (*)(void))dlsym(h, "reuse_spawn");
    if (!spawn || spawn() != 0) {
        fprintf(stderr, "reuse_spawn failed\n");
        exit(1);
    }
    void *(*entry)(size_t) = (void *(*)(size_t))dlsym(h, "reuse_alloc");
    if (!entry) {
        fprintf(stderr, "dlsym reuse_alloc: %s\n", dlerror());
        exit(1);
    }
    for (int i = 0; i < NALLOC; i++) {
        void *p = entry(size);
        if (i % 2)
            keep[i / 2] = p;
        else
            free(p);
    }
}

/* Checks that the samples of blocks of `size` in profile (value index
 * `value`) are all in `fn` (`want` of them) and none in `other`. */
static void check_blocks(const char *profile, const char *what, int value,
                         size_t size, const char *fn, const char *other,
                         long want)
{
    char select[128];
    long judged, unused;
    snprintf(select, sizeof select, "-numwhere bytes=%zu -value %d", size,
             value);
    long in_fn = count(profile, select, fn, &judged);
    long in_other = count(profile, select, other, &unused);
    printf("  %s of %zu bytes: %ld, %ld in %s, %ld in %s\n", what, size,
           judged, in_fn, fn, in_other, other);
    CHECK(judged == want, "%s of %zu bytes: %ld, not %ld", what, size, judged,
          want);
    CHECK(in_fn == want, "%s of %zu bytes: only %ld of %ld in %s", what, size,
          in_fn, want, fn);
    CHECK(in_other == 0, "%s of %zu bytes: %ld shown in %s", what, size,
          in_other, other);
}

/* Checks the debug=1 text of the heap profile in `text`: the record of
 * NALLOC blocks of `size` (half live; rate 1, so unscaled) names `fn` in
 * its frames and not `other`. */
static void check_text(const char *text, size_t size, const char *fn,
                       const char *other)
{
    char head[128], want[64], unwanted[64];
    snprintf(head, sizeof head, "%d: %zu [%d: %zu] @", NALLOC / 2,
             NALLOC / 2 * size, NALLOC, NALLOC * size);
    snprintf(want, sizeof want, "\t%s+", fn);
    snprintf(unwanted, sizeof unwanted, "\t%s+", other);
    const char *rec = strstr(text, head);
    const char *end = rec ? strstr(rec, "\n\n") : NULL;
    size_t len = rec ? (end ? (size_t)(end - rec) : strlen(rec)) : 0;
    char *r = strndup(rec ? rec : "", len);
    printf("  debug=1 record of %zu bytes: %s, %s %s, %s %s\n", size,
           rec ? "found" : "missing", fn,
           strstr(r, want) ? "named" : "not named", other,
           strstr(r, unwanted) ? "named" : "not named");
    CHECK(rec && strstr(r, want) && !strstr(r, unwanted),
          "debug=1: the record of %zu-byte blocks does not name %s alone",
          size, fn);
    free(r);
}

/* The whole of file `path` (NUL-terminated, malloc'd). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    int c;
    while (f && m && (c = fgetc(f)) != EOF)
        fputc(c, m);
    if (f)
        fclose(f);
    if (!f || !m || fclose(m) != 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    return buf;
}

/* The heap round (see the top of the file). */
static void heap_round(const char *dir)
{
    printf("heap:\n");
    if (cpprof_set("mem_profile_rate", "1") != 0) {
        fprintf(stderr, "cpprof_set mem_profile_rate failed\n");
        exit(1);
    }
    serve();
    char profile[8192];
    if (fetch(dir, "heap", "first", profile, sizeof profile) == 501) {
        char *why = slurp(profile);
        printf("  SKIP: the heap profiler declines here: %s\n", why);
        free(why);
        cpprof_http_stop();
        return;
    }
    /* One 64 MiB block (never touched) runs out the countdown the old rate
     * drew; volatile, or the compiler drops the pair. */
    void *volatile big = malloc(64 << 20);
    free(big);
    static void *kept_a[NALLOC / 2], *kept_b[NALLOC / 2];
    uintptr_t base_a, base_b;
    void *a = load(PLUGIN_A, &base_a);
    /* A scrape brings the walker's tables up to date: A's frames are
     * walked from now on, not cut where the tables end. */
    fetch_ok(dir, "heap", "a-loaded", profile, sizeof profile);
    allocate(a, A_SIZE, kept_a);
    dlclose(a);
    if (dlopen(PLUGIN_A, RTLD_NOW | RTLD_NOLOAD)) {
        fprintf(stderr, "%s was not unloaded by dlclose\n", PLUGIN_A);
        exit(1);
    }
    void *b = load(PLUGIN_B, &base_b);
    if (base_b != base_a) {
        fprintf(stderr, "FAIL: heap: plugin B was loaded at %#lx, not at "
                        "A's %#lx: this test cannot show what it tests\n",
                (unsigned long)base_b, (unsigned long)base_a);
        exit(1);
    }
    printf("  B loaded at A's address %#lx\n", (unsigned long)base_a);
    fetch_ok(dir, "heap", "b-loaded", profile, sizeof profile);
    allocate(b, B_SIZE, kept_b);
    fetch_ok(dir, "heap", "end", profile, sizeof profile);
    check_blocks(profile, "live blocks", 2, A_SIZE, "reuse_alloc_a",
                 "reuse_alloc_b", NALLOC / 2);
    check_blocks(profile, "live blocks", 2, B_SIZE, "reuse_alloc_b",
                 "reuse_alloc_a", NALLOC / 2);
    fetch_ok(dir, "heap?debug=1", "end", profile, sizeof profile);
    char *text = slurp(profile);
    check_text(text, A_SIZE, "reuse_alloc_a", "reuse_alloc_b");
    check_text(text, B_SIZE, "reuse_alloc_b", "reuse_alloc_a");
    free(text);
    fetch_ok(dir, "allocs", "end", profile, sizeof profile);
    check_blocks(profile, "allocations", 0, A_SIZE, "reuse_alloc_a",
                 "reuse_alloc_b", NALLOC);
    check_blocks(profile, "allocations", 0, B_SIZE, "reuse_alloc_b",
                 "reuse_alloc_a", NALLOC);
    fetch_ok(dir, "threadcreate", "end", profile, sizeof profile);
    long total, in_a = count(profile, "", "reuse_spawn_a", &total);
    long in_b = count(profile, "", "reuse_spawn_b", &total);
    printf("  threads: %ld created in reuse_spawn_a, %ld in reuse_spawn_b\n",
           in_a, in_b);
    CHECK(in_a == 1 && in_b == 1,
          "threadcreate: %ld in reuse_spawn_a, %ld in reuse_spawn_b, not 1 "
          "and 1", in_a, in_b);
    for (int i = 0; i < NALLOC / 2; i++) {
        free(kept_a[i]);
        free(kept_b[i]);
    }
    dlclose(b);
    if (cpprof_http_stop() != 0 ||
        cpprof_set("mem_profile_rate", "524288") != 0) {
        fprintf(stderr, "cpprof_http_stop or cpprof_set failed\n");
        exit(1);
    }
}

int main(void)
{
    if (cpprof_set("cpu_hz", "1000") != 0) {
        fprintf(stderr, "cpprof_set cpu_hz failed\n");
        return 1;
    }
    char dir[] = "/tmp/dlclose_reuse.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    heap_round(dir);
    judged_round("kept", PLUGIN_A, false, "reuse_hot_a", dir);

    /* A copy of A, deleted once unloaded. */
    char copy[4096], cmd[8192];
    snprintf(copy, sizeof copy, "%s/reuse_plugin_gone.so", dir);
    judged_round("deleted", copy, true,
                 "\\[unloaded reuse_plugin_gone\\.so\\]\\+0x[0-9a-f]+", dir);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (failures == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (failures)
        fprintf(stderr, "%d check(s) failed; profiles kept in %s\n", failures,
                dir);
    else
        printf("all samples in the plugin that was loaded when taken\n");
    return failures ? 1 : 0;
}
