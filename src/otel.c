/*
 * otel.c -- cpprof's labels published for out-of-process profilers.
 *
 * Fleet profilers (the OpenTelemetry eBPF profiler, Parca's and Datadog's
 * agents) sample every process of a host from outside and read a thread's
 * labels from its memory while the thread is stopped.  This module publishes
 * the labels in the layouts they read, written against:
 *
 *   - OTEP 4947 "Thread Context" (opentelemetry-specification,
 *     oteps/profiles/4947-thread-ctx.md): the TLS pointer otel_thread_ctx_v1
 *     and its Thread-Local Context Record (trace-id[16], span-id[8],
 *     valid u8, trace-flags u8, attrs-data-size u16, then attrs-data as
 *     key-index u8 / length u8 / value bytes; byte-packed, host endian,
 *     at most 640 bytes), with the key table and schema version in the
 *     process context (threadlocal.attribute_key_map,
 *     threadlocal.schema_version);
 *   - OTEP 4719 "Process Context" (oteps/profiles/4719-process-ctx.md): the
 *     OTEL_CTX mapping, its 32-byte header (signature, version 2,
 *     payload_size, published_at_ns, payload pointer) and a protobuf
 *     opentelemetry.proto.resource.v1.Resource payload, with the spec's
 *     publication and updating protocols;
 *   - polarsignals/custom-labels "Custom Label ABI (v1)" (custom-labels-v1.md):
 *     custom_labels_abi_version (= 1) and the TLS pointer
 *     custom_labels_current_set to a {storage, count, capacity} label set.
 *
 * Shape.  Label sets are interned and immutable, so each set gets one
 * record, built on its first publication and freed with it (labels.c keeps
 * the pointer): applying a set stores two thread-local pointers and copies
 * nothing.  That is OTEP 4947's pointer-swap writer ("updates the TLS
 * pointer to reference the new record"), never its in-place valid-flag
 * variant: a record is complete, valid = 1, before any thread can point at
 * it, and each pointer is one aligned word store, so a reader that stops
 * the thread at any instruction sees the old record or the new one.  The
 * spec asks only for compiler fences (the reader stops the thread); the
 * record reaches other threads through the set's release/acquire pointer.
 * The custom-labels set lives in the same allocation and points at the
 * label set's own strings.
 *
 * The key table is append-only (OTEP 4947: indexes never change), holds at
 * most 256 keys, and grows as records meet new keys; each growth republishes
 * the process context with the updating protocol before any record uses the
 * new index.  The payload is written in place after the header inside the
 * mapping, and the header's payload pointer points at it, so both readings
 * of OTEP 4719 work (its reading protocol says "after the header", its
 * header table says "pointer to payload").  The mapping is sized once
 * (64 KiB, untouched pages cost nothing) because readers cache its address.
 *
 * Where the specs left a choice, or were unclear:
 *   - Over-long values: OTEP 4947's length is a uint8, so a value is cut to
 *     255 bytes, and further to what is left of the 640-byte record; the cut
 *     backs off to a UTF-8 character boundary (the spec says values are
 *     UTF-8).  A pair that does not fit at all (less than its 2-byte entry
 *     header plus one character left), or whose key is past the 256th, is
 *     left out of the record; it stays in cpprof's own profiles and in the
 *     custom-labels view, which has no such limits.
 *   - trace-id and span-id: cpprof_labels_with_trace() stores them as the
 *     labels "trace_id" (32 lowercase hex digits), "span_id" (16) and
 *     "trace_flags" (2), the first two the keys Pyroscope's span profiles use;
 *     a record takes them into its fixed fields (and out of attrs-data) only
 *     when both ids are well formed and not all zero, as the spec requires
 *     both or neither.
 *   - threadlocal.schema_version is "tlsdesc_v1_dev", the value the OTEP
 *     prescribes until it is merged.  The TLS symbol is reached through a
 *     TLS descriptor, the dialect both specs name for shared libraries
 *     (otel_tlsdesc.c, the one file built with gcc -mtls-dialect=gnu2).
 *   - custom-labels v1 requires the exporting library's file name to match
 *     libcustomlabels.*\.so; libcpprof.so does not, so readers that follow
 *     that rule literally skip it (README says so).
 *   - OTEP 4719 names the memfd "OTEL_CTX"; where memfd_create is refused
 *     the fallback is a shared anonymous mapping, named with
 *     PR_SET_VMA_ANON_NAME ("[anon_shmem:OTEL_CTX]", the name its reading
 *     protocol looks for).  MADV_DONTFORK keeps it out of children; a forked
 *     child publishes its own (its pid differs).
 */
#define _GNU_SOURCE
#include "otel.h"
#include "atfork.h"
#include "config.h"
#include "labelhooks.h"
#include "labels.h"
#include "thread.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif

enum {
    RECORD_MAX = 640,      /* OTEP 4947's recommended ceiling */
    RECORD_HEAD = 28,      /* fixed fields before attrs-data */
    VALUE_MAX = 255,       /* uint8 length */
    KEYS_MAX = 256,        /* uint8 key index */
    CTX_MAP_SIZE = 65536,  /* header + payload */
    CTX_HEADER = 32,
};

/* ---- The published layouts ------------------------------------------- */

/* OTEP 4947's Thread-Local Context Record (byte-packed, host endian). */
struct otel_record {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t valid;
    uint8_t trace_flags;
    uint16_t attrs_data_size;
    uint8_t attrs_data[RECORD_MAX - RECORD_HEAD];
} __attribute__((packed, aligned(8)));
_Static_assert(offsetof(struct otel_record, attrs_data) == RECORD_HEAD,
               "OTEP 4947 header is 28 bytes");
_Static_assert(sizeof(struct otel_record) == RECORD_MAX, "640-byte record");

/* custom-labels v1. */
typedef struct {
    size_t len;
    const unsigned char *buf;
} custom_labels_string_t;
typedef struct {
    custom_labels_string_t key, value;
} custom_labels_label_t;
typedef struct {
    custom_labels_label_t *storage;
    size_t count, capacity;
} custom_labels_labelset_t;

/* What one label set publishes; freed with the set. */
struct published {
    struct otel_record record;
    custom_labels_labelset_t labels;
    custom_labels_label_t storage[];
};

/* OTEP 4719's header. */
struct ctx_header {
    char signature[8];
    uint32_t version;
    uint32_t payload_size;
    uint64_t published_at_ns;
    uint64_t payload;
};
_Static_assert(sizeof(struct ctx_header) == CTX_HEADER, "32-byte header");

/* The exported symbols, unversioned (src/libcpprof.map, docs/abi.md).
 * Only the owning thread writes its pointers; readers read them with the
 * thread stopped. */
#define EXPORT __attribute__((visibility("default")))
EXPORT __thread const void *volatile otel_thread_ctx_v1;
EXPORT __thread const void *volatile custom_labels_current_set;
EXPORT const uint32_t custom_labels_abi_version = 1;

/* The same two variables under hidden names, reached initial-exec (a load
 * and a store, like thread.c's `self`).  Writing through the exported
 * names would not do: the linker turns every access to a symbol into the
 * cheapest form any access to it has, and readers need the exported
 * symbols' TLS descriptors (otel_tlsdesc.c), which would then vanish. */
#define HIDDEN_ALIAS(target)                                                 \
    __attribute__((alias(#target), visibility("hidden"),                     \
                   tls_model("initial-exec")))
extern __thread const void *volatile record_slot
    HIDDEN_ALIAS(otel_thread_ctx_v1);
extern __thread const void *volatile labels_slot
    HIDDEN_ALIAS(custom_labels_current_set);

/* Set once by cpprof_otel_context_enable(); never cleared.  Read by the
 * child's fork handler, so with the fork handlers' state (atfork.h): a
 * page the parent never touched costs a child that reads it a fault. */
static atomic_bool otel_enabled ATFORK_HELD;

/* ---- Process context: state -------------------------------------------- */

/* ctx_lock guards everything below; it is never held across malloc, so the
 * allocator's fork handlers cannot deadlock against it. */
static pthread_mutex_t ctx_lock ATFORK_LOCK = PTHREAD_MUTEX_INITIALIZER;
static struct ctx_header *ctx_map ATFORK_HELD; /* as otel_enabled */
static uint64_t ctx_last_ns;
static const char *keys[KEYS_MAX];
static _Atomic unsigned nkeys; /* read without the lock by key_index */
/* The "service_name" setting when the context was enabled (a copy, so a
 * forked child can republish without the settings' lock). */
static char service_name[256];

/* ---- Process context: the protobuf payload ------------------------------ */

/* A write cursor; with buf NULL it only counts, which is how a key's
 * admission is checked against the mapping's size. */
struct pb {
    uint8_t *buf;
    size_t len;
};

static void pb_byte(struct pb *pb, uint8_t b)
{
    if (pb->buf)
        pb->buf[pb->len] = b;
    pb->len++;
}

static void pb_varint(struct pb *pb, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        pb_byte(pb, (uint8_t)(v | 0x80));
    pb_byte(pb, (uint8_t)v);
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7)
        n++;
    return n;
}

/* Bytes of a length-delimited field (tag < 16) with a body of n bytes. */
static size_t field_size(size_t n)
{
    return 1 + varint_size(n) + n;
}

static void pb_field_head(struct pb *pb, unsigned field, size_t body)
{
    pb_byte(pb, (uint8_t)(field << 3 | 2));
    pb_varint(pb, body);
}

static void pb_string(struct pb *pb, unsigned field, const char *s)
{
    size_t n = strlen(s);
    pb_field_head(pb, field, n);
    if (pb->buf)
        memcpy(pb->buf + pb->len, s, n);
    pb->len += n;
}

/* AnyValue fields (common.proto): string_value 1, int_value 3,
 * array_value 5; KeyValue: key 1, value 2; Resource: attributes 1;
 * ArrayValue: values 1. */
static void pb_kv_string(struct pb *pb, const char *key, const char *value)
{
    size_t any = field_size(strlen(value));
    pb_field_head(pb, 1, field_size(strlen(key)) + field_size(any));
    pb_string(pb, 1, key);
    pb_field_head(pb, 2, any);
    pb_string(pb, 1, value);
}

static void pb_kv_int(struct pb *pb, const char *key, int64_t value)
{
    size_t any = 1 + varint_size((uint64_t)value);
    pb_field_head(pb, 1, field_size(strlen(key)) + field_size(any));
    pb_string(pb, 1, key);
    pb_field_head(pb, 2, any);
    pb_byte(pb, 3 << 3 | 0);
    pb_varint(pb, (uint64_t)value);
}

static void pb_kv_string_array(struct pb *pb, const char *key,
                               const char *const *v, size_t n)
{
    size_t array = 0;
    for (size_t i = 0; i < n; i++)
        array += field_size(field_size(strlen(v[i])));
    size_t any = field_size(array);
    pb_field_head(pb, 1, field_size(strlen(key)) + field_size(any));
    pb_string(pb, 1, key);
    pb_field_head(pb, 2, any);
    pb_field_head(pb, 5, array);
    for (size_t i = 0; i < n; i++) {
        pb_field_head(pb, 1, field_size(strlen(v[i])));
        pb_string(pb, 1, v[i]);
    }
}

/* The Resource: who we are, and OTEP 4947's thread-local reference data. */
static void encode_resource(struct pb *pb, const char *const *k, size_t n)
{
    pb_kv_string(pb, "service.name", service_name);
    pb_kv_int(pb, "process.pid", getpid());
    pb_kv_string(pb, "telemetry.sdk.name", "cpprof");
    pb_kv_string(pb, "threadlocal.schema_version", "tlsdesc_v1_dev");
    pb_kv_string_array(pb, "threadlocal.attribute_key_map", k, n);
}

/* ---- Process context: the mapping and its protocols -------------------- */

static uint64_t next_timestamp(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    /* Readers detect an update by a changed timestamp: never repeat one. */
    ctx_last_ns = ns > ctx_last_ns ? ns : ctx_last_ns + 1;
    return ctx_last_ns;
}

static void name_mapping(void)
{
    /* Fails on a memfd mapping and on kernels without
     * CONFIG_ANON_VMA_NAME; OTEP 4719 says to try anyway (eBPF readers may
     * hook the call) and ignore the error. */
    prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)ctx_map,
          CTX_MAP_SIZE, (unsigned long)"OTEL_CTX");
}

static struct ctx_header *map_context(void)
{
    void *p = MAP_FAILED;
    int fd = memfd_create("OTEL_CTX", MFD_CLOEXEC);
    if (fd >= 0) {
        if (ftruncate(fd, CTX_MAP_SIZE) == 0)
            p = mmap(NULL, CTX_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                     fd, 0);
        close(fd);
    }
    if (p == MAP_FAILED)
        p = mmap(NULL, CTX_MAP_SIZE, PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (madvise(p, CTX_MAP_SIZE, MADV_DONTFORK) != 0) {
        munmap(p, CTX_MAP_SIZE);
        return NULL;
    }
    return p;
}

static void write_payload(void)
{
    uint8_t *payload = (uint8_t *)ctx_map + CTX_HEADER;
    struct pb pb = {payload, 0};
    encode_resource(&pb, keys, atomic_load(&nkeys));
    ctx_map->payload_size = (uint32_t)pb.len;
    ctx_map->payload = (uint64_t)(uintptr_t)payload;
}

/* Publication protocol on the first call, updating protocol after.
 * Called with ctx_lock held. */
static int publish_context(void)
{
    if (ctx_map) {
        __atomic_store_n(&ctx_map->published_at_ns, 0, __ATOMIC_SEQ_CST);
        atomic_thread_fence(memory_order_seq_cst);
        write_payload();
        atomic_thread_fence(memory_order_seq_cst);
        __atomic_store_n(&ctx_map->published_at_ns, next_timestamp(),
                         __ATOMIC_SEQ_CST);
        name_mapping();
        return 0;
    }
    if (!(ctx_map = map_context()))
        return -errno;
    ctx_map->version = 2;
    write_payload();
    ctx_map->published_at_ns = next_timestamp();
    atomic_thread_fence(memory_order_seq_cst);
    memcpy(ctx_map->signature, "OTEL_CTX", 8);
    atomic_thread_fence(memory_order_seq_cst);
    name_mapping();
    return 0;
}

/* The index of `key` in the key table, adding it (and republishing the
 * process context) when new; -1 when the table is full or the payload
 * would no longer fit the mapping. */
static int key_index(const char *key)
{
    unsigned n = atomic_load_explicit(&nkeys, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        if (strcmp(keys[i], key) == 0)
            return (int)i;
    char *copy = strdup(key); /* outside the lock: see ctx_lock */
    if (!copy)
        return -1;
    int index = -1;
    pthread_mutex_lock(&ctx_lock);
    n = atomic_load(&nkeys);
    for (unsigned i = 0; i < n && index < 0; i++)
        if (strcmp(keys[i], key) == 0)
            index = (int)i;
    if (index < 0 && n < KEYS_MAX) {
        keys[n] = copy;
        struct pb count = {NULL, 0};
        encode_resource(&count, keys, n + 1);
        if (CTX_HEADER + count.len <= CTX_MAP_SIZE) {
            atomic_store_explicit(&nkeys, n + 1, memory_order_release);
            index = (int)n;
            copy = NULL;
            publish_context();
        }
    }
    pthread_mutex_unlock(&ctx_lock);
    free(copy);
    return index;
}

/* ---- Records --------------------------------------------------------- */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Parses exactly 2n lowercase hex digits into n bytes; 0 when well formed
 * and not all zero (W3C's "invalid" id). */
static int parse_hex(const char *s, uint8_t *out, size_t n)
{
    if (!s || strlen(s) != 2 * n)
        return -1;
    uint8_t any = 0;
    for (size_t i = 0; i < n; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
        any |= out[i];
    }
    return any ? 0 : -1;
}

static const char *value_of(const cpprof_labelset *set, const char *key)
{
    const char *v;
    bool found;
    cpprof_label(set, key, &v, &found);
    return found ? v : NULL;
}

/* Fills the record's trace fields from the set's trace labels; returns
 * whether it did (the labels then stay out of attrs-data). */
static bool take_trace(struct otel_record *r, const cpprof_labelset *set)
{
    if (parse_hex(value_of(set, "trace_id"), r->trace_id, 16) ||
        parse_hex(value_of(set, "span_id"), r->span_id, 8)) {
        memset(r->trace_id, 0, sizeof r->trace_id);
        memset(r->span_id, 0, sizeof r->span_id);
        return false;
    }
    const char *flags = value_of(set, "trace_flags");
    uint8_t f = 0;
    if (flags && strlen(flags) == 2 && hex_digit(flags[0]) >= 0 &&
        hex_digit(flags[1]) >= 0)
        f = (uint8_t)(hex_digit(flags[0]) << 4 | hex_digit(flags[1]));
    r->trace_flags = f;
    return true;
}

static bool is_trace_key(const char *key)
{
    return !strcmp(key, "trace_id") || !strcmp(key, "span_id") ||
           !strcmp(key, "trace_flags");
}

/* At most `room` bytes of `s` (length len), not ending inside a UTF-8
 * sequence. */
static size_t utf8_cut(const char *s, size_t len, size_t room)
{
    if (len <= room)
        return len;
    size_t n = room;
    while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
        n--;
    return n;
}

static void add_attribute(struct otel_record *r, const char *key,
                          const char *value)
{
    size_t at = r->attrs_data_size, room = sizeof r->attrs_data - at;
    if (room < 3)
        return;
    size_t len = utf8_cut(value, strlen(value),
                          room - 2 < VALUE_MAX ? room - 2 : VALUE_MAX);
    if (len == 0 && *value)
        return;
    int index = key_index(key);
    if (index < 0)
        return;
    r->attrs_data[at] = (uint8_t)index;
    r->attrs_data[at + 1] = (uint8_t)len;
    memcpy(&r->attrs_data[at + 2], value, len);
    r->attrs_data_size = (uint16_t)(at + 2 + len);
}

static struct published *build(const cpprof_labelset *set)
{
    size_t n = cpprof_labelset_size(set);
    struct published *p =
        calloc(1, sizeof *p + n * sizeof(custom_labels_label_t));
    if (!p)
        return NULL;
    bool traced = take_trace(&p->record, set);
    for (size_t i = 0; i < n; i++) {
        const char *k = labelset_key(set, i), *v = labelset_value(set, i);
        if (!(traced && is_trace_key(k)))
            add_attribute(&p->record, k, v);
        p->storage[i] = (custom_labels_label_t){
            {strlen(k), (const unsigned char *)k},
            {strlen(v), (const unsigned char *)v}};
    }
    p->record.valid = 1;
    p->labels = (custom_labels_labelset_t){p->storage, n, n};
    return p;
}

/* The set's record on its first publication: built here, out of the
 * applying path's way. */
__attribute__((noinline, cold)) static const struct published *
first_publication(const cpprof_labelset *set)
{
    struct published *mine = build(set);
    if (!mine)
        return NULL;
    struct published *p = labelset_attach_published(set, mine);
    if (p != mine)
        free(mine);
    return p;
}

/* label_hooks.record_freed: the record published for a set the label
 * core reclaims (NULL: it has none). */
static void record_free(void *record)
{
    free(record);
}

/* label_hooks.set_current: points the calling thread's published pointers
 * at `set`'s record (built on the set's first publication), or clears
 * them for NULL. */
static void publish(const cpprof_labelset *set)
{
    const struct published *p = NULL;
    if (set && !(p = labelset_published(set)))
        p = first_publication(set);
    /* The record is complete before either pointer can reach it. */
    atomic_signal_fence(memory_order_seq_cst);
    record_slot = p ? &p->record : NULL;
    labels_slot = p ? &p->labels : NULL;
    atomic_signal_fence(memory_order_seq_cst);
}

/* ---- Public API --------------------------------------------------------- */

static void take_service_name(void)
{
    const char *name = cfg_str(CFG_SERVICE_NAME);
    if (name && *name)
        snprintf(service_name, sizeof service_name, "%s", name);
    else
        snprintf(service_name, sizeof service_name, "unknown_service:%s",
                 program_invocation_short_name);
}

int cpprof_otel_context_enable(void)
{
    pthread_mutex_lock(&ctx_lock);
    take_service_name();
    int rc = publish_context();
    pthread_mutex_unlock(&ctx_lock);
    if (rc)
        return rc;
    otel_resolve_descriptors();
    atomic_store(&otel_enabled, true);
    atomic_store(&label_hooks.record_freed, record_free);
    atomic_store(&label_hooks.set_current, publish);
    publish(thread_current_labels());
    return 0;
}

static void put_hex(char *out, const uint8_t *b, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * n] = '\0';
}

int cpprof_labels_with_trace(cpprof_labelset **out,
                             const cpprof_labelset *parent,
                             const uint8_t trace_id[16],
                             const uint8_t span_id[8], uint8_t trace_flags)
{
    if (!out || !trace_id || !span_id)
        return -EINVAL;
    char trace[33], span[17], flags[3];
    put_hex(trace, trace_id, 16);
    put_hex(span, span_id, 8);
    put_hex(flags, &trace_flags, 1);
    const char *kv[] = {"trace_id", trace, "span_id", span, "trace_flags",
                        flags};
    return cpprof_labels_with(out, parent, 6, kv);
}

/* ---- Load time and fork --------------------------------------------------- */

static void atfork_prepare(void) { pthread_mutex_lock(&ctx_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&ctx_lock); }

/* MADV_DONTFORK left the child without the mapping; it is a process of its
 * own (another pid), so it publishes its own context. */
ATFORK_CHILD static void atfork_child(void)
{
    atfork_mutex_release(&ctx_lock);
    if (ctx_map) /* NULL unless published: then not written (atfork.h) */
        ctx_map = NULL;
    if (atomic_load(&otel_enabled))
        publish_context();
}

__attribute__((constructor(102))) static void otel_load(void)
{
    static const atfork_handlers on_fork = {atfork_prepare, atfork_parent,
                                            atfork_child};
    atfork_add(ATFORK_OTEL, &on_fork);
    cfg_freeze(CFG_OTEL_CONTEXT);
    if (cfg_int(CFG_OTEL_CONTEXT))
        cpprof_otel_context_enable();
}
