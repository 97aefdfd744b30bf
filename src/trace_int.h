/*
 * trace_int.h -- what the trace recorder's two halves share: the region of
 * chunks and the record format, written by trace.c (the hot paths, start
 * and stop) and read by trace_snapshot.c (a snapshot's copy and its
 * resolution into trace.h's plain data).
 */
#ifndef CPPROF_TRACE_INT_H
#define CPPROF_TRACE_INT_H

#include "labelhooks.h"
#include "trace.h"

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define CHUNK_BYTES 16384u

enum { CHUNK_FREE, CHUNK_OWNED, CHUNK_SEALED };

struct chunk_head {
    _Atomic uint32_t state;
    _Atomic uint32_t seq;  /* odd while being reset for reuse */
    _Atomic uint32_t used; /* bytes of complete records */
    _Atomic int64_t last_ts;
};

/* The label sets a chunk's REC_SETs copied, by serial, direct-mapped:
 * its writer's alone (a reader copies only `data`), emptied when the
 * chunk is taken. */
#define CHUNK_SETS 16u
struct chunk_set {
    uint64_t serial;
    uint32_t at; /* as rec.set_at */
};

struct chunk {
    struct chunk_head h;
    uint8_t data[CHUNK_BYTES - sizeof(struct chunk_head) -
                 CHUNK_SETS * sizeof(struct chunk_set)];
    struct chunk_set sets[CHUNK_SETS];
};

/* A record: this header, then `bytes - sizeof header` of payload (a text,
 * or a stack's PCs), 8-aligned.  Its time is in the cheap clock's ticks
 * (acct_clock_ticks: the cycle counter on x86-64, a clock_gettime there
 * costs three times as much), made nanoseconds when read. */
struct rec {
    int64_t ts;
    uint16_t kind;  /* a trace_kind, or REC_SET */
    uint16_t bytes;
    pid_t tid;
    uint32_t set_at; /* the record's labels: 1 + the offset in the chunk's
                        data of the REC_SET before it that holds them;
                        0: the empty set */
    uint32_t pairs;  /* REC_SET: the pairs its payload holds */
    uint64_t a; /* task (LABELS, TASK_*), wait ns << 1 | is_lock
                   (LOCK_WAIT), leaf exact (CPU_SAMPLE), the set's serial
                   (REC_SET) */
};

/* A label set's copy, which records after it in the same chunk name by
 * their set_at: the recorder holds no reference to a set, so the label
 * core's cap and reclaiming are the program's alone, and a chunk read
 * long after its sets were freed still names their labels.  Its payload:
 * key, value, key, value... each NUL-terminated and cut at
 * TRACE_LABEL_TEXT_MAX - 1 bytes (at a character's start), pairs past
 * TRACE_SET_MAX bytes left out; `a` is the set's serial
 * (labelset_serial), by which a reader knows copies of one set. */
#define REC_SET TRACE_NKINDS
#define TRACE_LABEL_TEXT_MAX 256u
#define TRACE_SET_MAX 2048u

/* The region: trace_n_chunks chunks, mapped at the first recording. */
extern struct chunk *trace_pool;
extern size_t trace_n_chunks;

/* Records dropped for want of room since load, and when the window
 * began. */
extern _Atomic int64_t trace_dropped_n;
extern int64_t trace_window_dropped;

/* A tick count and CLOCK_MONOTONIC read together when the region was
 * mapped: with a pair read at each snapshot, the ticks' rate. */
extern int64_t trace_anchor_ticks, trace_anchor_ns;

/* Reads the tick count and CLOCK_MONOTONIC at one moment. */
void trace_read_clocks(int64_t *ticks, int64_t *ns);

/* A record's time: the cheap clock's ticks. */
static inline int64_t trace_ticks_now(void)
{
    return (int64_t)acct_clock_ticks();
}

#endif
