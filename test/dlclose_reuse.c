/*
 * dlclose_reuse.c -- issue 18 item 9: samples in a plugin that was
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
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <dlfcn.h>
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

/* Calls the plugin's entry until this thread has spent s->ns of CPU. */
static void spin(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    const struct spin *s = arg;
    int64_t end = thread_cpu_ns() + s->ns;
    volatile uint64_t sink = 0;
    while (thread_cpu_ns() < end)
        sink += s->entry(1 << 16);
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

/* gocheck's judgement of the samples labelled phase=`phase`: how many
 * there are (*judged) and how many hold a function matching `fn`. */
static long count(const char *profile, const char *phase, const char *fn,
                  long *judged)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s -where phase=%s -chain '%s' %s", GOCHECK,
             phase, fn, profile);
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

/* One round: A (from a_path) then B at its address, under one profile.
 * a_fn is the pattern A's samples must match; with remove_a, a_path is
 * deleted once A is unloaded. */
static void round_trip(const char *name, const char *a_path, bool remove_a,
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
    long a_in_a = count(profile, "a", a_fn, &na);
    long a_in_b = count(profile, "a", "reuse_hot_b", &unused);
    long b_in_b = count(profile, "b", "reuse_hot_b", &nb);
    long b_in_a = count(profile, "b", a_fn, &unused);
    printf("  phase a: %ld samples, %ld in %s, %ld in reuse_hot_b\n", na,
           a_in_a, a_fn, a_in_b);
    printf("  phase b: %ld samples, %ld in reuse_hot_b, %ld in %s\n", nb,
           b_in_b, b_in_a, a_fn);
    CHECK(na >= MIN_SAMPLES && nb >= MIN_SAMPLES,
          "%s: too few samples to judge (need %d per phase)", name,
          MIN_SAMPLES);
    CHECK(a_in_b == 0, "%s: %ld of A's samples shown in B's function", name,
          a_in_b);
    CHECK(b_in_a == 0, "%s: %ld of B's samples shown in A's function", name,
          b_in_a);
    CHECK(100 * a_in_a >= NEED * na, "%s: only %ld of A's %ld samples in %s",
          name, a_in_a, na, a_fn);
    CHECK(100 * b_in_b >= NEED * nb,
          "%s: only %ld of B's %ld samples in reuse_hot_b", name, b_in_b, nb);
    CHECK(has_mapping(profile, a_path), "%s: no mapping of %s", name, a_path);
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
    round_trip("kept", PLUGIN_A, false, "reuse_hot_a", dir);

    /* A copy of A, deleted once unloaded. */
    char copy[4096], cmd[8192];
    snprintf(copy, sizeof copy, "%s/reuse_plugin_gone.so", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", PLUGIN_A, copy);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s failed\n", cmd);
        return 1;
    }
    round_trip("deleted", copy, true,
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
