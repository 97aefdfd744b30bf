/*
 * census_crew.c -- helper threads that share a large census's reading of
 * threads from outside with the thread taking it.
 *
 * Why: the first census of a thread blocked in the kernel costs a handful
 * of system calls on /proc (its CPU clock twice, its syscall file opened,
 * read and closed, its stack copied): about 16 us, nearly all of it in
 * the kernel, and the same again for every other thread
 * (bench/census_floor).  One thread reading 1,000 of them takes 15-20 ms
 * however lean the reading; the threads are independent of one another,
 * so on a machine with more than one CPU the reading is shared and the
 * census's wall time shrinks by the number of readers.  Its CPU time does
 * not grow: the same calls, on more CPUs at once.
 *
 * Shape: the helpers are started on the first run that has enough items
 * to repay waking them (CREW_MIN_ITEMS), one fewer than the CPUs the
 * process may run on, at most CREW_MAX_HELPERS, and then sleep on a futex
 * for the next run.  A run is published as the job, and `seq` bumped;
 * every reader, the caller included, claims CREW_CHUNK items at a time
 * from the run's counter until none is left.  The items may still be
 * being listed when the helpers start (the census lists /proc/self/task,
 * a tenth of its work, while they read the first threads listed): a claim
 * beyond the listing waits for it.  A helper counts itself in `working`
 * before it looks at the job, and the caller, once its own share is done,
 * unpublishes the job and waits for `working` to drain: a helper that
 * wakes after that finds no job, and none can touch the run (on the
 * caller's stack) once the caller returns.  The futex, not a condition
 * variable: pthread_cond_wait is interposed by the block profiler, and a
 * helper's idle wait is not the program's.
 *
 * The helpers are cpprof's own threads (thread.c): started inside
 * own_work, so threadcreate does not count them and heap.c keeps
 * what they allocate out of the program's profiles, named "cpprof-census"
 * and labelled pprof_internal=census, so that a census or CPU profile
 * names them and -tagignore leaves them out.  After fork() the child has
 * none of them (census.c's fork handler, which holds the census lock
 * across fork, so that no run is under way: census_crew_after_fork); its
 * first large run starts its own.
 */
#define _GNU_SOURCE
#include "census_crew.h"
#include "own.h"
#include "thread.h"
#include "util.h"
#include "upper_calls.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* Fewer items than this are read by the caller alone: waking a helper
 * costs tens of microseconds, a few threads' reading. */
#define CREW_MIN_ITEMS 128
#define CREW_MAX_HELPERS 3
/* Items claimed at a time: few enough that the readers finish together,
 * many enough that the counter is not contended. */
#define CREW_CHUNK 8
/* Longest wait for a helper just started to be ready. */
#define HELPER_START_NS 1000000000L

static struct {
    atomic_uint helpers; /* started: threads[0..helpers) */
    pthread_t threads[CREW_MAX_HELPERS];
    atomic_int tids[CREW_MAX_HELPERS]; /* each helper's, once it runs */
    unsigned start_seq; /* seq before the newest helpers were started */
    atomic_uint seq; /* bumped per run: the helpers' futex word */
    _Atomic(struct census_crew_run *) job;
    atomic_uint working; /* helpers inside a run: the caller's futex word */
} crew;

/* Claims and handles items of the run until none is left.  A claim past
 * what is listed waits for the listing (only a helper ever does: the
 * caller takes its share once the run is closed). */
static void take_share(struct census_crew_run *run, bool on_caller)
{
    for (;;) {
        size_t from = atomic_fetch_add(&run->next, CREW_CHUNK);
        size_t to = from + CREW_CHUNK;
        for (;;) {
            size_t listed = atomic_load(&run->listed);
            if (listed >= to)
                break;
            if (atomic_load(&run->closed)) {
                listed = atomic_load(&run->listed);
                to = to < listed ? to : listed;
                break;
            }
            sched_yield(); /* the next batch is a fraction of a ms away */
        }
        if (from >= to)
            return;
        for (size_t i = from; i < to; i++)
            run->fn(run->arg, i, on_caller);
    }
}

static void *crew_helper_main(void *arg)
{
    /* The seq from before it was started: a run published since is one
     * to join.  (Read before the tid is published: the starter may start
     * the next helper once it sees it.) */
    unsigned seen = crew.start_seq;
    pthread_setname_np(pthread_self(), "cpprof-census");
    thread_label_internal("census"); /* unlabelled if out of memory */
    atomic_int *tid = &crew.tids[(uintptr_t)arg];
    atomic_store(tid, gettid()); /* named and labelled: it may be listed */
    futex_wake(tid, 1);
    for (;;) {
        futex_wait(&crew.seq, seen, NULL);
        unsigned now = atomic_load(&crew.seq);
        if (now == seen)
            continue; /* woken for nothing */
        seen = now;
        atomic_fetch_add(&crew.working, 1);
        struct census_crew_run *run = atomic_load(&crew.job);
        if (run)
            take_share(run, false);
        if (atomic_fetch_sub(&crew.working, 1) == 1)
            futex_wake(&crew.working, INT_MAX);
    }
    return NULL;
}

static unsigned cpus_allowed(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? (unsigned)n : 1;
}

/* Waits (at most HELPER_START_NS) until helper i has named and labelled
 * itself, so that the census it was started for lists it as the
 * profiler's.  On a machine too busy to run it by then, the census goes
 * on without it: it joins the next run. */
static void wait_started(unsigned i)
{
    int64_t end = clock_mono_ns() + HELPER_START_NS;
    while (atomic_load(&crew.tids[i]) == 0) {
        int64_t left = end - clock_mono_ns();
        if (left <= 0)
            return;
        struct timespec wait = {left / 1000000000, left % 1000000000};
        futex_wait(&crew.tids[i], 0, &wait);
    }
}

/* Starts the helpers there should be; a failure leaves fewer.  The CPUs
 * are counted once: a process moved to fewer CPUs keeps its helpers
 * asleep, which costs nothing. */
static void start_helpers(void)
{
    static unsigned readers; /* the caller and its helpers */
    if (readers == 0) {
        unsigned cpus = cpus_allowed();
        readers = cpus > CREW_MAX_HELPERS ? CREW_MAX_HELPERS + 1 : cpus;
    }
    own_work_enter(); /* the helpers are cpprof's own */
    crew.start_seq = atomic_load(&crew.seq);
    unsigned n = atomic_load(&crew.helpers);
    while (n + 1 < readers &&
           pthread_create(&crew.threads[n], NULL, crew_helper_main,
                          (void *)(uintptr_t)n) == 0) {
        wait_started(n);
        atomic_store(&crew.helpers, ++n);
    }
    own_work_leave();
}

void census_crew_begin(struct census_crew_run *run, size_t first,
                       size_t expected, census_crew_fn *fn, void *arg)
{
    *run = (struct census_crew_run){.fn = fn, .arg = arg};
    atomic_store(&run->next, first);
    atomic_store(&run->listed, first);
    if (expected >= CREW_MIN_ITEMS)
        start_helpers();
    run->shared = expected >= CREW_MIN_ITEMS && atomic_load(&crew.helpers) > 0;
    if (!run->shared)
        return;
    atomic_store(&crew.job, run);
    atomic_fetch_add(&crew.seq, 1);
    futex_wake(&crew.seq, INT_MAX);
}

void census_crew_offer(struct census_crew_run *run, size_t listed)
{
    atomic_store(&run->listed, listed);
}

void census_crew_close(struct census_crew_run *run, size_t n)
{
    atomic_store(&run->listed, n);
    atomic_store(&run->closed, true);
}

void census_crew_finish(struct census_crew_run *run, bool on_caller)
{
    take_share(run, on_caller);
    if (!run->shared)
        return;
    atomic_store(&crew.job, NULL);
    unsigned w;
    while ((w = atomic_load(&crew.working)) != 0)
        futex_wait(&crew.working, w, NULL);
}

void census_crew_run(size_t first, size_t n, census_crew_fn *fn, void *arg)
{
    struct census_crew_run run;
    census_crew_begin(&run, first, n > first ? n - first : 0, fn, arg);
    census_crew_close(&run, n);
    census_crew_finish(&run, true);
}

bool census_crew_is_helper(pid_t tid)
{
    unsigned n = atomic_load(&crew.helpers);
    for (unsigned i = 0; i < n; i++)
        if (atomic_load(&crew.tids[i]) == tid)
            return true;
    return false;
}

void census_crew_after_fork(void)
{
    for (unsigned i = 0; i < CREW_MAX_HELPERS; i++)
        atomic_store(&crew.tids[i], 0);
    atomic_store(&crew.helpers, 0);
    atomic_store(&crew.working, 0);
    atomic_store(&crew.job, NULL);
}

int64_t census_crew_cpu_ns(unsigned *helpers)
{
    int64_t ns = 0;
    unsigned n = atomic_load(&crew.helpers);
    for (unsigned i = 0; i < n; i++) {
        clockid_t clock;
        struct timespec t;
        if (pthread_getcpuclockid(crew.threads[i], &clock) == 0 &&
            clock_gettime(clock, &t) == 0)
            ns += (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
    }
    if (helpers)
        *helpers = n;
    return ns;
}

/* Called by the upper layers (upper_calls.h). */
UPPER_CALLS(census_crew_cpu_ns);
