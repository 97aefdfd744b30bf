/*
 * fuzz_labels.c -- libFuzzer target for the label API's inputs: any
 * strings as keys and values (empty, huge, any byte but NUL, repeated
 * keys, odd counts, NULLs), parents, trace contexts and buffer sizes.
 *
 * The input is a list of strings separated by NUL bytes.  The first byte
 * of the input picks options (how many strings go to the parent set, which
 * string stands for NULL, a trace context); the rest is the key/value
 * list.  Every call must either fail with the documented error or produce
 * a set that obeys the API's contract, checked against a model computed
 * here from the same strings:
 *   - keys strictly ascending, each with the value of its last occurrence
 *     (a child's value over its parent's);
 *   - cpprof_label finds exactly those pairs, and misses a key not given;
 *   - cpprof_labelset_format returns the full length however small the
 *     buffer, always NUL-terminates, and agrees with the full text;
 *   - cpprof_do applies the derived set (cpprof_thread_labels inside the
 *     callback holds it) and restores the previous one afterwards.
 * Errors are only those the header lists for what was given.
 */
#include <cpprof.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STRINGS 64

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "fuzz_labels: %s:%d: %s\n", __FILE__, __LINE__, \
                    #cond);                                                \
            abort();                                                       \
        }                                                                  \
    } while (0)

struct input {
    const char *s[MAX_STRINGS];
    size_t n;
};

/* Splits data (copied into buf, NUL-terminated) at NUL bytes. */
static void split(char *buf, size_t len, struct input *in)
{
    in->n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len && in->n < MAX_STRINGS; i++)
        if (i == len || buf[i] == '\0') {
            buf[i] = '\0';
            in->s[in->n++] = buf + start;
            start = i + 1;
        }
}

/* The error cpprof_labels must give for kv, or 0. */
static int expected_error(const char *const *kv, size_t n)
{
    if (n % 2)
        return CPPROF_EUNEVEN;
    for (size_t i = 0; i < n; i += 2) {
        if (kv[i] == NULL)
            return CPPROF_ENULLKEY;
        if (kv[i][0] == '\0')
            return CPPROF_EEMPTYKEY;
        if (kv[i + 1] == NULL)
            return CPPROF_ENULLVALUE;
    }
    return 0;
}

/* The value the model gives key: the last in kv, else the parent's. */
static const char *model_value(const cpprof_labelset *parent,
                               const char *const *kv, size_t n,
                               const char *key)
{
    for (size_t i = n; i >= 2; i -= 2)
        if (strcmp(kv[i - 2], key) == 0)
            return kv[i - 1];
    const char *v = NULL;
    bool found = false;
    if (parent != NULL)
        CHECK(cpprof_label(parent, key, &v, &found) == 0);
    return found ? v : NULL;
}

struct walk {
    const char *prev;
    size_t count;
    const cpprof_labelset *parent;
    const char *const *kv;
    size_t n;
};

static bool check_pair(const char *key, const char *value, void *arg)
{
    struct walk *w = arg;
    CHECK(key[0] != '\0');
    CHECK(w->prev == NULL || strcmp(w->prev, key) < 0);
    const char *want = model_value(w->parent, w->kv, w->n, key);
    CHECK(want != NULL && strcmp(want, value) == 0);
    w->prev = key;
    w->count++;
    return true;
}

/* Whether s is UTF-8 as RFC 3629 defines it (no overlong forms, no
 * surrogates, nothing past U+10FFFF): written here from the RFC, not
 * taken from the library, which stores other text repaired (U+FFFD). */
static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p, n = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1
                               : c >= 0xe0 && c <= 0xef ? 2
                               : c >= 0xf0 && c <= 0xf4 ? 3 : 9;
        if (n == 9)
            return false;
        unsigned cp = n ? c & (0x3f >> n) : c;
        for (unsigned i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (n == 3 && (cp < 0x10000 || cp > 0x10ffff)))
            return false;
        p += n + 1;
    }
    return true;
}

static bool all_valid_utf8(const char *const *kv, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (kv[i] != NULL && !valid_utf8(kv[i]))
            return false;
    return true;
}

/* For input that is not all UTF-8: every pair is UTF-8, keys sorted and
 * distinct, and the count is the set's size. */
static bool check_repaired_pair(const char *key, const char *value, void *arg)
{
    struct walk *w = arg;
    CHECK(key[0] != '\0' && valid_utf8(key) && valid_utf8(value));
    CHECK(w->prev == NULL || strcmp(w->prev, key) < 0);
    w->prev = key;
    w->count++;
    return true;
}

/* Every key given is in the set with its model value, and nothing else;
 * for input that is not UTF-8, what the set holds is. */
static void check_set(const cpprof_labelset *set, const cpprof_labelset *parent,
                      const char *const *kv, size_t n)
{
    struct walk w = {NULL, 0, parent, kv, n};
    if (!all_valid_utf8(kv, n)) {
        CHECK(cpprof_labels_foreach(set, check_repaired_pair, &w) == 0);
        CHECK(w.count == cpprof_labelset_size(set));
        return;
    }
    CHECK(cpprof_labels_foreach(set, check_pair, &w) == 0);
    CHECK(w.count == cpprof_labelset_size(set));
    for (size_t i = 0; i < n; i += 2) {
        const char *v;
        bool found;
        CHECK(cpprof_label(set, kv[i], &v, &found) == 0);
        CHECK(found && strcmp(v, model_value(parent, kv, n, kv[i])) == 0);
    }
    /* A key the input may or may not hold: found exactly when the model
     * has it. */
    static const char odd_key[] = "\x01odd-key";
    const char *v;
    bool found;
    CHECK(cpprof_label(set, odd_key, &v, &found) == 0);
    CHECK(found == (model_value(parent, kv, n, odd_key) != NULL));
}

static void check_format(const cpprof_labelset *set)
{
    int full = cpprof_labelset_format(set, NULL, 0);
    CHECK(full >= 2);
    char *text = malloc((size_t)full + 1);
    CHECK(text != NULL);
    CHECK(cpprof_labelset_format(set, text, (size_t)full + 1) == full);
    CHECK(strlen(text) == (size_t)full);
    CHECK(text[0] == '{' && text[full - 1] == '}');
    for (size_t len = 1; len <= (size_t)full && len < 64; len++) {
        char small[64];
        memset(small, 'x', sizeof small);
        CHECK(cpprof_labelset_format(set, small, len) == full);
        CHECK(strlen(small) == len - 1);
        CHECK(memcmp(small, text, len - 1) == 0);
    }
    free(text);
}

struct do_arg {
    const cpprof_labelset *want;
    int calls;
};

static void in_scope(void *arg, const cpprof_labelset *labels)
{
    struct do_arg *a = arg;
    cpprof_labelset *now = cpprof_thread_labels();
    char x[256], y[256];
    cpprof_labelset_format(now, x, sizeof x);
    cpprof_labelset_format(labels, y, sizeof y);
    CHECK(strcmp(x, y) == 0);
    if (a->want != NULL) {
        cpprof_labelset_format(a->want, x, sizeof x);
        CHECK(strcmp(x, y) == 0);
    }
    cpprof_labelset_release(now);
    a->calls++;
}

/* cpprof_do with `labels` under `parent` applies the derived set and
 * restores the thread's previous one. */
static void check_do(const cpprof_labelset *parent,
                     const cpprof_labelset *labels,
                     const cpprof_labelset *derived)
{
    cpprof_labelset *before = cpprof_thread_labels();
    struct do_arg a = {derived, 0};
    CHECK(cpprof_do(parent, labels, in_scope, &a) == 0);
    CHECK(a.calls == 1);
    cpprof_labelset *after = cpprof_thread_labels();
    CHECK(after == before);
    cpprof_labelset_release(after);
    cpprof_labelset_release(before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    if (len < 1)
        return 0;
    uint8_t opts = data[0];
    char *buf = malloc(len);
    CHECK(buf != NULL);
    memcpy(buf, data + 1, len - 1);
    struct input in;
    split(buf, len - 1, &in);

    /* Option bits: low 3 bits, strings (pairs) given to the parent; bit 3,
     * the string "\xff" stands for NULL; bit 4, add a trace context; bit
     * 5, apply the parent to the thread first. */
    size_t np = 2 * (opts & 7u);
    if (np > in.n)
        np = in.n & ~(size_t)1;
    if (opts & 8u)
        for (size_t i = 0; i < in.n; i++)
            if (strcmp(in.s[i], "\xff") == 0)
                in.s[i] = NULL;

    cpprof_labelset *parent = NULL, *labels = NULL, *child = NULL;
    int want = expected_error(in.s, np);
    int rc = cpprof_labels(&parent, np, in.s);
    CHECK(rc == want);
    if (rc != 0)
        goto out;
    check_set(parent, NULL, in.s, np);
    check_format(parent);
    if (opts & 32u)
        CHECK(cpprof_set_thread_labels(parent) == 0);

    const char *const *kv = in.s + np;
    size_t nkv = in.n - np;
    want = expected_error(kv, nkv);
    rc = cpprof_labels_with(&child, parent, nkv, kv);
    CHECK(rc == want);
    if (rc == 0) {
        check_set(child, parent, kv, nkv);
        check_format(child);
        CHECK(cpprof_labels(&labels, nkv, kv) == 0);
        check_do(parent, labels, child);
        /* NULL parent: the thread's current set (the parent with bit 5). */
        check_do(NULL, labels, (opts & 32u) ? child : NULL);
    }
    if (opts & 16u) {
        uint8_t trace[16] = {0}, span[8] = {0};
        memcpy(trace, data, len < 16 ? len : 16);
        memcpy(span, data + len / 2, len - len / 2 < 8 ? len - len / 2 : 8);
        cpprof_labelset *traced = NULL;
        CHECK(cpprof_labels_with_trace(&traced, parent, trace, span,
                                       data[len - 1]) == 0);
        const char *v;
        bool found;
        CHECK(cpprof_label(traced, "trace_id", &v, &found) == 0);
        CHECK(found && strlen(v) == 32);
        CHECK(cpprof_label(traced, "span_id", &v, &found) == 0);
        CHECK(found && strlen(v) == 16);
        check_format(traced);
        cpprof_labelset_release(traced);
    }
out:
    CHECK(cpprof_set_thread_labels(NULL) == 0);
    cpprof_labelset_release(child);
    cpprof_labelset_release(labels);
    cpprof_labelset_release(parent);
    free(buf);
    return 0;
}
