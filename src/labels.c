/*
 * labels.c -- immutable, interned, reference-counted label sets.
 *
 * Go's LabelSet is an immutable value that travels with a context; here it is
 * a pointer to one shared object per distinct content.  Interning gives three
 * things at once: applying a prebuilt set to a thread is a pointer store and
 * allocates nothing; collectors can key their tables by the pointer; and the
 * cardinality guard can count distinct sets.  The empty set is NULL.
 *
 * Text: keys and values are stored as valid UTF-8, each byte that does not
 * start a valid sequence replaced by U+FFFD (as Go's range over a string
 * reads it), so that every output (JSON, Prometheus text, profile.proto,
 * the index) can carry them as they are; a set whose input differed only
 * in such bytes is the same set.
 *
 * Storage: each set is one allocation holding its 2n string pointers followed
 * by the strings, sorted by key (Go prints and iterates in key order).  The
 * intern table is a chained hash under one mutex; it is touched only when a
 * set is built, never when one is applied.
 *
 * Lifetime: the count is atomic so the CPU sampler's signal handler can take
 * a reference.  A set whose count reaches zero stays in the table, so that
 * rebuilding the same labels (the common case: one set per tenant) finds it
 * again; zero-count sets are freed only when the cap needs room, and then
 * under the registry lock, which is what makes the census's cross-thread
 * reads safe (see thread.h).
 */
#define _GNU_SOURCE
#include "labels.h"
#include "atfork.h"
#include "config.h"
#include "labelhooks.h"
#include "warn.h"
#include "upper_calls.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cpprof_labelset {
    _Atomic(void *) published;     /* otel.c's record, built on first use;
                                      first: labels.h reads it inline */
    uint64_t serial;               /* this set's number, never reused;
                                      second: labels.h reads it inline */
    atomic_long refs;              /* every holder's: the set lives while > 0 */
    atomic_long app_refs;          /* the part of refs handed to the program */
    uint64_t hash;
    struct cpprof_labelset *chain; /* next in the intern bucket */
    size_t n;                      /* number of pairs */
    struct acct_counters acct;     /* accounting.c's counters (labelhooks.h) */
    const char *kv[];              /* key0, value0, key1, ... then strings */
};
_Static_assert(offsetof(struct cpprof_labelset, published) == 0,
               "labelset_published() in labels.h reads the first member");
_Static_assert(offsetof(struct cpprof_labelset, serial) ==
                   LABELSET_SERIAL_OFFSET,
               "labelset_serial() in labels.h reads the serial there");

/* A key/value pair while a set is being built. */
struct pair {
    const char *key, *value;
    size_t order; /* argument position: the later duplicate wins */
};

/* Past the cap every new set folds into this one; its labels say why.
 * Its kv[] storage is the member after it (a GNU C extension, as clang
 * notes), so that member must start where kv[] does. */
_Static_assert(offsetof(struct cpprof_labelset, kv) ==
                   sizeof(struct cpprof_labelset),
               "the overflow set's labels follow it directly");
static struct {
    struct cpprof_labelset set;
    const char *kv[2];
} overflow = {
    .set = {.refs = 1, .app_refs = 1, .serial = 1, .n = 1},
    .kv = {"cpprof_overflow", "label set cap reached"},
};

static pthread_mutex_t intern_lock ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t registry_mu ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;

void labels_registry_lock(void) { pthread_mutex_lock(&registry_mu); }
void labels_registry_unlock(void) { pthread_mutex_unlock(&registry_mu); }
/* Set while this thread is inside intern(): a signal handler that
 * interrupted it and calls back in (cpprof_do from a handler) gets
 * -EDEADLK instead of waiting forever for the lock its own thread holds. */
static __thread int interning __attribute__((tls_model("initial-exec")));
static struct cpprof_labelset **buckets;
static size_t nbuckets, ninterned;
static uint64_t next_serial = 2; /* 1 is the overflow set's */
/* Interned sets no one references: what a reclaim would free (an
 * estimate while references come and go; exact under intern_lock when
 * none do), so that a table at the cap with nothing to free is not
 * scanned for every new set. */
static atomic_long unreferenced;
static atomic_ulong folded;
static atomic_int overrelease_reported, cap_reported;

/* ---- Checking arguments ------------------------------------------------- */

static int validate_pairs(size_t n, const char *const *kv)
{
    if (n % 2)
        return CPPROF_EUNEVEN;
    if (n && !kv)
        return -EINVAL;
    for (size_t i = 0; i < n; i += 2) {
        if (!kv[i])
            return CPPROF_ENULLKEY;
        if (!kv[i][0])
            return CPPROF_EEMPTYKEY;
        if (!kv[i + 1])
            return CPPROF_ENULLVALUE;
    }
    return 0;
}

/* ---- Valid UTF-8 ------------------------------------------------------- */

/* SIGNAL-SAFE (text_escape).
 * The length of the valid UTF-8 sequence s starts with (1 for ASCII), or 0
 * when the byte at s starts none (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static size_t utf8_sequence(const unsigned char *s)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t len;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

static bool utf8_valid(const char *s)
{
    for (size_t n; *s; s += n)
        if ((n = utf8_sequence((const unsigned char *)s)) == 0)
            return false;
    return true;
}

/* A malloc'd copy of s with every byte that starts no valid sequence
 * replaced by U+FFFD, or NULL. */
static char *utf8_repaired(const char *s)
{
    static const char replacement[] = "\xef\xbf\xbd";
    char *out = malloc(3 * strlen(s) + 1), *at = out;
    if (out == NULL)
        return NULL;
    while (*s) {
        size_t n = utf8_sequence((const unsigned char *)s);
        if (n == 0) {
            memcpy(at, replacement, 3);
            at += 3;
            s++;
        } else {
            memcpy(at, s, n);
            at += n;
            s += n;
        }
    }
    *at = '\0';
    return out;
}

/* Points every key and value of p that is not valid UTF-8 at a repaired
 * copy, kept in owned[] (room for 2n) for the caller to free once the set
 * is interned.  Returns the number of copies, or -ENOMEM. */
static int repair_pairs(struct pair *p, size_t n, char **owned)
{
    int nowned = 0;
    for (size_t i = 0; i < 2 * n; i++) {
        const char **text = i % 2 ? &p[i / 2].value : &p[i / 2].key;
        if (utf8_valid(*text))
            continue;
        if ((owned[nowned] = utf8_repaired(*text)) == NULL) {
            while (nowned > 0)
                free(owned[--nowned]);
            return -ENOMEM;
        }
        *text = owned[nowned++];
    }
    return nowned;
}

/* ---- Building ------------------------------------------------------------ */

static int pair_cmp(const void *a, const void *b)
{
    const struct pair *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return (x->order > y->order) - (x->order < y->order);
}

/* Sorts by key and keeps, for each key, the pair given last. */
static size_t sort_unique(struct pair *p, size_t n)
{
    qsort(p, n, sizeof *p, pair_cmp);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out && strcmp(p[out - 1].key, p[i].key) == 0)
            p[out - 1] = p[i];
        else
            p[out++] = p[i];
    }
    return out;
}

static uint64_t hash_pairs(const struct pair *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a; NUL separates strings */
    for (size_t i = 0; i < n; i++) {
        for (const char *s = p[i].key;; s++) {
            h = (h ^ (unsigned char)*s) * 1099511628211ULL;
            if (!*s)
                break;
        }
        for (const char *s = p[i].value;; s++) {
            h = (h ^ (unsigned char)*s) * 1099511628211ULL;
            if (!*s)
                break;
        }
    }
    return h;
}

static int same_content(const struct cpprof_labelset *s,
                        const struct pair *p, size_t n)
{
    if (s->n != n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(s->kv[2 * i], p[i].key) ||
            strcmp(s->kv[2 * i + 1], p[i].value))
            return 0;
    return 1;
}

static struct cpprof_labelset *new_set(const struct pair *p, size_t n,
                                       uint64_t hash)
{
    size_t bytes = sizeof(struct cpprof_labelset) + 2 * n * sizeof(char *);
    for (size_t i = 0; i < n; i++)
        bytes += strlen(p[i].key) + strlen(p[i].value) + 2;
    struct cpprof_labelset *s = malloc(bytes);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    atomic_init(&s->app_refs, 0);
    s->hash = hash;
    s->serial = next_serial++;
    s->chain = NULL;
    s->n = n;
    atomic_init(&s->published, NULL);
    memset(&s->acct, 0, sizeof s->acct);
    char *text = (char *)&s->kv[2 * n];
    for (size_t i = 0; i < 2 * n; i++) {
        const char *src = (i % 2) ? p[i / 2].value : p[i / 2].key;
        size_t len = strlen(src) + 1;
        memcpy(text, src, len);
        s->kv[i] = text;
        text += len;
    }
    return s;
}

/* What the modules above keep in a set being reclaimed (labelhooks.h). */
static void release_extras(struct cpprof_labelset *s)
{
    void (*free_record)(void *) = atomic_load(&label_hooks.record_freed);
    void (*retire)(struct acct_counters *) =
        atomic_load(&label_hooks.counters_retired);
    if (free_record)
        free_record(atomic_load(&s->published));
    if (retire)
        retire(&s->acct);
}

/* Frees every set nobody references.  Called with intern_lock held; takes
 * the registry lock so no census is between reading a thread's pointer and
 * taking its reference. */
static void reclaim_unreferenced(void)
{
    labels_registry_lock();
    for (size_t b = 0; b < nbuckets; b++) {
        struct cpprof_labelset **link = &buckets[b];
        while (*link) {
            struct cpprof_labelset *s = *link;
            if (atomic_load(&s->refs) == 0) {
                *link = s->chain;
                release_extras(s);
                free(s);
                ninterned--;
                atomic_fetch_sub(&unreferenced, 1);
            } else {
                link = &s->chain;
            }
        }
    }
    labels_registry_unlock();
}

static int grow_table(void)
{
    size_t n = nbuckets ? nbuckets * 2 : 64;
    struct cpprof_labelset **nb = calloc(n, sizeof *nb);
    if (!nb)
        return -ENOMEM;
    for (size_t b = 0; b < nbuckets; b++) {
        struct cpprof_labelset *s = buckets[b], *next;
        for (; s; s = next) {
            next = s->chain;
            s->chain = nb[s->hash & (n - 1)];
            nb[s->hash & (n - 1)] = s;
        }
    }
    free(buckets);
    buckets = nb;
    nbuckets = n;
    return 0;
}

/* The first set folded: said once on stderr, as the index page and
 * /metrics say it for as long as it lasts. */
static void report_cap_reached(void)
{
    if (!atomic_exchange(&cap_reported, 1))
        warn_stderr("cpprof: the label cap (label_cap, CPPROF_LABEL_CAP = "
                    "%ld distinct label sets) is reached: new label sets "
                    "are folded into {cpprof_overflow=\"label set cap "
                    "reached\"}, and the samples taken under them carry "
                    "no labels of their own\n",
                    cfg_int(CFG_LABEL_CAP));
}

/* The interned set for sorted, unique pairs, with a reference (one of
 * the program's when `for_app`). */
static int intern(cpprof_labelset **out, const struct pair *p, size_t n,
                  bool for_app)
{
    if (n == 0) {
        *out = NULL;
        return 0;
    }
    uint64_t h = hash_pairs(p, n);
    int rc = 0;
    if (interning)
        return -EDEADLK;
    interning = 1;
    atomic_signal_fence(memory_order_seq_cst);
    pthread_mutex_lock(&intern_lock);
    struct cpprof_labelset *s = nbuckets ? buckets[h & (nbuckets - 1)] : NULL;
    for (; s; s = s->chain)
        if (s->hash == h && same_content(s, p, n))
            break;
    bool fold = false;
    if (s) {
        labelset_hold(s);
    } else {
        if (ninterned >= (size_t)cfg_int(CFG_LABEL_CAP) &&
            atomic_load(&unreferenced) > 0)
            reclaim_unreferenced();
        if (ninterned >= (size_t)cfg_int(CFG_LABEL_CAP)) {
            atomic_fetch_add(&folded, 1);
            fold = true;
            s = &overflow.set;
        } else if ((ninterned + 1 > nbuckets && (rc = grow_table()) != 0) ||
                   !(s = new_set(p, n, h))) {
            rc = rc ? rc : -ENOMEM;
        } else {
            s->chain = buckets[h & (nbuckets - 1)];
            buckets[h & (nbuckets - 1)] = s;
            ninterned++;
        }
    }
    if (s && for_app && s != &overflow.set)
        atomic_fetch_add(&s->app_refs, 1);
    pthread_mutex_unlock(&intern_lock);
    atomic_signal_fence(memory_order_seq_cst);
    interning = 0;
    if (fold)
        report_cap_reached();
    *out = s;
    return rc;
}

/* Collects a set's pairs followed by kv's (made valid UTF-8), sorts and
 * interns them. */
static int build(cpprof_labelset **out, const cpprof_labelset *parent,
                 size_t n, const char *const *kv, bool for_app)
{
    size_t np = cpprof_labelset_size(parent), total = np + n / 2;
    struct pair stackbuf[16];
    char *owned_stackbuf[32];
    struct pair *p = total <= 16 ? stackbuf : malloc(total * sizeof *p);
    char **owned = total <= 16 ? owned_stackbuf
                               : malloc(2 * total * sizeof *owned);
    int rc = p && owned ? 0 : -ENOMEM, nowned = 0;
    if (rc == 0) {
        for (size_t i = 0; i < np; i++)
            p[i] = (struct pair){parent->kv[2 * i], parent->kv[2 * i + 1], i};
        for (size_t i = 0; i < n / 2; i++)
            p[np + i] = (struct pair){kv[2 * i], kv[2 * i + 1], np + i};
        nowned = repair_pairs(p + np, n / 2, owned);
        rc = nowned < 0 ? nowned : intern(out, p, sort_unique(p, total), for_app);
    }
    while (nowned > 0)
        free(owned[--nowned]);
    if (p != stackbuf)
        free(p);
    if (owned != owned_stackbuf)
        free(owned);
    return rc;
}

int cpprof_labels(cpprof_labelset **out, size_t n, const char *const *kv)
{
    return cpprof_labels_with(out, NULL, n, kv);
}

int cpprof_labels_with(cpprof_labelset **out, const cpprof_labelset *parent,
                       size_t n, const char *const *kv)
{
    if (!out)
        return -EINVAL;
    *out = NULL;
    int rc = validate_pairs(n, kv);
    return rc ? rc : build(out, parent, n, kv, true);
}

int labelset_merge(cpprof_labelset **out, const cpprof_labelset *parent,
                   const cpprof_labelset *labels)
{
    if (!parent || !labels || parent == labels) {
        *out = labelset_hold(labels ? labels : parent);
        return 0;
    }
    return build(out, parent, 2 * labels->n, labels->kv, false);
}

/* ---- References ------------------------------------------------------------ */

/* Two counts, because a set must outlive every holder however the program
 * miscounts: `refs` counts all of them (the program's, a thread's current
 * set, a sample in the ring, a profile being built) and decides when the
 * set may be reclaimed; `app_refs` counts the references the API handed to
 * the program.  A program that releases once too often would otherwise
 * take a count that a thread or a sample still needs, and the set would be
 * freed under it: such a release is refused instead, with one warning on
 * stderr (a host process must not be aborted for it). */

/* SIGNAL-SAFE: one relaxed atomic add (and one more for a set revived
 * from no reference, which a signal handler never holds). */
cpprof_labelset *labelset_hold(const cpprof_labelset *set)
{
    cpprof_labelset *s = (cpprof_labelset *)set;
    if (s && atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed) == 0)
        atomic_fetch_sub_explicit(&unreferenced, 1, memory_order_relaxed);
    return s;
}

/* SIGNAL-SAFE */
void labelset_ref_signal_safe(const cpprof_labelset *set)
{
    labelset_hold(set);
}

static void report_overrelease(void)
{
    if (!atomic_exchange(&overrelease_reported, 1))
        warn_stderr("cpprof: cpprof_labelset_release called more often "
                    "than the set was referenced; the extra releases are "
                    "ignored\n");
}

void labelset_drop(const cpprof_labelset *set)
{
    cpprof_labelset *s = (cpprof_labelset *)set;
    if (!s || s == &overflow.set)
        return;
    long was = atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel);
    if (was == 1)
        atomic_fetch_add_explicit(&unreferenced, 1, memory_order_relaxed);
    if (was > 0)
        return;
    /* Below zero: cpprof's own miscount; keep the set rather than free it
     * under whoever still uses it. */
    atomic_fetch_add(&s->refs, 1);
    report_overrelease();
}

cpprof_labelset *cpprof_labelset_ref(const cpprof_labelset *set)
{
    cpprof_labelset *s = labelset_hold(set);
    if (s && s != &overflow.set)
        atomic_fetch_add_explicit(&s->app_refs, 1, memory_order_relaxed);
    return s;
}

void cpprof_labelset_release(const cpprof_labelset *set)
{
    cpprof_labelset *s = (cpprof_labelset *)set;
    if (!s || s == &overflow.set)
        return;
    long app = atomic_load_explicit(&s->app_refs, memory_order_relaxed);
    do {
        if (app <= 0) {
            report_overrelease();
            return;
        }
    } while (!atomic_compare_exchange_weak(&s->app_refs, &app, app - 1));
    labelset_drop(s);
}

/* ---- Reading ------------------------------------------------------------ */

/* SIGNAL-SAFE */
size_t cpprof_labelset_size(const cpprof_labelset *set)
{
    return set ? set->n : 0;
}

/* SIGNAL-SAFE */
const char *labelset_key(const cpprof_labelset *set, size_t i)
{
    return set->kv[2 * i];
}

/* SIGNAL-SAFE */
const char *labelset_value(const cpprof_labelset *set, size_t i)
{
    return set->kv[2 * i + 1];
}

int cpprof_label(const cpprof_labelset *set, const char *key,
                 const char **value, bool *found)
{
    if (!key || !value || !found)
        return -EINVAL;
    *value = NULL;
    *found = false;
    size_t lo = 0, hi = cpprof_labelset_size(set);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(key, set->kv[2 * mid]);
        if (c == 0) {
            *value = set->kv[2 * mid + 1];
            *found = true;
            break;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return 0;
}

int cpprof_labels_foreach(const cpprof_labelset *set, cpprof_label_fn fn,
                          void *arg)
{
    if (!fn)
        return -EINVAL;
    for (size_t i = 0; i < cpprof_labelset_size(set); i++)
        if (!fn(set->kv[2 * i], set->kv[2 * i + 1], arg))
            break;
    return 0;
}

/* SIGNAL-SAFE (crash.c formats in its handler).  The escape of an ASCII
 * byte, or of a byte that starts no UTF-8 sequence, in tmp or static; NULL
 * when the byte stands for itself. */
static const char *byte_escape(unsigned char c, bool quoted, char tmp[5])
{
    static const char hex[] = "0123456789abcdef";
    switch (c) {
    case '"': return quoted ? "\\\"" : NULL;
    case '\\': return quoted ? "\\\\" : NULL;
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    }
    if (c >= 0x20 && c < 0x7f)
        return NULL;
    tmp[0] = '\\', tmp[1] = 'x', tmp[2] = hex[c >> 4];
    tmp[3] = hex[c & 15], tmp[4] = 0;
    return tmp;
}

/* SIGNAL-SAFE: see labels.h. */
size_t text_escape(char *buf, size_t len, size_t at, const char *s,
                   bool quoted)
{
    char tmp[5];
#define PUT(c) (at + 1 < len ? (buf[at] = (c), at++) : at++)
    if (quoted)
        PUT('"');
    while (*s) {
        size_t n = utf8_sequence((const unsigned char *)s);
        const char *esc = NULL;
        if (n <= 1) /* ASCII, or a byte that starts no sequence */
            esc = byte_escape((unsigned char)*s, quoted, tmp), n = 1;
        if (esc == NULL)
            for (size_t i = 0; i < n; i++)
                PUT(s[i]);
        for (; esc != NULL && *esc; esc++)
            PUT(*esc);
        s += n;
    }
    if (quoted)
        PUT('"');
#undef PUT
    if (len)
        buf[at < len ? at : len - 1] = '\0';
    return at;
}

void text_put_escaped(FILE *f, const char *s, bool quoted)
{
    char small[256];
    size_t need = text_escape(small, sizeof small, 0, s, quoted);
    if (need < sizeof small) {
        fwrite(small, 1, need, f);
        return;
    }
    char *big = malloc(need + 1);
    if (big == NULL) {
        fputs(quoted ? "\"[out of memory]\"" : "[out of memory]", f);
        return;
    }
    text_escape(big, need + 1, 0, s, quoted);
    fwrite(big, 1, need, f);
    free(big);
}

/* SIGNAL-SAFE: no allocation, only the caller's buffer. */
int cpprof_labelset_format(const cpprof_labelset *set, char *buf, size_t len)
{
    if (!buf && len)
        return -EINVAL;
    size_t at = 0;
    const char *sep = "{";
    for (size_t i = 0; i < cpprof_labelset_size(set); i++) {
        for (const char *c = sep; *c; c++, at++)
            if (at + 1 < len)
                buf[at] = *c;
        at = text_escape(buf, len, at, set->kv[2 * i], true);
        if (at + 1 < len)
            buf[at] = ':';
        at++;
        at = text_escape(buf, len, at, set->kv[2 * i + 1], true);
        sep = ", ";
    }
    for (const char *c = at ? "}" : "{}"; *c; c++, at++)
        if (at + 1 < len)
            buf[at] = *c;
    if (len)
        buf[at < len ? at : len - 1] = '\0';
    return at > INT32_MAX ? -EOVERFLOW : (int)at;
}

/* ---- Out-of-process record (otel.c) ----------------------------------- */

void *labelset_attach_published(const cpprof_labelset *set, void *record)
{
    void *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(
            &((cpprof_labelset *)set)->published, &expected, record,
            memory_order_acq_rel, memory_order_acquire))
        return record;
    return expected;
}

/* ---- Accounting (accounting.c) ----------------------------------------- */

/* SIGNAL-SAFE */
struct acct_counters *labelset_counters(const cpprof_labelset *set)
{
    return &((cpprof_labelset *)set)->acct;
}

void labelset_foreach_interned(void (*fn)(cpprof_labelset *set, void *arg),
                               void *arg)
{
    pthread_mutex_lock(&intern_lock);
    for (size_t b = 0; b < nbuckets; b++)
        for (struct cpprof_labelset *s = buckets[b]; s; s = s->chain)
            fn(s, arg);
    fn(&overflow.set, arg);
    pthread_mutex_unlock(&intern_lock);
}

/* ---- Counters --------------------------------------------------------- */

unsigned long cpprof_labelsets_folded(void)
{
    return atomic_load(&folded);
}

size_t labelset_interned_count(void)
{
    pthread_mutex_lock(&intern_lock);
    size_t n = ninterned;
    pthread_mutex_unlock(&intern_lock);
    return n;
}

/* fork(): the child must not inherit a lock held by a thread that no longer
 * exists, so both locks are held across fork, the intern lock first (as
 * labelset_drop nests them). */
void labels_atfork_prepare(void)
{
    pthread_mutex_lock(&intern_lock);
    pthread_mutex_lock(&registry_mu);
}
void labels_atfork_parent(void)
{
    pthread_mutex_unlock(&registry_mu);
    pthread_mutex_unlock(&intern_lock);
}
ATFORK_CHILD void labels_atfork_child(void)
{
    atfork_mutex_release(&registry_mu);
    atfork_mutex_release(&intern_lock);
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(labelset_drop);
UPPER_CALLS(labelset_hold);
UPPER_CALLS(labelset_interned_count);
UPPER_CALLS(labelset_key);
UPPER_CALLS(labelset_value);
UPPER_CALLS(text_escape);
UPPER_CALLS(text_put_escaped);
