/*
 * jobrunner -- the seed's multi-tenant background job runner, labelled.
 *
 * A producer fills a queue with jobs for three tenants (acme, globex,
 * initech) of two kinds (reindex, export); worker threads run each job
 * inside cpprof_do() with the labels tenant and kind.  A job's CPU cost is
 * 1, 2 or 5 units by tenant on average, so the tenants' true CPU shares
 * are 1:2:5 (12.5%, 25%, 62.5%).  Each job's work varies at random between
 * half and one and a half times its tenant's mean, as real jobs do: a
 * perfectly periodic mix can alias with the kernel's tick, at which it
 * checks thread CPU timers (CONFIG_HZ), and then every sample lands at the
 * same phase of the mix -- a property of the synthetic workload, not of
 * the work it stands for.  Each worker measures the truth with its thread CPU
 * clock around every job; at exit the program prints it, so tests and
 * benchmarks can compare a profile's attribution against it:
 *
 *   tenant acme cpu_seconds 1.234 share 0.1250
 *   jobs 1234
 *   jobs_per_second 123.4
 *
 * Each job also allocates (and frees) a scratch buffer of 4096 bytes per
 * cost unit and counts itself with cpprof_counter_add("jobs", 1), so
 * per-label-set accounting (CPPROF_ACCOUNTING=1) has an exact truth too:
 *
 *   tenant acme alloc_bytes 4096000 jobs 1000
 *
 * With --hold the program keeps serving after printing its truth, until
 * SIGINT or SIGTERM, so a test can read the final counters.
 *
 * With --addr it serves /debug/pprof/ there while it runs.  With --park N,
 * N more threads hold a tenant's labels (tenant by turn, kind "wait") while
 * blocked until the end, as work waiting on I/O would: what the thread
 * census (/debug/pprof/goroutine) shows and the CPU profile does not.
 * With --park-after S they sleep unlabelled for S seconds first, so a
 * goroutine delta (?seconds=N) across that moment has something to show.
 * With --park-note TEXT they also carry the label note=TEXT: a value such
 * as "<script>...", which every view must show as text.  With
 * --park-tasks N, N tasks per tenant (docs/tasks.md) wait in a queue from
 * the start, parked with the reason "queue" in queue_job: queued work that
 * has no thread, which the census lists as tasks.
 *
 * With --tasks every job is a task (docs/tasks.md), as in a service whose
 * work waits on I/O without holding a thread: a worker runs the job's first
 * half, parks it on simulated I/O (await_io, reason "io") for 10-90 ms, and
 * whichever worker is free when the I/O completes runs the rest.  The
 * job's labels go with it from thread to thread, and the census lists the
 * parked jobs by tenant.  The truth adds, per tenant, how many of its jobs
 * were parked on I/O on average (from leave until a worker enters the task
 * again, as the census sees them; sampled every 5 ms) and how many moved
 * threads:
 *
 *   tenant acme parked_tasks_mean 12.3 moved 456
 *
 * With --rate N the producer offers N jobs a second, as the requests of a
 * service below its capacity arrive, and workers wait for work between
 * them; without it the queue is always full and every worker busy.  A
 * test that needs the server and labelled work but not every core (the
 * others run beside it) takes a rate.
 *
 * With --job-log FILE every job (in --tasks, every part of a job run in
 * its task) appends "TENANT START_NS END_NS TID" to FILE, on
 * CLOCK_MONOTONIC, the clock of cpprof's traces: the truth a trace's
 * label spans are held to over any window.  Each job's work is a trace region named after its
 * kind (cpprof_trace_region_begin), which a trace draws under the span.
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { NTENANTS = 3, NKINDS = 2, QUEUE_LEN = 64, MAX_WORKERS = 256 };

static const char *const tenants[NTENANTS] = {"acme", "globex", "initech"};
static const int tenant_cost[NTENANTS] = {1, 2, 5};
static const char *const kinds[NKINDS] = {"reindex", "export"};

/* Iterations of decode_block() in one cost unit (about a millisecond). */
static const unsigned unit_iterations = 40;

struct job {
    int tenant, kind;
    unsigned iterations; /* of decode_block() */
    cpprof_task task;    /* --tasks: the job's task, else id 0 */
    int started;         /* --tasks: its first half has run */
    pthread_t ran_on;    /* --tasks: the thread that ran its first half */
};

/* A bounded queue: the producer waits when it is full, workers when it is
 * empty; `closed` tells workers to finish. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t nonempty, nonfull;
    struct job jobs[QUEUE_LEN];
    size_t head, len;
    int closed;
} queue = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
           PTHREAD_COND_INITIALIZER, {{0}}, 0, 0, 0};

static cpprof_labelset *job_labels[NTENANTS][NKINDS];
static cpprof_labelset *wait_labels[NTENANTS];
static atomic_llong tenant_cpu_ns[NTENANTS];
static atomic_llong tenant_jobs[NTENANTS];
static atomic_llong jobs_done;
static int task_mode; /* --tasks */
static FILE *job_log;  /* --job-log */
static pthread_mutex_t job_log_mu = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t stop_requested;
static long rate; /* --rate: jobs a second, or 0 for as many as run */

static int64_t clock_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The decode-like inner loop every job spends its time in. */
__attribute__((noinline)) static uint32_t decode_block(uint32_t seed)
{
    uint8_t block[4096];
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = (uint8_t)(seed + i * 2654435761u);
    uint32_t h = seed;
    for (size_t i = 0; i < sizeof block; i++)
        h = (h ^ block[i]) * 16777619u;
    return h;
}

__attribute__((noinline)) static uint32_t reindex(unsigned iterations)
{
    uint32_t h = 1;
    for (unsigned i = 0; i < iterations; i++)
        h = decode_block(h);
    return h;
}

__attribute__((noinline)) static uint32_t export_rows(unsigned iterations)
{
    uint32_t h = 2;
    for (unsigned i = 0; i < iterations; i++)
        h = decode_block(h + i);
    return h;
}

/* Where results and the scratch buffer escape to, so no compiler drops the
 * work or the malloc.  Atomic, not volatile: every worker stores to them,
 * and concurrent volatile stores are a data race (ThreadSanitizer). */
static _Atomic uint32_t sink;
static void *_Atomic scratch_escape;

static size_t job_alloc_bytes(int tenant)
{
    return 4096 * (size_t)tenant_cost[tenant];
}

static uint32_t do_work(int kind, unsigned iterations)
{
    return kind == 0 ? reindex(iterations) : export_rows(iterations);
}

/* --job-log: tenant t's job ran (in its labels) from t0 to t1 on the
 * calling thread. */
static void log_job(int t, int64_t t0, int64_t t1)
{
    if (!job_log)
        return;
    pthread_mutex_lock(&job_log_mu);
    fprintf(job_log, "%s %lld %lld %d\n", tenants[t], (long long)t0,
            (long long)t1, (int)gettid());
    pthread_mutex_unlock(&job_log_mu);
}

static void run_job(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    const struct job *j = arg;
    cpprof_trace_region_begin(kinds[j->kind]);
    uint8_t *scratch = malloc(job_alloc_bytes(j->tenant));
    if (!scratch)
        abort();
    atomic_store_explicit(&scratch_escape, scratch, memory_order_relaxed);
    scratch[0] = (uint8_t)do_work(j->kind, j->iterations);
    atomic_store_explicit(&sink, scratch[0], memory_order_relaxed);
    free(scratch);
    cpprof_counter_add("jobs", 1);
    cpprof_trace_region_end(kinds[j->kind]);
}

static int queue_pop(struct job *out)
{
    pthread_mutex_lock(&queue.mu);
    while (!queue.len && !queue.closed)
        pthread_cond_wait(&queue.nonempty, &queue.mu);
    int ok = queue.len > 0;
    if (ok) {
        *out = queue.jobs[queue.head];
        queue.head = (queue.head + 1) % QUEUE_LEN;
        queue.len--;
        pthread_cond_signal(&queue.nonfull);
    }
    pthread_mutex_unlock(&queue.mu);
    return ok;
}

static void queue_push(struct job j)
{
    pthread_mutex_lock(&queue.mu);
    while (queue.len == QUEUE_LEN)
        pthread_cond_wait(&queue.nonfull, &queue.mu);
    queue.jobs[(queue.head + queue.len) % QUEUE_LEN] = j;
    queue.len++;
    pthread_cond_signal(&queue.nonempty);
    pthread_mutex_unlock(&queue.mu);
}

static void queue_close(void)
{
    pthread_mutex_lock(&queue.mu);
    queue.closed = 1;
    pthread_cond_broadcast(&queue.nonempty);
    pthread_mutex_unlock(&queue.mu);
}

/* The n-th job: tenants in turn, and work uniform in [mean/2, 3*mean/2]. */
static struct job next_job(unsigned n)
{
    static unsigned seed = 1;
    int tenant = (int)(n % NTENANTS);
    unsigned mean = (unsigned)tenant_cost[tenant] * unit_iterations;
    unsigned iterations = mean / 2 + (unsigned)rand_r(&seed) % (mean + 1);
    return (struct job){.tenant = tenant,
                        .kind = (int)(n / 3 % NKINDS),
                        .iterations = iterations};
}

static void run_job_part(struct job *j);

static void *worker(void *arg)
{
    (void)arg;
    struct job j;
    while (queue_pop(&j)) {
        if (j.task.id) {
            run_job_part(&j);
            continue;
        }
        int64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        int64_t began = clock_ns(CLOCK_MONOTONIC);
        int rc = cpprof_do(NULL, job_labels[j.tenant][j.kind], run_job, &j);
        log_job(j.tenant, began, clock_ns(CLOCK_MONOTONIC));
        if (rc) {
            fprintf(stderr, "jobrunner: cpprof_do: %s\n", cpprof_strerror(rc));
            exit(1);
        }
        atomic_fetch_add(&tenant_cpu_ns[j.tenant],
                         clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0);
        atomic_fetch_add(&jobs_done, 1);
        atomic_fetch_add(&tenant_jobs[j.tenant], 1);
    }
    return NULL;
}

/* --tasks: jobs parked on simulated I/O, in a list the I/O thread scans
 * every 5 ms for the ones whose I/O is done, and the counts of the truth. */
struct io_wait {
    struct job job;
    int64_t done_ns; /* CLOCK_MONOTONIC */
    struct io_wait *next;
};
static struct {
    pthread_mutex_t mu;
    struct io_wait *head;
    int stopping;
} io = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};
/* Jobs in flight at once: the producer waits for a slot, so that jobs back
 * from I/O are not outrun by new ones without bound. */
enum { TASKS_IN_FLIGHT = 256 };
static sem_t in_flight_slots;
static atomic_long tenant_parked_now[NTENANTS];
static long long tenant_parked_sum[NTENANTS], parked_samples;
static atomic_llong tenant_moved[NTENANTS];

static void die_on(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "jobrunner: %s: %s\n", what, cpprof_strerror(rc));
        exit(1);
    }
}

/* Where a job waits for its I/O: the stack its task parks with. */
static __attribute__((noinline)) void await_io(struct job *j, int64_t began)
{
    struct io_wait *w = malloc(sizeof *w);
    if (!w)
        abort();
    static _Thread_local unsigned seed;
    seed = seed ? seed : (unsigned)(uintptr_t)&seed;
    *w = (struct io_wait){*j, clock_ns(CLOCK_MONOTONIC) +
                                  (10 + rand_r(&seed) % 81) * 1000000LL,
                          NULL};
    atomic_fetch_add(&tenant_parked_now[j->tenant], 1);
    die_on(cpprof_task_leave(j->task, "io", 0), "cpprof_task_leave");
    log_job(j->tenant, began, clock_ns(CLOCK_MONOTONIC));
    pthread_mutex_lock(&io.mu);
    w->next = io.head;
    io.head = w;
    pthread_mutex_unlock(&io.mu);
}

/* One half of a --tasks job, in its task: the first ends parked on I/O,
 * the second ends the job and its task.  CPU is counted from enter to
 * leave, the task's own time on this thread. */
static void run_job_part(struct job *j)
{
    int64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    int64_t began = clock_ns(CLOCK_MONOTONIC);
    die_on(cpprof_task_enter(j->task), "cpprof_task_enter");
    if (!j->started) {
        j->started = 1;
        j->ran_on = pthread_self();
        atomic_store_explicit(&sink, do_work(j->kind, j->iterations / 2),
                              memory_order_relaxed);
        j->iterations -= j->iterations / 2;
        await_io(j, began);
        atomic_fetch_add(&tenant_cpu_ns[j->tenant],
                         clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0);
        return;
    }
    atomic_fetch_sub(&tenant_parked_now[j->tenant], 1);
    if (!pthread_equal(j->ran_on, pthread_self()))
        atomic_fetch_add(&tenant_moved[j->tenant], 1);
    run_job(j, NULL);
    die_on(cpprof_task_end(j->task), "cpprof_task_end");
    log_job(j->tenant, began, clock_ns(CLOCK_MONOTONIC));
    atomic_fetch_add(&tenant_cpu_ns[j->tenant],
                     clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0);
    atomic_fetch_add(&jobs_done, 1);
    atomic_fetch_add(&tenant_jobs[j->tenant], 1);
    sem_post(&in_flight_slots);
}

/* Takes the waits whose I/O is done off the list. */
static struct io_wait *io_take_done(int64_t now)
{
    struct io_wait *done = NULL, **p = &io.head;
    pthread_mutex_lock(&io.mu);
    while (*p) {
        struct io_wait *w = *p;
        if (w->done_ns <= now) {
            *p = w->next;
            w->next = done;
            done = w;
        } else {
            p = &w->next;
        }
    }
    pthread_mutex_unlock(&io.mu);
    return done;
}

/* The I/O thread: every 5 ms, the jobs whose I/O is done go back to the
 * queue for whichever worker is free, and the parked counts are sampled. */
static void *io_completer(void *arg)
{
    (void)arg;
    for (;;) {
        nanosleep(&(struct timespec){0, 5000000}, NULL);
        for (int t = 0; t < NTENANTS; t++)
            tenant_parked_sum[t] += atomic_load(&tenant_parked_now[t]);
        parked_samples++;
        for (struct io_wait *w = io_take_done(clock_ns(CLOCK_MONOTONIC)), *next;
             w; w = next) {
            next = w->next;
            queue_push(w->job);
            free(w);
        }
        pthread_mutex_lock(&io.mu);
        int stop = io.stopping && !io.head;
        pthread_mutex_unlock(&io.mu);
        if (stop)
            return NULL;
    }
}

/* --tasks: the n-th job, as a task with its labels. */
static struct job next_task_job(unsigned n)
{
    while (sem_wait(&in_flight_slots) != 0)
        ;
    struct job j = next_job(n);
    die_on(cpprof_task_create(&j.task, job_labels[j.tenant][j.kind]),
           "cpprof_task_create");
    return j;
}

/* --tasks: the producer is done; every job in flight ends (the I/O
 * thread still completing their waits) before the workers are told to
 * finish. */
static void drain_tasks(pthread_t completer)
{
    for (int i = 0; i < TASKS_IN_FLIGHT; i++)
        while (sem_wait(&in_flight_slots) != 0)
            ;
    pthread_mutex_lock(&io.mu);
    io.stopping = 1;
    pthread_mutex_unlock(&io.mu);
    pthread_join(completer, NULL);
}

/* --park: labelled threads blocked until the run ends. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t released;
    int done;
} park = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static void wait_for_release(void *arg, const cpprof_labelset *labels)
{
    (void)arg;
    (void)labels;
    pthread_mutex_lock(&park.mu);
    while (!park.done)
        pthread_cond_wait(&park.released, &park.mu);
    pthread_mutex_unlock(&park.mu);
}

static long park_after;       /* seconds */
static const char *park_note; /* --park-note, or NULL */

static void *parked(void *arg)
{
    long i = (long)(intptr_t)arg;
    struct timespec pause = {park_after, 0};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
        ;
    cpprof_do(NULL, wait_labels[i % NTENANTS], wait_for_release, NULL);
    return NULL;
}

/* --park-tasks: tasks queued, never run, ended at the end of the run. */
static cpprof_task *queued;
static long nqueued;

static __attribute__((noinline)) int queue_job(cpprof_task t)
{
    int rc = cpprof_task_enter(t);
    if (rc == 0)
        rc = cpprof_task_leave(t, "queue", 0);
    __asm__ volatile(""); /* not a tail call: the stack names this */
    return rc;
}

static int queue_tasks(long per_tenant)
{
    queued = calloc((size_t)(per_tenant * NTENANTS), sizeof *queued);
    if (!queued)
        return -ENOMEM;
    for (long i = 0; i < per_tenant * NTENANTS; i++) {
        const char *kv[] = {"tenant", tenants[i % NTENANTS], "kind", "queued"};
        cpprof_labelset *set;
        int rc = cpprof_labels(&set, 4, kv);
        if (rc == 0)
            rc = cpprof_task_create(&queued[nqueued], set);
        cpprof_labelset_release(set);
        if (rc == 0)
            rc = queue_job(queued[nqueued++]);
        if (rc)
            return rc;
    }
    return 0;
}

static void end_queued(void)
{
    for (long i = 0; i < nqueued; i++)
        cpprof_task_end(queued[i]);
    free(queued);
}

static void release_parked(void)
{
    pthread_mutex_lock(&park.mu);
    park.done = 1;
    pthread_cond_broadcast(&park.released);
    pthread_mutex_unlock(&park.mu);
}

static int build_labels(void)
{
    for (int t = 0; t < NTENANTS; t++)
        for (int k = 0; k < NKINDS; k++) {
            const char *kv[] = {"tenant", tenants[t], "kind", kinds[k]};
            int rc = cpprof_labels(&job_labels[t][k], 4, kv);
            if (rc)
                return rc;
        }
    for (int t = 0; t < NTENANTS; t++) {
        const char *kv[] = {"tenant", tenants[t], "kind", "wait", "note",
                            park_note};
        int rc = cpprof_labels(&wait_labels[t], park_note ? 6 : 4, kv);
        if (rc)
            return rc;
    }
    return 0;
}

static void print_truth(double wall_seconds)
{
    long long total = 0;
    for (int t = 0; t < NTENANTS; t++)
        total += atomic_load(&tenant_cpu_ns[t]);
    for (int t = 0; t < NTENANTS; t++) {
        long long ns = atomic_load(&tenant_cpu_ns[t]);
        printf("tenant %s cpu_seconds %.3f share %.4f\n", tenants[t],
               ns / 1e9, total ? (double)ns / total : 0.0);
    }
    for (int t = 0; t < NTENANTS; t++) {
        long long jobs = atomic_load(&tenant_jobs[t]);
        printf("tenant %s alloc_bytes %lld jobs %lld\n", tenants[t],
               jobs * (long long)job_alloc_bytes(t), jobs);
    }
    for (int t = 0; task_mode && t < NTENANTS; t++)
        printf("tenant %s parked_tasks_mean %.1f moved %lld\n", tenants[t],
               parked_samples ? (double)tenant_parked_sum[t] / parked_samples
                              : 0.0,
               (long long)atomic_load(&tenant_moved[t]));
    printf("jobs %lld\n", (long long)atomic_load(&jobs_done));
    printf("jobs_per_second %.1f\n", atomic_load(&jobs_done) / wall_seconds);
}

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: jobrunner [--workers N] [--for SECONDS] "
                    "[--addr HOST:PORT] [--park N] [--park-after S] "
                    "[--park-note TEXT] [--park-tasks N] [--tasks] [--hold] "
                    "[--job-log FILE] [--rate JOBS_PER_SECOND]\n");
    exit(2);
}

/* --rate: job N is due N/rate seconds after the start, so that a late
 * wake-up is made up by the next ones rather than lowering the rate. */
static void sleep_until(int64_t monotonic_ns)
{
    struct timespec due = {monotonic_ns / 1000000000,
                           monotonic_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) ==
               EINTR &&
           !stop_requested)
        ;
}

static long parse_count(const char *flag, const char *v, long max)
{
    char *end;
    errno = 0;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || errno || n < 1 || n > max) {
        fprintf(stderr, "jobrunner: %s needs an integer in 1..%ld\n", flag,
                max);
        exit(2);
    }
    return n;
}

int main(int argc, char **argv)
{
    long workers = 4, seconds = 10, nparked = 0, ntasks = 0;
    int hold = 0;
    const char *addr = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--workers"))
            workers = parse_count("--workers", v, MAX_WORKERS), i++;
        else if (!strcmp(argv[i], "--for"))
            seconds = parse_count("--for", v, 86400), i++;
        else if (!strcmp(argv[i], "--park"))
            nparked = parse_count("--park", v, MAX_WORKERS), i++;
        else if (!strcmp(argv[i], "--park-after"))
            park_after = parse_count("--park-after", v, 86400), i++;
        else if (!strcmp(argv[i], "--park-tasks"))
            ntasks = parse_count("--park-tasks", v, 100000), i++;
        else if (!strcmp(argv[i], "--park-note") && v)
            park_note = v, i++;
        else if (!strcmp(argv[i], "--hold"))
            hold = 1;
        else if (!strcmp(argv[i], "--job-log") && v) {
            if (!(job_log = fopen(v, "w"))) {
                perror(v);
                exit(2);
            }
            setvbuf(job_log, NULL, _IOLBF, 0); /* read while it runs */
            i++;
        }
        else if (!strcmp(argv[i], "--tasks"))
            task_mode = 1;
        else if (!strcmp(argv[i], "--rate"))
            rate = parse_count("--rate", v, 1000000), i++;
        else if (!strcmp(argv[i], "--addr") && v)
            addr = v, i++;
        else
            usage();
    }
    int rc = build_labels();
    if (!rc && ntasks)
        rc = queue_tasks(ntasks);
    if (!rc && addr)
        rc = cpprof_http_start(addr);
    if (rc) {
        fprintf(stderr, "jobrunner: %s\n", cpprof_strerror(rc));
        return 1;
    }
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);

    pthread_t threads[MAX_WORKERS], parked_threads[MAX_WORKERS], completer;
    if (task_mode && sem_init(&in_flight_slots, 0, TASKS_IN_FLIGHT) != 0)
        rc = -errno;
    if (task_mode && !rc)
        rc = cpprof_thread_create(&completer, NULL, io_completer, NULL);
    if (rc) {
        fprintf(stderr, "jobrunner: %s\n", cpprof_strerror(rc));
        return 1;
    }
    for (long i = 0; i < workers; i++)
        if ((rc = cpprof_thread_create(&threads[i], NULL, worker, NULL))) {
            fprintf(stderr, "jobrunner: %s\n", cpprof_strerror(rc));
            return 1;
        }
    for (long i = 0; i < nparked; i++)
        if ((rc = cpprof_thread_create(&parked_threads[i], NULL, parked,
                                       (void *)(intptr_t)i))) {
            fprintf(stderr, "jobrunner: %s\n", cpprof_strerror(rc));
            return 1;
        }
    /* Said once every thread exists, so that a test that waits for this
     * line sees them all (under qemu a census could otherwise come first
     * and a delta count the threads started since). */
    if (addr)
        printf("serving http://%s/debug/pprof/\n", addr);
    fflush(stdout);
    int64_t start = clock_ns(CLOCK_MONOTONIC);
    int64_t end = start + seconds * 1000000000LL;
    for (unsigned n = 0; !stop_requested && clock_ns(CLOCK_MONOTONIC) < end;
         n++) {
        if (rate)
            sleep_until(start + (int64_t)n * 1000000000 / rate);
        queue_push(task_mode ? next_task_job(n) : next_job(n));
    }
    if (task_mode)
        drain_tasks(completer);
    queue_close();
    for (long i = 0; i < workers; i++)
        pthread_join(threads[i], NULL);
    release_parked();
    for (long i = 0; i < nparked; i++)
        pthread_join(parked_threads[i], NULL);
    if (job_log)
        fflush(job_log);
    print_truth((clock_ns(CLOCK_MONOTONIC) - start) / 1e9);
    fflush(stdout);
    while (hold && !stop_requested)
        nanosleep(&(struct timespec){0, 50000000}, NULL);
    if (addr)
        cpprof_http_stop();
    end_queued();
    return 0;
}
