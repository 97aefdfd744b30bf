/*
 * check_builder.c -- the profile builder, symbolizer and stack table.
 *
 * Profiles are built from stacks of real PCs of this file's own functions
 * (compiled with -g; each site records __LINE__ next to the call whose
 * return address it takes, and noinline/noclone keep the sites' functions
 * whole at any optimization level) and judged by
 * the real clients: gocheck (google/pprof's profile package) and
 * `go tool pprof`.  Nothing here decodes a profile itself.
 */
#define _GNU_SOURCE
#include "builder.h"
#include "symbolize_profile.h"
#include "labels.h"
#include "stacktab.h"
#include "unwind.h"

#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))

/* A return address in a known function and the line of its call. */
struct site {
    uintptr_t pc;
    int line;
};

static NOINLINE uintptr_t return_address(void)
{
    return (uintptr_t)__builtin_return_address(0);
}

static NOINLINE struct site site_in_alpha(void)
{
    struct site s = {return_address(), __LINE__};
    return s;
}

static NOINLINE struct site site_in_beta(void)
{
    struct site s = {return_address(), __LINE__};
    return s;
}

static inline __attribute__((always_inline)) struct site inlined_site(void)
{
    struct site s = {return_address(), __LINE__};
    return s;
}

/* The return address lies in inlined_site, inlined here at *call_line. */
static NOINLINE struct site site_in_gamma(int *call_line)
{
    *call_line = __LINE__ + 1;
    struct site s = inlined_site();
    return s;
}

/* ---- Running the clients ------------------------------------------------ */

struct output {
    char *text;
    int status; /* exit status, or -1 when the command did not exit */
};

static struct output run(const char *fmt, const char *arg)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, arg);
    FILE *p = popen(cmd, "r");
    ck_assert_msg(p != NULL, "popen %s", cmd);
    struct output out = {NULL, -1};
    size_t len = 0;
    FILE *mem = open_memstream(&out.text, &len);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0)
        fwrite(buf, 1, n, mem);
    fclose(mem);
    int st = pclose(p);
    out.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

/* Whether some line of text equals `line`. */
static bool has_line(const char *text, const char *line)
{
    size_t len = strlen(line);
    for (const char *at = text; (at = strstr(at, line)); at++)
        if ((at == text || at[-1] == '\n') &&
            (at[len] == '\n' || at[len] == '\0'))
            return true;
    return false;
}

/* Whether some line starts with `prefix` and ends with `suffix`. */
static bool has_line_like(const char *text, const char *prefix,
                          const char *suffix)
{
    const char *at = text;
    while (*at) {
        const char *end = strchrnul(at, '\n');
        size_t len = end - at, plen = strlen(prefix), slen = strlen(suffix);
        if (len >= plen + slen && strncmp(at, prefix, plen) == 0 &&
            strncmp(end - slen, suffix, slen) == 0)
            return true;
        at = *end ? end + 1 : end;
    }
    return false;
}

/* Whether some line holds `a` and, after it, `b`. */
static bool has_line_with(const char *text, const char *a, const char *b)
{
    for (const char *at = text; (at = strstr(at, a)); at++) {
        const char *end = strchrnul(at, '\n');
        const char *found = strstr(at, b);
        if (found && found < end)
            return true;
    }
    return false;
}

static char *place(int line)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "/check_builder.c:%d", line);
    return buf;
}

/* Encodes b into a temporary file whose name is returned (free() it). */
static char *encode_to_file(builder *b)
{
    unsigned char *data;
    size_t len;
    ck_assert_int_eq(symbolize_profile(b), 0);
    ck_assert_int_eq(builder_encode(b, &data, &len), 0);
    ck_assert_uint_gt(len, 2);
    ck_assert(data[0] == 0x1f && data[1] == 0x8b); /* gzip */
    char *path = strdup("/tmp/check_builder.XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
    close(fd);
    free(data);
    return path;
}

static struct output gocheck(const char *opts, const char *path)
{
    char fmt[256];
    snprintf(fmt, sizeof fmt, GOCHECK " %s %%s 2>&1", opts);
    struct output out = run(fmt, path);
    ck_assert_msg(out.status == 0 && has_line(out.text, "valid"),
                  "gocheck rejected the profile: %s", out.text);
    return out;
}

#define ASSERT_LINE(text, line)                                               \
    ck_assert_msg(has_line((text), (line)), "no line \"%s\" in:\n%s", (line), \
                  (text))
#define ASSERT_LINE_LIKE(text, prefix, suffix)                                \
    ck_assert_msg(has_line_like((text), (prefix), (suffix)),                  \
                  "no line \"%s...%s\" in:\n%s", (prefix), (suffix), (text))

static builder *cpu_builder(void)
{
    builder *b = builder_new();
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(builder_add_sample_type(b, "samples", "count"), 0);
    ck_assert_int_eq(builder_add_sample_type(b, "cpu", "nanoseconds"), 0);
    ck_assert_int_eq(builder_set_period(b, "cpu", "nanoseconds", 10000000), 0);
    builder_set_time(b, 1700000000000000000, 2000000000);
    return b;
}

static cpprof_labelset *labels2(const char *k1, const char *v1,
                                const char *k2, const char *v2)
{
    const char *kv[] = {k1, v1, k2, v2};
    cpprof_labelset *set;
    ck_assert_int_eq(cpprof_labels(&set, k2 ? 4 : 2, kv), 0);
    return set;
}

/* ---- Profiles ----------------------------------------------------------- */

START_TEST(labelled_cpu_profile)
{
    struct site a = site_in_alpha(), b2 = site_in_beta();
    cpprof_labelset *acme = labels2("tenant", "acme", "kind", "reindex");
    cpprof_labelset *globex = labels2("tenant", "globex", NULL, NULL);
    builder *b = cpu_builder();
    uintptr_t stack1[] = {a.pc, b2.pc}, stack2[] = {b2.pc};
    int64_t v1[] = {2, 20000000}, v2[] = {1, 10000000};
    ck_assert_int_eq(builder_add_sample(b, stack1, 2, 0, v1, acme, NULL, 0), 0);
    ck_assert_int_eq(builder_add_sample(b, stack2, 1, 0, v2, globex, NULL, 0),
                     0);
    ck_assert_int_eq(builder_add_sample(b, stack1, 2, 0, v2, NULL, NULL, 0), 0);
    cpprof_labelset_release(acme); /* the builder keeps what it needs */
    cpprof_labelset_release(globex);
    char *path = encode_to_file(b);
    builder_free(b);

    struct output out = gocheck("-frames -mappings", path);
    ASSERT_LINE(out.text, "sample_types samples/count cpu/nanoseconds");
    ASSERT_LINE(out.text, "period_type cpu/nanoseconds 10000000");
    ASSERT_LINE(out.text, "duration_nanos 2000000000");
    ASSERT_LINE(out.text, "samples 3");
    ASSERT_LINE(out.text, "total 0 4");
    ASSERT_LINE(out.text, "total 1 40000000");
    ASSERT_LINE(out.text, "tag tenant acme 0 2");
    ASSERT_LINE(out.text, "tag tenant acme 1 20000000");
    ASSERT_LINE(out.text, "tag kind reindex 0 2");
    ASSERT_LINE(out.text, "tag tenant globex 0 1");
    ck_assert(!strstr(out.text, "numtag"));
    ASSERT_LINE_LIKE(out.text, "frame site_in_alpha ", place(a.line));
    ASSERT_LINE_LIKE(out.text, "frame site_in_beta ", place(b2.line));
    /* Every location here is in this binary, fully symbolized. */
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert_int_gt(n, 0);
    exe[n] = '\0';
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "mapping %s ", exe);
    ASSERT_LINE_LIKE(out.text, prefix,
                     " functions=true filenames=true lines=true inline=true");
    ck_assert_msg(!has_line_like(out.text, prefix, "-"), "no build id");
    free(out.text);

    /* The real client shows named frames with file:line. */
    out = run("go tool pprof -raw %s 2>&1", path);
    ck_assert_msg(out.status == 0, "go tool pprof: %s", out.text);
    char frame[128];
    snprintf(frame, sizeof frame, "%s ", place(a.line));
    ck_assert_msg(has_line_with(out.text, " site_in_alpha ", frame),
                  "no site_in_alpha at %s in:\n%s", frame, out.text);
    ck_assert_msg(strstr(out.text, "tenant:[acme]"), "%s", out.text);
    free(out.text);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(inline_frames_innermost_first)
{
    int call_line;
    struct site s = site_in_gamma(&call_line);
    builder *b = cpu_builder();
    int64_t v[] = {1, 10000000};
    ck_assert_int_eq(builder_add_sample(b, &s.pc, 1, 0, v, NULL, NULL, 0), 0);
    char *path = encode_to_file(b);
    builder_free(b);
    struct output out = gocheck("-locations", path);
    char expect[256];
    snprintf(expect, sizeof expect, "check_builder.c:%d site_in_gamma@",
             s.line);
    ASSERT_LINE_LIKE(out.text, "location inlined_site@", place(call_line));
    ck_assert_msg(strstr(out.text, expect), "no \"%s\" in:\n%s", expect,
                  out.text);
    free(out.text);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(numeric_labels_carry_units)
{
    struct site a = site_in_alpha();
    cpprof_labelset *set = labels2("tenant", "acme", NULL, NULL);
    builder *b = builder_new();
    ck_assert_int_eq(builder_add_sample_type(b, "inuse_space", "bytes"), 0);
    builder_numlabel num[] = {{"bytes", 1024, "bytes"}};
    int64_t v[] = {4096};
    ck_assert_int_eq(builder_add_sample(b, &a.pc, 1, 0, v, set, num, 1), 0);
    ck_assert_int_eq(builder_add_sample(b, &a.pc, 1, 0, v, set, NULL, 0), 0);
    builder_numlabel unitless[] = {{"bytes", 1, NULL}};
    ck_assert_int_eq(builder_add_sample(b, &a.pc, 1, 0, v, NULL, unitless, 1),
                     -EINVAL);
    cpprof_labelset_release(set);
    char *path = encode_to_file(b);
    builder_free(b);
    struct output out = gocheck("", path);
    ASSERT_LINE(out.text, "samples 2");
    ASSERT_LINE(out.text, "numtag bytes bytes");
    ASSERT_LINE(out.text, "tag tenant acme 0 8192");
    free(out.text);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(truncated_stack_gets_a_root_frame)
{
    struct site a = site_in_alpha();
    builder *b = cpu_builder();
    int64_t v[] = {1, 10000000};
    ck_assert_int_eq(builder_add_sample(b, &a.pc, 1, STACK_TRUNCATED, v, NULL,
                                        NULL, 0),
                     0);
    char *path = encode_to_file(b);
    builder_free(b);
    struct output out = gocheck("-frames", path);
    ASSERT_LINE_LIKE(out.text, "frame cpprof.truncated ", "");
    free(out.text);
    /* pprof's traces list the leaf first: the pseudo frame is the root. */
    out = run("go tool pprof -traces %s 2>&1", path);
    ck_assert_msg(out.status == 0, "%s", out.text);
    char *leaf = strstr(out.text, "site_in_alpha");
    char *root = strstr(out.text, "cpprof.truncated");
    ck_assert_msg(leaf && root && leaf < root, "%s", out.text);
    free(out.text);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(exact_leaf_is_not_moved_back)
{
    /* The entry of a function is its first byte: moved back one byte it
     * would fall in the function before it. */
    uintptr_t stack[] = {(uintptr_t)site_in_beta, site_in_alpha().pc};
    builder *b = cpu_builder();
    int64_t v[] = {1, 10000000};
    ck_assert_int_eq(builder_add_sample(b, stack, 2, STACK_LEAF_EXACT, v, NULL,
                                        NULL, 0),
                     0);
    char *path = encode_to_file(b);
    builder_free(b);
    struct output out = gocheck("-frames", path);
    ASSERT_LINE_LIKE(out.text, "frame site_in_beta ", "");
    ASSERT_LINE_LIKE(out.text, "frame site_in_alpha ", "");
    free(out.text);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(pseudo_sample)
{
    builder *b = cpu_builder();
    int64_t v[] = {5, 50000000};
    ck_assert_int_eq(builder_add_pseudo_sample(b, "cpprof.lostProfileEvent", v),
                     0);
    ck_assert_int_eq(builder_add_pseudo_sample(b, "cpprof.lostProfileEvent", v),
                     0);
    char *path = encode_to_file(b);
    builder_free(b);
    struct output out = gocheck("-frames", path);
    ASSERT_LINE(out.text, "samples 2");
    ASSERT_LINE(out.text, "total 0 10");
    ASSERT_LINE_LIKE(out.text, "frame cpprof.lostProfileEvent ", "");
    free(out.text);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(empty_profile_keeps_sample_types)
{
    builder *b = cpu_builder();
    char *path = encode_to_file(b);
    builder_free(b);
    struct output out = gocheck("", path);
    ASSERT_LINE(out.text, "sample_types samples/count cpu/nanoseconds");
    ASSERT_LINE(out.text, "samples 0");
    free(out.text);
    out = run("go tool pprof -top %s 2>&1", path);
    ck_assert_msg(out.status == 0, "%s", out.text);
    free(out.text);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(profile_from_stacktab)
{
    struct site a = site_in_alpha(), b2 = site_in_beta();
    cpprof_labelset *acme = labels2("tenant", "acme", NULL, NULL);
    stacktab *t = stacktab_new(2);
    uintptr_t stack[] = {a.pc, b2.pc};
    int64_t v[] = {1, 10000000};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(stacktab_add(t, stack, 2, 0, 0, acme, v), 0);
    ck_assert_int_eq(stacktab_add(t, stack, 1, 0, 0, NULL, v), 0);
    cpprof_labelset_release(acme);
    builder *b = cpu_builder();
    ck_assert_int_eq(builder_add_stacktab(b, t), 0);
    stacktab_free(t);
    char *path = encode_to_file(b);
    builder_free(b);
    struct output out = gocheck("", path);
    ASSERT_LINE(out.text, "samples 2");
    ASSERT_LINE(out.text, "total 0 4");
    ASSERT_LINE(out.text, "tag tenant acme 0 3");
    free(out.text);
    unlink(path);
    free(path);
}
END_TEST

/* The symbolizer keeps its modules between profiles: a library loaded
 * after one profile must still be seen by the next. */
START_TEST(library_loaded_between_profiles)
{
    builder *b = cpu_builder();
    int64_t v[] = {1, 10000000};
    struct site a = site_in_alpha();
    ck_assert_int_eq(builder_add_sample(b, &a.pc, 1, 0, v, NULL, NULL, 0), 0);
    char *path = encode_to_file(b);
    builder_free(b);
    unlink(path);
    free(path);

    /* Lazy: its ps_* imports are for debuggers and never called here. */
    void *lib = dlopen("libthread_db.so.1", RTLD_LAZY);
    ck_assert_msg(lib != NULL, "%s", dlerror());
    void *fn = dlsym(lib, "td_init");
    ck_assert_ptr_nonnull(fn);
    b = cpu_builder();
    uintptr_t pc = (uintptr_t)fn;
    ck_assert_int_eq(
        builder_add_sample(b, &pc, 1, STACK_LEAF_EXACT, v, NULL, NULL, 0), 0);
    path = encode_to_file(b);
    builder_free(b);
    struct output out = gocheck("-frames -mappings", path);
    ASSERT_LINE_LIKE(out.text, "frame td_init ", "");
    ck_assert_msg(strstr(out.text, "libthread_db"), "%s", out.text);
    free(out.text);
    unlink(path);
    free(path);
    dlclose(lib);
}
END_TEST

/* The generation now (pinned and unpinned again). */
static uint64_t generation_now(void)
{
    uint64_t gen = unwind_pin_generation();
    ck_assert_uint_gt(gen, 0);
    unwind_unpin_generation(gen);
    return gen;
}

/* A profile of one sample: `pc` (exact) taken in generation `gen`, in a
 * file whose gocheck -frames output is returned. */
static struct output frames_of_sample_at_gen(uintptr_t pc, uint64_t gen)
{
    builder *b = cpu_builder();
    int64_t v[] = {1, 10000000};
    ck_assert_int_eq(builder_add_sample_at_gen(b, &pc, 1, STACK_LEAF_EXACT,
                                               gen, v, NULL, NULL, 0),
                     0);
    char *path = encode_to_file(b);
    builder_free(b);
    struct output out = gocheck("-frames", path);
    unlink(path);
    free(path);
    return out;
}

/* A PC of a plugin unloaded since is named after it while its mapping is
 * kept, and once the heap family's bound (UNWIND_GONE_KEPT) has dropped
 * it, is one "[unloaded]" frame that google/pprof's parser accepts --
 * never the function of the plugin loaded at that address since. */
START_TEST(unloaded_pc_named_then_forgotten)
{
    unwind_keep_gone_for_stacks();
    void *h = dlopen(PLUGIN_A, RTLD_NOW | RTLD_LOCAL);
    ck_assert_msg(h != NULL, "%s", dlerror());
    uintptr_t pc = (uintptr_t)dlsym(h, "reuse_hot_a");
    ck_assert(pc);
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    uint64_t gen = generation_now();
    ck_assert_int_eq(dlclose(h), 0);
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    struct output out = frames_of_sample_at_gen(pc, gen);
    ASSERT_LINE_LIKE(out.text, "frame reuse_hot_a ", "");
    free(out.text);
    for (int i = 0; i <= UNWIND_GONE_KEPT; i++) {
        h = dlopen(PLUGIN_B, RTLD_NOW | RTLD_LOCAL);
        ck_assert_msg(h != NULL, "%s", dlerror());
        ck_assert_int_eq(unwind_refresh_maps(), 0);
        ck_assert_int_eq(dlclose(h), 0);
        ck_assert_int_eq(unwind_refresh_maps(), 0);
    }
    h = dlopen(PLUGIN_B, RTLD_NOW | RTLD_LOCAL); /* perhaps at A's place */
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    out = frames_of_sample_at_gen(pc, gen);
    ASSERT_LINE_LIKE(out.text, "frame [unloaded] ", "");
    ck_assert_msg(!strstr(out.text, "reuse_hot"), "%s", out.text);
    free(out.text);
    dlclose(h);
}
END_TEST

/* ---- Stack table -------------------------------------------------------- */

struct collected {
    size_t n;
    size_t depth[8];
    unsigned flags[8];
    uint64_t gen[8];
    const cpprof_labelset *labels[8];
    int64_t v0[8], v1[8];
};

static void collect(const uintptr_t *pcs, size_t depth, unsigned flags,
                    uint64_t gen, const cpprof_labelset *labels,
                    const int64_t *values, void *arg)
{
    (void)pcs;
    struct collected *c = arg;
    ck_assert_uint_lt(c->n, 8);
    c->depth[c->n] = depth;
    c->flags[c->n] = flags;
    c->gen[c->n] = gen;
    c->labels[c->n] = labels;
    c->v0[c->n] = values[0];
    c->v1[c->n++] = values[1];
}

START_TEST(stacktab_sums_by_stack_flags_generation_and_set)
{
    cpprof_labelset *x = labels2("k", "x", NULL, NULL);
    cpprof_labelset *y = labels2("k", "y", NULL, NULL);
    stacktab *t = stacktab_new(2);
    uintptr_t s1[] = {0x1000, 0x2000}, s1b[] = {0x1000, 0x2000};
    int64_t v[] = {1, 10};
    ck_assert_int_eq(stacktab_add(t, s1, 2, 0, 0, x, v), 0);
    ck_assert_int_eq(stacktab_add(t, s1b, 2, 0, 0, x, v), 0); /* same */
    ck_assert_int_eq(stacktab_add(t, s1, 2, 0, 0, y, v), 0);
    ck_assert_int_eq(stacktab_add(t, s1, 2, STACK_TRUNCATED, 0, x, v), 0);
    ck_assert_int_eq(stacktab_add(t, s1, 1, 0, 0, x, v), 0);
    ck_assert_int_eq(stacktab_add(t, s1, 2, 0, 0, NULL, v), 0);
    ck_assert_int_eq(stacktab_add(t, s1, 2, 0, 0, x, v), 0);
    /* The same stack walked in another generation of the mappings (a
     * plugin unloaded in between) is another entry. */
    ck_assert_int_eq(stacktab_add(t, s1, 2, 0, 7, x, v), 0);
    ck_assert_uint_eq(stacktab_count(t), 6);
    struct collected c = {0};
    stacktab_foreach(t, collect, &c);
    ck_assert_uint_eq(c.n, 6);
    /* Insertion order, with sums. */
    ck_assert(c.labels[0] == x && c.depth[0] == 2 && c.flags[0] == 0);
    ck_assert_int_eq(c.v0[0], 3);
    ck_assert_int_eq(c.v1[0], 30);
    ck_assert(c.labels[1] == y && c.v0[1] == 1);
    ck_assert(c.flags[2] == STACK_TRUNCATED && c.v0[2] == 1);
    ck_assert(c.depth[3] == 1 && c.v0[3] == 1);
    ck_assert(c.labels[4] == NULL && c.v0[4] == 1);
    ck_assert(c.gen[0] == 0 && c.gen[5] == 7 && c.v0[5] == 1);
    stacktab_free(t);
    cpprof_labelset_release(x);
    cpprof_labelset_release(y);
}
END_TEST

START_TEST(stacktab_many_stacks)
{
    stacktab *t = stacktab_new(1);
    int64_t one = 1;
    for (int round = 0; round < 2; round++)
        for (uintptr_t i = 0; i < 50000; i++) {
            uintptr_t pcs[3] = {i, i * 7, 42};
            ck_assert_int_eq(stacktab_add(t, pcs, 3, 0, 0, NULL, &one), 0);
        }
    ck_assert_uint_eq(stacktab_count(t), 50000);
    stacktab_free(t);
}
END_TEST

/* With label_cap at 1, a new set can be interned only once every other
 * set is unreferenced: so whether one folds tells whether the table still
 * holds its reference. */
START_TEST(stacktab_releases_references_on_free)
{
    cpprof_labelset *held = labels2("k", "held", NULL, NULL);
    stacktab *t = stacktab_new(1);
    uintptr_t pc = 0x1000;
    int64_t one = 1;
    ck_assert_int_eq(stacktab_add(t, &pc, 1, 0, 0, held, &one), 0);
    ck_assert_int_eq(stacktab_add(t, &pc, 1, 0, 0, held, &one), 0);
    cpprof_labelset_release(held);
    ck_assert_int_eq(cpprof_set("label_cap", "1"), 0);

    unsigned long folded = cpprof_labelsets_folded();
    cpprof_labelset *other = labels2("k", "other", NULL, NULL);
    ck_assert_uint_eq(cpprof_labelsets_folded(), folded + 1);
    cpprof_labelset_release(other);

    stacktab_free(t);
    folded = cpprof_labelsets_folded();
    other = labels2("k", "other", NULL, NULL);
    ck_assert_uint_eq(cpprof_labelsets_folded(), folded);
    ck_assert_uint_eq(labelset_interned_count(), 1);
    cpprof_labelset_release(other);
    ck_assert_int_eq(cpprof_set("label_cap", "10000"), 0);
}
END_TEST

static Suite *builder_suite(void)
{
    Suite *s = suite_create("builder");
    TCase *p = tcase_create("profiles");
    tcase_set_timeout(p, 60); /* go tool pprof starts slowly on 2 cores */
    tcase_add_test(p, labelled_cpu_profile);
    tcase_add_test(p, inline_frames_innermost_first);
    tcase_add_test(p, numeric_labels_carry_units);
    tcase_add_test(p, truncated_stack_gets_a_root_frame);
    tcase_add_test(p, exact_leaf_is_not_moved_back);
    tcase_add_test(p, pseudo_sample);
    tcase_add_test(p, empty_profile_keeps_sample_types);
    tcase_add_test(p, profile_from_stacktab);
    tcase_add_test(p, library_loaded_between_profiles);
    tcase_add_test(p, unloaded_pc_named_then_forgotten);
    suite_add_tcase(s, p);
    TCase *t = tcase_create("stacktab");
    tcase_add_test(t, stacktab_sums_by_stack_flags_generation_and_set);
    tcase_add_test(t, stacktab_many_stacks);
    tcase_add_test(t, stacktab_releases_references_on_free);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(builder_suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
