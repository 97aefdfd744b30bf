/*
 * sampler_int.h -- what the CPU sampler's files share, and no one else (as
 * unwind_int.h is the unwinder's): a session, with its ring of samples,
 * its put-off walks and its table of threads; where the handlers find
 * the running session; and the functions one part calls in another
 * (sampler.c's opening comment lists the parts).  The interface to the
 * rest of cpprof is sampler.h.
 */
#ifndef CPPROF_SAMPLER_INT_H
#define CPPROF_SAMPLER_INT_H

#include "sampler.h"
#include "thread.h"
#include "unwind.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define NSEC_PER_SEC 1000000000LL
#define RECHECK_NS 1000000000LL /* signal masks re-read this often */
/* Put-off walks in flight (1 MiB mapped, touched as used).  A buffer is
 * free again once the collector drains its sample, so a program that
 * loads plugins faster than the collector's ticks holds one a load; on a
 * loaded machine, whose collector runs late, 8 ran out (chains.sh's
 * plugin, loaded 40 times a second, with 8 busy threads on 2 cores: 2-4
 * samples in 70 kept their leaf alone), and so did 32 once in CI (24 of
 * 1,577 samples: its calls take 28 samples each at 1000 Hz, so a call
 * longer than average, with the collector waiting, filled them).  64 is
 * 64 ms of a thread's CPU at 1000 Hz, one bit each of a 64-bit mask. */
#define SNAPSHOTS 64

/* A put-off walk is done again once, by the collector or, when an object
 * is about to be unloaded, by the thread unloading it (sampler.h):
 * whichever moves it from READY to WALKING. */
enum { PUT_OFF_FREE, PUT_OFF_READY, PUT_OFF_WALKING, PUT_OFF_DONE };
struct put_off {
    atomic_int state;
    struct slot *slot; /* the sample's, set before READY */
};

struct slot {
    atomic_size_t seq; /* == position: free; position + 1: filled */
    unsigned depth, flags;
    uint64_t gen;   /* the mappings' generation the walk saw (unwind.h) */
    int64_t weight; /* expirations this sample stands for */
    int64_t when;   /* acct_clock_ticks(), for a trace being recorded */
    pid_t tid;
    const cpprof_labelset *labels; /* holds a reference */
    bool in_collector;             /* taken inside cpprof's collector work */
    int snapshot;                  /* index into session.snapshots, or -1 */
    uintptr_t pcs[STACK_MAX_FRAMES];
};

/* A thread of the process and its timer, or why it has none. */
struct thread_timer {
    pid_t tid;
    int why;          /* TIMED, NEW or a sampler_reason */
    unsigned counted; /* bit per reason the thread was counted under */
    timer_t timer;    /* when TIMED */
    int64_t cpu_mark; /* untimed: its CPU clock when last read; timed:
                         when it was given its timer */
    int64_t mask_cpu; /* its CPU clock when its signal mask was last read,
                         or, until then, when it was given its timer */
    /* Found by a listing and timed without a look at its signal mask: most
     * threads of a large process sleep, and what they block matters only
     * once they run, which a read of their CPU clock tells (recheck_timed).
     * The look could not be made at once anyway: glibc's pthread_create
     * starts every thread with all signals blocked until start_thread sets
     * its mask. */
    bool mask_unread;
    bool ran; /* timed, and ran by the last look at it (look_at_timed) */
    struct blocked_run blocked; /* timed: recheck_timed */
    /* A sample of its was drained since the last look at its mask: its
     * signal gets through, whatever a look finds it blocking. */
    bool sampled;
};

#define TIMED (-1)
#define NEW (-2) /* first seen, nothing decided yet */

struct session {
    int signo;
    int cookie;
    int64_t period;
    struct sigaction previous;

    struct slot *ring;
    size_t mask;
    atomic_size_t head; /* next position handlers claim */
    size_t tail;        /* next position the collector reads */
    atomic_llong lost;  /* weight of dropped samples */
    /* pprof_internal=collectors: what a sample taken while a collector
     * works on a program's thread (own_busy) is labelled with. */
    cpprof_labelset *collector_labels;
    /* Walks refused for want of stack (on_profiling_signal): their weight,
     * and the threads they were refused on (no_room_session). */
    atomic_llong no_room;
    atomic_long no_room_threads;
    /* Put-off walks (mmap'd: memory the program's allocator never sees);
     * bit i of snapshots_busy is set while a slot holds snapshot i, and
     * put_off[i] says who walks it again (finish_walk). */
    struct unwind_snapshot *snapshots;
    atomic_ullong snapshots_busy;
    _Static_assert(SNAPSHOTS == 64, "snapshots_busy has a bit each");
    struct put_off put_off[SNAPSHOTS];

    stacktab *samples;   /* the collector's, until stop */
    struct thread_timer *timers; /* every thread seen, sorted by tid */
    size_t ntimers;
    uint64_t rng;
    int64_t charged_ns;
    int64_t masks_checked_ns;
    int64_t scanned_ns;
    int64_t maps_read_ns;
    unsigned announced_since_scan;
    /* The look at every timed thread is made only when the process used
     * CPU the samples do not account for (cpu_unaccounted): the weight of
     * the samples drained so far; at the last look, the process's CPU and
     * what samples and charges accounted for; and how many timed threads
     * had run since the look before it. */
    int64_t drained;
    int64_t process_cpu_mark, accounted_mark;
    size_t movers;
    bool taken;   /* the program installed its own handler meanwhile */
    int refused;  /* timer_create's error other than a gone thread */
    sampler_unsampled unsampled[SAMPLER_NREASONS];

    pthread_t collector;
    atomic_int collector_tid; /* 0 until the collector runs */
    /* The collector sleeps on `nudge` (a futex word) between ticks; stop
     * and a handler that met code without a table (a dlopen since the
     * last refresh) bump it and wake it.  `tables_wanted` keeps that to
     * one wake per refresh, however many samples meet the new code. */
    atomic_uint nudge;
    atomic_bool tables_wanted;
    atomic_bool threads_announced; /* likewise: one wake per batch */
    atomic_bool drain_wanted;      /* the ring is a quarter fuller */
    atomic_bool signal_claimed;    /* the program sets the signal's action */
    atomic_bool stopping;
};

/* The running session, as handlers see it, and how many handlers (and
 * threads announcing themselves or unloading code) are inside it: a stop
 * clears the one and waits for the other to drop to zero (sampler.c,
 * "Shutdown"). */
extern _Atomic(struct session *) sampler_active;
extern atomic_long sampler_in_handler;

static inline struct timespec ns_to_timespec(int64_t ns)
{
    return (struct timespec){ns / NSEC_PER_SEC, ns % NSEC_PER_SEC};
}

/* sampler_signal.c: the handler, installed and put back. */

/* SIGNAL-SAFE */
void sampler_nudge_collector(struct session *s);
int sampler_install_handler(struct session *s);
void sampler_restore_handler(struct session *s);
bool sampler_handler_is_ours(int signo);

/* sampler_ring.c: the ring drained. */

void sampler_ring_drain(struct session *s);

/* sampler_timers.c: the threads and their timers. */

/* Clears the announcements (sampler_thread_started) an earlier session
 * left. */
void sampler_forget_announced(void);
int sampler_scan_threads(struct session *s);
void sampler_learn_announced(struct session *s);
void sampler_tend_threads(struct session *s);
void sampler_mark_accounted(struct session *s);
void sampler_make_untimed(struct session *s, struct thread_timer *t, int why);
void sampler_delete_timers(struct session *s);

#endif
