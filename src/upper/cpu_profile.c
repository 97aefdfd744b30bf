/*
 * cpu_profile.c -- cpprof_cpu_profile_start/stop: the CPU profile as Go's
 * runtime/pprof writes it, from what the sampler collected.
 *
 * The profile has the sample types samples/count and cpu/nanoseconds, the
 * period cpu/nanoseconds at the sampler's true period, the window's start
 * (wall clock) and length, one sample per (stack, label set), a comment
 * (pprof -comments) saying what share of the program's CPU, cpprof's
 * threads left out, carried no label, and, when the
 * sampler's buffer overflowed, one "cpprof.lostProfileEvent" sample holding
 * what was dropped (Go's runtime/pprof.lostProfileEvent): never silent.
 * CPU time the sampler could not sample (threads that block the signal,
 * threads past the queued-signal budget, a program that took the signal
 * over) comes as one sample per reason under a pseudo-frame naming it and
 * the number of threads, weighted with that CPU time, so a profile of xz's
 * signal-blocking workers shows where the CPU went instead of looking
 * idle; the last profile's figures are also kept for the index page.
 * Building happens after the sampler has stopped, so a new profile can start
 * while this one is symbolized and encoded.  The mappings' generation is
 * pinned from the start until the profile is built (unwind.h,
 * "Generations"), so that samples in a plugin dlclosed meanwhile are
 * shown in that plugin, never in whatever was loaded at its address.
 */
#include "own.h"
#include "atfork.h"
#include "builder.h"
#include "config.h"
#include "cpprof.h"
#include "sampler.h"
#include "stacktab.h"
#include "symbolize_profile.h"
#include "thread.h" /* PPROF_INTERNAL_KEY */
#include "unwind.h"
#include "util.h"
#include "warn.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t window_mu = PTHREAD_MUTEX_INITIALIZER;
static long window_hz;          /* under window_mu, while a profile runs */
static int64_t window_start_ns; /* CLOCK_REALTIME */
static int64_t window_start_mono_ns;
static uint64_t window_gen; /* pinned from start until the build */
static sampler_unsampled last_unsampled[SAMPLER_NREASONS]; /* window_mu */

/* fork(): window_mu is held across it, so the child can start profiles. */
static void window_lock(void) { pthread_mutex_lock(&window_mu); }
static void window_unlock(void) { pthread_mutex_unlock(&window_mu); }

/* Stderr, once: CPU profiles are declined while the program handles the
 * profiling signal itself (Debian's sort does, to remove its temporary
 * files). */
static void say_signal_taken(int signo)
{
    static atomic_bool said;
    if (!atomic_exchange(&said, true))
        warn_stderr("cpprof: CPU profiles are declined: the program has its "
                    "own handler for signal %d; set CPPROF_CPU_SIGNAL to a "
                    "signal it leaves alone\n",
                    signo);
}

int cpprof_cpu_profile_start(void)
{
    static const atfork_handlers on_fork = {window_lock, window_unlock,
                                            window_unlock};
    atfork_add(ATFORK_CPU_PROFILE, &on_fork);
    long hz = cfg_int(CFG_CPU_HZ);
    pthread_mutex_lock(&window_mu);
    own_work_enter(); /* the collector thread is cpprof's own */
    uint64_t gen = unwind_pin_generation();
    int rc = sampler_start(hz, (int)cfg_int(CFG_CPU_SIGNAL));
    if (rc == CPPROF_ESIGTAKEN)
        say_signal_taken((int)cfg_int(CFG_CPU_SIGNAL));
    if (rc != 0)
        unwind_unpin_generation(gen);
    own_work_leave();
    if (rc == 0) {
        window_gen = gen;
        window_hz = hz;
        window_start_ns = clock_ns(CLOCK_REALTIME);
        window_start_mono_ns = clock_ns(CLOCK_MONOTONIC);
    }
    pthread_mutex_unlock(&window_mu);
    return rc;
}

/* One pseudo-sample per reason some CPU time went unsampled. */
static int add_unsampled(builder *b, const sampler_unsampled *u,
                         int64_t period)
{
    int rc = 0;
    for (int why = 0; rc == 0 && why < SAMPLER_NREASONS; why++) {
        if (!u[why].threads)
            continue;
        char frame[96];
        snprintf(frame, sizeof frame, "%s (%ld thread%s)",
                 sampler_reason_frame(why), u[why].threads,
                 u[why].threads == 1 ? "" : "s");
        int64_t values[2] = {u[why].cpu_ns / period, u[why].cpu_ns};
        rc = builder_add_pseudo_sample(b, frame, values);
    }
    return rc;
}

/* The CPU (ns) of a profile's samples: all of it, cpprof's own threads'
 * (pprof_internal) and the program's that carried no label. */
struct label_cover {
    int64_t all, own, bare;
};

static void cover_entry(const uintptr_t *pcs, size_t depth, unsigned flags,
                        uint64_t gen, const cpprof_labelset *labels,
                        const int64_t *values, void *arg)
{
    (void)pcs, (void)depth, (void)flags, (void)gen;
    struct label_cover *c = arg;
    const char *role;
    bool own = false;
    c->all += values[1];
    if (cpprof_labelset_size(labels) == 0)
        c->bare += values[1];
    else if (cpprof_label(labels, PPROF_INTERNAL_KEY, &role, &own) == 0 && own)
        c->own += values[1];
}

/* A comment that says what share of the program's CPU (cpprof's threads
 * left out) carried no label: a profile whose labels cover half the
 * program says so, instead of letting the labelled half pass for all. */
static int add_unlabelled_comment(builder *b, const stacktab *samples)
{
    struct label_cover c = {0, 0, 0};
    stacktab_foreach(samples, cover_entry, &c);
    if (c.all - c.own <= 0)
        return 0;
    char text[160];
    snprintf(text, sizeof text,
             "%.1f%% of the program's CPU carried no label (cpprof's own "
             "threads, pprof_internal, not counted)",
             100.0 * (double)c.bare / (double)(c.all - c.own));
    return builder_add_comment(b, text);
}

static int build_profile(const sampler_result *r, long hz,
                         int64_t start_ns, int64_t duration_ns,
                         unsigned char **buf, size_t *len)
{
    builder *b = builder_new();
    if (!b)
        return -ENOMEM;
    int64_t period = sampler_period_ns(hz);
    int rc = builder_add_sample_type(b, "samples", "count");
    if (rc == 0)
        rc = builder_add_sample_type(b, "cpu", "nanoseconds");
    if (rc == 0)
        rc = builder_set_period(b, "cpu", "nanoseconds", period);
    builder_set_time(b, start_ns, duration_ns);
    if (rc == 0)
        rc = builder_add_stacktab(b, r->samples);
    if (rc == 0)
        rc = add_unlabelled_comment(b, r->samples);
    if (rc == 0 && r->lost > 0) {
        int64_t values[2] = {r->lost, r->lost * period};
        rc = builder_add_pseudo_sample(b, "cpprof.lostProfileEvent", values);
    }
    if (rc == 0)
        rc = add_unsampled(b, r->unsampled, period);
    if (rc == 0)
        rc = symbolize_and_encode(b, buf, len);
    builder_free(b);
    return rc;
}

/* The running window, stopped: its samples and what building them needs. */
struct window {
    sampler_result r;
    long hz;
    int64_t start_ns, duration_ns;
    uint64_t gen;
};

static int stop_window(struct window *w)
{
    pthread_mutex_lock(&window_mu);
    int rc = sampler_stop(&w->r);
    w->hz = window_hz;
    w->start_ns = window_start_ns;
    w->duration_ns = clock_ns(CLOCK_MONOTONIC) - window_start_mono_ns;
    w->gen = window_gen;
    if (rc == 0)
        memcpy(last_unsampled, w->r.unsampled, sizeof last_unsampled);
    pthread_mutex_unlock(&window_mu);
    return rc;
}

/* With own_work set: what the window kept goes. */
static void release_window(struct window *w)
{
    stacktab_free(w->r.samples);
    unwind_unpin_generation(w->gen);
}

int cpprof_cpu_profile_stop(unsigned char **buf, size_t *len)
{
    if (!buf || !len)
        return -EINVAL;
    struct window w;
    int rc = stop_window(&w);
    if (rc != 0)
        return rc;
    own_work_enter();
    rc = build_profile(&w.r, w.hz, w.start_ns, w.duration_ns, buf, len);
    release_window(&w);
    own_work_leave();
    return rc;
}

int cpu_profile_discard(void)
{
    struct window w;
    int rc = stop_window(&w);
    if (rc != 0)
        return rc;
    own_work_enter();
    release_window(&w);
    own_work_leave();
    return 0;
}

void cpu_profile_last_unsampled(sampler_unsampled out[SAMPLER_NREASONS])
{
    pthread_mutex_lock(&window_mu);
    memcpy(out, last_unsampled, sizeof last_unsampled);
    pthread_mutex_unlock(&window_mu);
}
