/*
 * check_accounting.c -- per-label-set accounting in-process: allocations
 * counted exactly per set (at switches and at thread exit), CPU time
 * against the threads' own CPU clocks, the tick that keeps a thread that
 * never switches up to date, lock waits, user counters, reclaimed sets'
 * counts kept as retired, independence from CPU profiles, and both
 * endpoints: /metrics through a strict parser of the Prometheus text
 * format written here from its specification, /debug/pprof/accounting
 * through jansson.
 *
 * Check forks each test, so every test enables accounting in a fresh
 * process and sees only its own sets.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "accounting.h"
#include "cpprof.h"
#include "http.h"
#include "labels.h"

static void *volatile escape;

static cpprof_labelset *set_of(const char *k, const char *v)
{
    const char *kv[] = {k, v};
    cpprof_labelset *s;
    ck_assert_int_eq(cpprof_labels(&s, 2, kv), 0);
    return s;
}

static int64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void spin_cpu_ns(int64_t ns)
{
    int64_t end = thread_cpu_ns() + ns;
    while (thread_cpu_ns() < end)
        ;
}

static struct acct_counters *counters(const cpprof_labelset *s)
{
    return labelset_counters(s);
}

/* ---- Allocations ---------------------------------------------------------- */

static void allocate_known(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    size_t base = *(size_t *)arg;
    for (size_t i = 0; i < 100; i++) {
        escape = malloc(base + i);
        free(escape);
    }
    escape = calloc(3, base);
    escape = realloc(escape, 2 * base);
    free(escape);
}

START_TEST(allocations_are_exact_per_set)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    cpprof_labelset *a = set_of("tenant", "a"), *b = set_of("tenant", "b");
    size_t base_a = 1000, base_b = 3000;
    for (int round = 0; round < 5; round++) {
        ck_assert_int_eq(cpprof_do(NULL, a, allocate_known, &base_a), 0);
        ck_assert_int_eq(cpprof_do(NULL, b, allocate_known, &base_b), 0);
    }
    /* 100 mallocs of base..base+99, one calloc of 3 base, one realloc to
     * 2 base: 102 objects, 100 base + 4950 + 5 base bytes per round. */
    ck_assert_uint_eq(atomic_load(&counters(a)->alloc_objects), 5 * 102);
    ck_assert_uint_eq(atomic_load(&counters(a)->alloc_bytes),
                      5 * (105 * base_a + 4950));
    ck_assert_uint_eq(atomic_load(&counters(b)->alloc_objects), 5 * 102);
    ck_assert_uint_eq(atomic_load(&counters(b)->alloc_bytes),
                      5 * (105 * base_b + 4950));
    cpprof_labelset_release(a);
    cpprof_labelset_release(b);
}
END_TEST

static void *allocate_then_exit(void *arg)
{
    cpprof_set_thread_labels(arg);
    for (int i = 0; i < 10; i++) {
        escape = malloc(777);
        free(escape);
    }
    return NULL; /* no switch after the allocations: the exit flushes */
}

START_TEST(thread_exit_flushes)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    cpprof_labelset *a = set_of("tenant", "exiting");
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, allocate_then_exit, a), 0);
    pthread_join(t, NULL);
    ck_assert_uint_eq(atomic_load(&counters(a)->alloc_bytes), 7770);
    ck_assert_uint_eq(atomic_load(&counters(a)->alloc_objects), 10);
    cpprof_labelset_release(a);
}
END_TEST

/* A task's work on each thread that runs it: 10 blocks of 555 bytes.
 * Checked after the leave: an assertion allocates (Check reports where
 * it got to), which the task would be charged. */
static void *allocate_in_task(void *arg)
{
    cpprof_task task = *(cpprof_task *)arg;
    int entered = cpprof_task_enter(task);
    for (int i = 0; i < 10; i++) {
        escape = malloc(555);
        free(escape);
    }
    int left = cpprof_task_leave(task, "io", CPPROF_TASK_NO_STACK);
    ck_assert_int_eq(entered, 0);
    ck_assert_int_eq(left, 0);
    return NULL;
}

/* Accounting follows the work: a task run by two threads in turn charges
 * its set from both, and neither thread's own set. */
START_TEST(a_task_is_charged_on_every_thread)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    cpprof_labelset *t = set_of("tenant", "tasked");
    cpprof_labelset *own = set_of("tenant", "thread");
    cpprof_task task;
    ck_assert_int_eq(cpprof_task_create(&task, t), 0);
    for (int run = 0; run < 2; run++) {
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, allocate_in_task, &task), 0);
        pthread_join(th, NULL);
    }
    cpprof_set_thread_labels(own);
    allocate_in_task(&task);
    cpprof_set_thread_labels(NULL);
    ck_assert_int_eq(cpprof_task_end(task), 0);
    ck_assert_uint_eq(atomic_load(&counters(t)->alloc_bytes), 3 * 5550);
    ck_assert_uint_eq(atomic_load(&counters(t)->alloc_objects), 30);
    /* The main thread's own set has only Check's small blocks from the
     * assertions after the leave, none of the task's 555-byte ones. */
    ck_assert_uint_lt(atomic_load(&counters(own)->alloc_bytes), 555);
    cpprof_labelset_release(t);
    cpprof_labelset_release(own);
}
END_TEST

/* ---- CPU --------------------------------------------------------------- */

/* truth: the CPU each scope's function burned, measured inside it; outer:
 * the CPU of each whole cpprof_do call.  A set is charged the segment
 * between the two switches, which lies between the two: the truth leaves
 * out the function's own clock reads (a system call each), the outer
 * figure adds the apply and restore. */
struct spin {
    int64_t ns, truth, outer;
};

static void spin_in_scope(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    struct spin *s = arg;
    int64_t t0 = thread_cpu_ns();
    spin_cpu_ns(s->ns);
    s->truth += thread_cpu_ns() - t0;
}

/* cpprof_do(NULL, set, spin_in_scope, s), adding the call's CPU to
 * s->outer. */
static void do_spin(const cpprof_labelset *set, struct spin *s)
{
    int64_t t0 = thread_cpu_ns();
    cpprof_do(NULL, set, spin_in_scope, s);
    s->outer += thread_cpu_ns() - t0;
}

/* What set was charged lies within 5% of s's bracket, give or take
 * slack_ns. */
static void assert_bracketed(const cpprof_labelset *set, const struct spin *s,
                             double slack_ns)
{
    uint64_t got = atomic_load(&counters(set)->cpu_ns);
    ck_assert_msg(got >= 0.95 * (double)s->truth - slack_ns &&
                      got <= 1.05 * (double)s->outer + slack_ns,
                  "accounted %llu ns; the function burned %lld ns, the "
                  "whole calls %lld ns (slack %.0f ns)",
                  (unsigned long long)got, (long long)s->truth,
                  (long long)s->outer, slack_ns);
}

/* The calling thread's wall time less its CPU time since *mark (set by
 * the first call): how long it was off the CPU, for whatever reason --
 * preempted, its virtual CPU stolen by the hypervisor, stopped by a
 * tracer. */
static int64_t off_cpu_ns(int64_t mark[2])
{
    struct timespec w;
    clock_gettime(CLOCK_MONOTONIC, &w);
    int64_t wall = w.tv_sec * 1000000000LL + w.tv_nsec, cpu = thread_cpu_ns();
    if (!mark[0]) {
        mark[0] = wall, mark[1] = cpu;
        return 0;
    }
    return (wall - mark[0]) - (cpu - mark[1]);
}

/* Scopes of 20 us (estimated from the cycle counter) and of 2 ms (read
 * exactly), interleaved: both agree with the thread's CPU clock. */
START_TEST(cpu_short_and_long_scopes)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    cpprof_labelset *shorts = set_of("scope", "short");
    cpprof_labelset *longs = set_of("scope", "long");
    struct spin s = {.ns = 20000}, l = {.ns = 2000000};
    int64_t mark[2] = {0, 0};
    off_cpu_ns(mark);
    for (int i = 0; i < 100; i++) {
        for (int j = 0; j < 100; j++)
            do_spin(shorts, &s);
        do_spin(longs, &l);
    }
    /* A short segment is charged its wall time, and the thread's exact
     * total takes any excess over its CPU off the next exact charge, the
     * long set's: time off the CPU inside short segments moves between the
     * two sets, at most all of the loop's (CI, its VM's CPU stolen: 188 of
     * 200 ms left to one; strace stopping the thread at every tick: 157).
     * Their sum stays the thread's CPU. */
    double moved = (double)off_cpu_ns(mark);
    assert_bracketed(shorts, &s, moved);
    assert_bracketed(longs, &l, moved);
    struct spin both = {.truth = s.truth + l.truth, .outer = s.outer + l.outer};
    uint64_t sum = atomic_load(&counters(shorts)->cpu_ns) +
                   atomic_load(&counters(longs)->cpu_ns);
    ck_assert_msg(sum >= 0.95 * (double)both.truth &&
                      sum <= 1.05 * (double)both.outer,
                  "both sets: %llu ns; the functions burned %lld ns, the "
                  "whole calls %lld ns",
                  (unsigned long long)sum, (long long)both.truth,
                  (long long)both.outer);
    cpprof_labelset_release(shorts);
    cpprof_labelset_release(longs);
}
END_TEST

/* Short scopes charge a per-thread pending entry, not the set's counter
 * (accounting.h): a thread that ran many and then waits, neither exiting
 * nor switching again, is still seen by a reader at most two entries'
 * flush size short of its CPU. */
struct short_bursts {
    cpprof_labelset *set;
    struct spin spin;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int burned, done;
};

static void *burst_then_wait(void *arg)
{
    struct short_bursts *b = arg;
    for (int i = 0; i < 2000; i++)
        cpprof_do(NULL, b->set, spin_in_scope, &b->spin);
    pthread_mutex_lock(&b->mu);
    b->burned = 1;
    pthread_cond_broadcast(&b->cv);
    while (!b->done)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

START_TEST(pending_charges_reach_readers)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    struct short_bursts b = {.set = set_of("scope", "bursts"),
                             .spin = {.ns = 10000},
                             .mu = PTHREAD_MUTEX_INITIALIZER,
                             .cv = PTHREAD_COND_INITIALIZER};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, burst_then_wait, &b), 0);
    pthread_mutex_lock(&b.mu);
    while (!b.burned)
        pthread_cond_wait(&b.cv, &b.mu);
    uint64_t seen = atomic_load(&counters(b.set)->cpu_ns);
    b.done = 1;
    pthread_cond_broadcast(&b.cv);
    pthread_mutex_unlock(&b.mu);
    pthread_join(t, NULL);
    /* Its exit flushed the rest: 2000 scopes of 10 us (20 ms), of which
     * at most one flush size and one segment were still pending. */
    uint64_t final = atomic_load(&counters(b.set)->cpu_ns);
    ck_assert_msg(final - seen <= ACCT_PENDING_MAX_NS + 100000,
                  "seen %llu ns while the thread waited, %llu ns after it "
                  "exited", (unsigned long long)seen,
                  (unsigned long long)final);
    ck_assert_uint_ge(final, (uint64_t)b.spin.truth);
    cpprof_labelset_release(b.set);
}
END_TEST

/* A thread that keeps one set: the tick charges it while it runs, in
 * either accounting_cpu mode (the loop index).  The thread spins, holding
 * its set, until the set's counter moves: only a tick can move it.  The
 * first tick comes after a period of the thread's CPU (1/19 s) and charges
 * all of it.  How late past that the kernel delivers it is not cpprof's:
 * a CPU-time timer is checked only at a timer interrupt that finds the
 * thread running, and on a loaded machine most of its short slices fall
 * between interrupts (0 to 5 ticks seen in 400 ms of a thread's CPU with
 * six busy loops on two CPUs), so the bound is generous. */
static const char *const cpu_modes[] = {"exact", "sampled"};

struct held {
    int64_t t0; /* the thread's CPU clock before the scope was applied */
    uint64_t seen;
    int64_t cpu; /* its CPU from t0 to the read that saw the charge */
};

static void spin_until_charged(void *arg, const cpprof_labelset *labels)
{
    struct held *h = arg;
    while ((h->seen = atomic_load(&counters(labels)->cpu_ns)) == 0 &&
           thread_cpu_ns() - h->t0 < 10000000000LL)
        spin_cpu_ns(1000000);
    h->cpu = thread_cpu_ns() - h->t0;
}

START_TEST(tick_charges_a_thread_that_keeps_its_set)
{
    ck_assert_int_eq(cpprof_set("accounting_cpu", cpu_modes[_i]), 0);
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    cpprof_labelset *a = set_of("scope", "held");
    struct held h = {thread_cpu_ns(), 0, 0};
    cpprof_do(NULL, a, spin_until_charged, &h);
    ck_assert_msg(h.seen > 0, "no tick in %lld ns of the thread's CPU",
                  (long long)h.cpu);
    /* A period of CPU at least (1e9 / 19 ns, less the clock's rounding),
     * and no more than the thread used from before the apply (where its
     * charges start) to the read that saw the charge. */
    ck_assert_msg(h.seen >= 1000000000ULL / 19 * 9 / 10 &&
                      h.seen <= (uint64_t)h.cpu,
                  "the first tick charged %llu ns; the thread had used "
                  "%lld ns",
                  (unsigned long long)h.seen, (long long)h.cpu);
    cpprof_labelset_release(a);
}
END_TEST

#ifndef CPPROF_SANITIZER_INTERCEPTS /* registered only without a sanitizer: below */
/* A program that installs its own handler for the accounting tick's
 * signal after accounting was enabled gets none of
 * cpprof's ticks there, only its own signals; accounting goes on. */
static atomic_int program_timer_signals, program_queued_signals;

static void program_rt_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    if (si->si_code == SI_TIMER)
        atomic_fetch_add(&program_timer_signals, 1);
    else if (si->si_code == SI_QUEUE)
        atomic_fetch_add(&program_queued_signals, 1);
}

static void spin_a_while(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    spin_cpu_ns(*(int64_t *)arg);
}

START_TEST(program_handler_gets_no_ticks)
{
    int sig = SIGRTMIN + 6;
    char signo[8];
    snprintf(signo, sizeof signo, "%d", sig);
    ck_assert_int_eq(cpprof_set("accounting_signal", signo), 0);
    ck_assert_int_eq(cpprof_set("accounting_hz", "1000"), 0);
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    cpprof_labelset *a = set_of("scope", "held");
    int64_t ns = 100000000;
    cpprof_do(NULL, a, spin_a_while, &ns); /* the tick is armed */
    struct sigaction sa = {.sa_sigaction = program_rt_handler,
                           .sa_flags = SA_SIGINFO};
    ck_assert_int_eq(sigaction(sig, &sa, NULL), 0);
    ns = 300000000;
    cpprof_do(NULL, a, spin_a_while, &ns);
    ck_assert_int_eq(sigqueue(getpid(), sig, (union sigval){7}), 0);
    ck_assert_int_eq(atomic_load(&program_queued_signals), 1);
    ck_assert_int_eq(atomic_load(&program_timer_signals), 0);
    /* Accounting goes on: the switches still charge the set. */
    ck_assert_uint_ge(atomic_load(&counters(a)->cpu_ns), 300000000);
    ck_assert_int_eq(accounting_tick_yielded(), 1);
    cpprof_labelset_release(a);
}
END_TEST
#endif

/* accounting_cpu=sampled: switches read no clock, so CPU reaches a set
 * only at the thread's tick and at its exit.  At one tick per CPU-second
 * none comes in a 100 ms run: the scoped set is charged no CPU, the set
 * the thread exits holding all of it, and allocations stay exact. */
struct sampled_run {
    cpprof_labelset *scoped, *at_exit;
    struct spin spin;
};

/* Settings read once say so when set later, rather than never acting. */
START_TEST(settings_read_once_refuse_changes)
{
    ck_assert_int_eq(cpprof_set("accounting", "1"), CPPROF_EFROZEN);
    ck_assert_int_eq(cpprof_set("accounting_hz", "50"), 0);
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    ck_assert_int_eq(cpprof_set("accounting_hz", "20"), CPPROF_EFROZEN);
    ck_assert_int_eq(cpprof_set("accounting_signal", "41"), CPPROF_EFROZEN);
    ck_assert_int_eq(cpprof_set("accounting_cpu", "sampled"), CPPROF_EFROZEN);
    ck_assert_ptr_nonnull(strstr(cpprof_strerror(CPPROF_EFROZEN), "read once"));
}
END_TEST

static void spin_and_allocate(void *arg, const cpprof_labelset *labels)
{
    spin_in_scope(arg, labels);
    for (int i = 0; i < 10; i++) {
        escape = malloc(777);
        free(escape);
    }
}

static void *scopes_then_exit(void *arg)
{
    struct sampled_run *r = arg;
    for (int i = 0; i < 20; i++)
        cpprof_do(NULL, r->scoped, spin_and_allocate, &r->spin);
    cpprof_set_thread_labels(r->at_exit);
    return NULL;
}

START_TEST(sampled_switches_charge_no_cpu)
{
    ck_assert_int_eq(cpprof_set("accounting_cpu", "sometimes"),
                     CPPROF_EVALUE);
    ck_assert_int_eq(cpprof_set("accounting_cpu", "sampled"), 0);
    ck_assert_int_eq(cpprof_set("accounting_hz", "1"), 0);
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    struct sampled_run r = {set_of("scope", "sampled"),
                            set_of("scope", "exit"), {.ns = 5000000}};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, scopes_then_exit, &r), 0);
    pthread_join(t, NULL);
    ck_assert_uint_eq(atomic_load(&counters(r.scoped)->cpu_ns), 0);
    ck_assert_uint_ge(atomic_load(&counters(r.at_exit)->cpu_ns),
                      (uint64_t)r.spin.truth);
    ck_assert_uint_eq(atomic_load(&counters(r.scoped)->alloc_bytes),
                      20 * 7770);
    cpprof_labelset_release(r.scoped);
    cpprof_labelset_release(r.at_exit);
}
END_TEST

/* Accounting uses its own signal and timers: a CPU profile starts and
 * stops while it runs. */
START_TEST(cpu_profile_runs_alongside)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    cpprof_labelset *a = set_of("scope", "profiled");
    struct spin s = {.ns = 100000000};
    do_spin(a, &s);
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(cpprof_cpu_profile_stop(&buf, &len), 0);
    ck_assert_uint_gt(len, 0);
    free(buf);
    assert_bracketed(a, &s, 0);
    cpprof_labelset_release(a);
}
END_TEST

/* ---- Lock waits ------------------------------------------------------------ */

static pthread_mutex_t contended = PTHREAD_MUTEX_INITIALIZER;

static void lock_in_scope(void *arg, const cpprof_labelset *labels)
{
    (void)arg, (void)labels;
    pthread_mutex_lock(&contended);
    pthread_mutex_unlock(&contended);
}

static void *waiter(void *arg)
{
    cpprof_do(NULL, arg, lock_in_scope, NULL);
    return NULL;
}

START_TEST(lock_waits_are_charged)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    cpprof_set_block_profile_rate(1);
    cpprof_labelset *a = set_of("scope", "waiting");
    pthread_mutex_lock(&contended);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, waiter, a), 0);
    struct timespec hold = {0, 100000000};
    nanosleep(&hold, NULL);
    pthread_mutex_unlock(&contended);
    pthread_join(t, NULL);
    uint64_t waited = atomic_load(&counters(a)->lock_wait_ns);
    ck_assert_uint_ge(waited, 80000000);
    ck_assert_uint_le(waited, 1000000000);
    cpprof_labelset_release(a);
}
END_TEST

/* ---- User counters --------------------------------------------------------- */

static void count_jobs(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    ck_assert_int_eq(cpprof_counter_add("jobs", *(uint64_t *)arg), 0);
}

START_TEST(user_counters)
{
    cpprof_labelset *a = set_of("tenant", "a");
    uint64_t three = 3, four = 4;
    cpprof_do(NULL, a, count_jobs, &three);
    cpprof_do(NULL, a, count_jobs, &four);
    ck_assert_int_eq(cpprof_counter_add("jobs", 5), 0); /* the empty set */
    ck_assert_int_eq(cpprof_counter_add("", 1), -EINVAL);
    ck_assert_int_eq(cpprof_counter_add("9lives", 1), -EINVAL);
    ck_assert_int_eq(cpprof_counter_add("a-b", 1), -EINVAL);
    ck_assert_int_eq(cpprof_counter_add(NULL, 1), -EINVAL);
    size_t n;
    const char *const *names = accounting_user_names(&n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(names[0], "jobs");
    ck_assert_uint_eq(atomic_load(&atomic_load(&counters(a)->user)[0]), 7);
    for (int i = 1; i < ACCT_USER_MAX; i++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", i);
        ck_assert_int_eq(cpprof_counter_add(name, 1), 0);
    }
    ck_assert_int_eq(cpprof_counter_add("one_too_many", 1), -ENOSPC);
    cpprof_labelset_release(a);
}
END_TEST

/* ---- Reclaimed sets ---------------------------------------------------------- */

static void allocate_4k(void *arg, const cpprof_labelset *labels)
{
    (void)arg, (void)labels;
    escape = malloc(4096);
    free(escape);
}

START_TEST(reclaimed_sets_are_retired)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    ck_assert_int_eq(cpprof_set("label_cap", "4"), 0);
    for (int i = 0; i < 20; i++) {
        char v[16];
        snprintf(v, sizeof v, "t%d", i);
        cpprof_labelset *s = set_of("tenant", v);
        cpprof_do(NULL, s, allocate_4k, NULL);
        cpprof_labelset_release(s);
    }
    ck_assert_uint_eq(cpprof_labelsets_folded(), 0);
    acct_row *rows;
    size_t n;
    ck_assert_int_eq(accounting_rows(&rows, &n), 0);
    uint64_t bytes = 0, retired = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += rows[i].alloc_bytes;
        if (rows[i].kind == ACCT_ROW_RETIRED)
            retired = rows[i].alloc_bytes;
    }
    accounting_rows_free(rows, n);
    /* Every 4 KiB is somewhere, most of it in the retired row. */
    ck_assert_uint_ge(bytes, 20 * 4096);
    ck_assert_uint_ge(retired, 16 * 4096);
}
END_TEST

/* ---- HTTP: a tiny client -------------------------------------------------- */

/* GET path from the running server: the whole response in a malloc'd
 * string, body at *body. */
static char *http_get(const char *path, char **body)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((in_port_t)http_port())};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[256];
    int len = snprintf(req, sizeof req,
                       "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    ck_assert_int_eq(write(fd, req, (size_t)len), len);
    size_t cap = 1 << 16, used = 0;
    char *buf = malloc(cap);
    for (ssize_t got; (got = read(fd, buf + used, cap - used - 1)) > 0;) {
        used += (size_t)got;
        if (cap - used < 4096)
            buf = realloc(buf, cap *= 2);
    }
    buf[used] = '\0';
    close(fd);
    char *end = strstr(buf, "\r\n\r\n");
    ck_assert_ptr_nonnull(end);
    *body = end + 4;
    return buf;
}

/* ---- A strict parser of the Prometheus text format (0.0.4) -------------- */

struct series {
    char name[128];
    char labels[1024]; /* canonical: k=v\x1f..., in the order given */
    double value;
};

struct exposition {
    struct series s[512];
    size_t n;
    char error[2300]; /* why it was rejected */
};

/* Rejects the exposition with a message naming the line. */
#define REQUIRE(cond, ...)                                                 \
    do {                                                                   \
        if (!(cond)) {                                                     \
            snprintf(x->error, sizeof x->error, __VA_ARGS__);              \
            return false;                                                  \
        }                                                                  \
    } while (0)

static bool metric_char(char c, bool first)
{
    return c == '_' || c == ':' || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
}

static bool label_char(char c, bool first)
{
    return c != ':' && metric_char(c, first);
}

static bool parse_name(struct exposition *x, const char **p, char *out,
                       size_t len, bool label, const char *line)
{
    size_t n = 0;
    while ((label ? label_char : metric_char)(**p, n == 0)) {
        REQUIRE(n + 1 < len, "name too long: %s", line);
        out[n++] = *(*p)++;
    }
    out[n] = '\0';
    REQUIRE(n > 0, "expected a name: %s", line);
    return true;
}

/* A quoted label value; only \\, \" and \n are escapes. */
static bool parse_value(struct exposition *x, const char **p, char *out,
                        size_t len, const char *line)
{
    REQUIRE(**p == '"', "expected '\"': %s", line);
    size_t n = 0;
    for ((*p)++; **p != '"'; (*p)++) {
        char c = **p;
        REQUIRE(c != '\0', "unterminated value: %s", line);
        if (c == '\\') {
            char e = *++*p;
            REQUIRE(e == '\\' || e == '"' || e == 'n', "bad escape: %s", line);
            c = e == 'n' ? '\n' : e;
        }
        REQUIRE(n + 1 < len, "value too long: %s", line);
        out[n++] = c;
    }
    (*p)++;
    out[n] = '\0';
    return true;
}

static bool parse_number(struct exposition *x, const char *p, double *v,
                         const char *line)
{
    if (!strcmp(p, "+Inf") || !strcmp(p, "-Inf") || !strcmp(p, "NaN")) {
        *v = p[0] == '+' ? INFINITY : p[0] == '-' ? -INFINITY : NAN;
        return true;
    }
    char *end;
    *v = strtod(p, &end);
    REQUIRE(end != p && *end == '\0' && !isinf(*v) && !isnan(*v),
            "bad number: %s", line);
    return true;
}

/* HELP or TYPE; `types` gets the family's type. */
static bool parse_meta(struct exposition *x, const char *buf, char fam[][128],
                       char types[][16], size_t *nfam, char helps[][128],
                       size_t *nhelp, const char **current)
{
    char word[8], name[128];
    if (sscanf(buf, "# %7s", word) != 1 ||
        (strcmp(word, "HELP") && strcmp(word, "TYPE")))
        return true; /* a plain comment */
    const char *p = buf + 2 + strlen(word);
    REQUIRE(*p == ' ', "%s", buf);
    p++;
    if (!parse_name(x, &p, name, sizeof name, false, buf))
        return false;
    REQUIRE(*p == ' ', "%s", buf);
    p++;
    if (!strcmp(word, "HELP")) {
        for (size_t i = 0; i < *nhelp; i++)
            REQUIRE(strcmp(helps[i], name), "HELP twice: %s", buf);
        for (const char *c = p; *c; c++)
            if (*c == '\\') {
                REQUIRE(c[1] == '\\' || c[1] == 'n', "bad escape: %s", buf);
                c++;
            }
        REQUIRE(*nhelp < 64, "too many families");
        snprintf(helps[(*nhelp)++], 128, "%s", name);
        return true;
    }
    REQUIRE(!strcmp(p, "counter") || !strcmp(p, "gauge") ||
                !strcmp(p, "histogram") || !strcmp(p, "summary") ||
                !strcmp(p, "untyped"),
            "bad type: %s", buf);
    for (size_t i = 0; i < *nfam; i++)
        REQUIRE(strcmp(fam[i], name), "TYPE twice: %s", buf);
    REQUIRE(*nfam < 64, "too many families");
    snprintf(fam[*nfam], 128, "%s", name);
    snprintf(types[*nfam], 16, "%s", p);
    *current = fam[(*nfam)++];
    return true;
}

static bool parse_sample(struct exposition *x, const char *buf,
                         const char *current, bool counter)
{
    const char *p = buf;
    REQUIRE(*p, "empty line");
    REQUIRE(x->n < sizeof x->s / sizeof x->s[0], "too many series");
    struct series *s = &x->s[x->n];
    if (!parse_name(x, &p, s->name, sizeof s->name, false, buf))
        return false;
    REQUIRE(current && !strcmp(current, s->name),
            "sample outside its family (TYPE first): %s", buf);
    s->labels[0] = '\0';
    if (*p == '{') {
        char seen[64][128];
        size_t nseen = 0;
        for (p++; *p != '}';) {
            char k[128], v[512];
            if (!parse_name(x, &p, k, sizeof k, true, buf))
                return false;
            REQUIRE(strncmp(k, "__", 2), "reserved label name: %s", buf);
            for (size_t i = 0; i < nseen; i++)
                REQUIRE(strcmp(seen[i], k), "label twice: %s", buf);
            REQUIRE(nseen < 64, "too many labels: %s", buf);
            strcpy(seen[nseen++], k);
            REQUIRE(*p == '=', "expected '=': %s", buf);
            p++;
            if (!parse_value(x, &p, v, sizeof v, buf))
                return false;
            size_t at = strlen(s->labels);
            snprintf(s->labels + at, sizeof s->labels - at, "%s=%s\x1f", k, v);
            if (*p == ',')
                p++;
            else
                REQUIRE(*p == '}', "expected ',' or '}': %s", buf);
        }
        p++;
    }
    REQUIRE(*p == ' ', "expected ' ': %s", buf);
    char number[64];
    REQUIRE(sscanf(p + 1, "%63s", number) == 1, "no value: %s", buf);
    if (!parse_number(x, number, &s->value, buf))
        return false;
    p += 1 + strlen(number);
    if (*p == ' ') { /* an optional timestamp: an integer */
        char *end;
        strtoll(p + 1, &end, 10);
        REQUIRE(end != p + 1 && *end == '\0', "trailing text: %s", buf);
    } else {
        REQUIRE(*p == '\0', "trailing text: %s", buf);
    }
    REQUIRE(!counter || s->value >= 0, "negative counter: %s", buf);
    for (size_t i = 0; i < x->n; i++)
        REQUIRE(strcmp(x->s[i].name, s->name) ||
                    strcmp(x->s[i].labels, s->labels),
                "series twice: %s", buf);
    x->n++;
    return true;
}

/* Parses a whole exposition, rejecting anything the format does not allow:
 * bad names or escapes, a sample before its TYPE or away from its family,
 * HELP or TYPE twice, an unknown type, a repeated label or series, a
 * reserved label name, a negative counter, a missing final newline. */
static bool parse_exposition(const char *text, struct exposition *x)
{
    char fam[64][128], types[64][16], helps[64][128];
    size_t nfam = 0, nhelp = 0;
    const char *current = NULL;
    x->n = 0;
    REQUIRE(*text && text[strlen(text) - 1] == '\n', "no final newline");
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        char buf[2048];
        size_t len = (size_t)(eol - line);
        REQUIRE(len < sizeof buf, "line too long");
        memcpy(buf, line, len);
        buf[len] = '\0';
        line = eol + 1;
        bool ok = buf[0] == '#'
                      ? parse_meta(x, buf, fam, types, &nfam, helps, &nhelp,
                                   &current)
                      : parse_sample(x, buf, current,
                                     nfam > 0 &&
                                         !strcmp(types[nfam - 1], "counter"));
        if (!ok)
            return false;
    }
    return true;
}

static const struct series *find_series(const struct exposition *x,
                                        const char *name, const char *labels)
{
    for (size_t i = 0; i < x->n; i++)
        if (!strcmp(x->s[i].name, name) && !strcmp(x->s[i].labels, labels))
            return &x->s[i];
    return NULL;
}

/* The parser itself rejects what the format forbids. */
START_TEST(parser_is_strict)
{
    static const char *const bad[] = {
        "x 1\n",                                    /* no TYPE */
        "# TYPE x counter\nx{a=\"1\",a=\"2\"} 1\n", /* label twice */
        "# TYPE x counter\nx{a=\"\\t\"} 1\n",       /* bad escape */
        "# TYPE x counter\nx{__a=\"1\"} 1\n",       /* reserved */
        "# TYPE x counter\nx{a-b=\"1\"} 1\n",       /* bad label name */
        "# TYPE x counter\nx 1\nx 2\n",             /* series twice */
        "# TYPE x counter\nx -1\n",                 /* negative counter */
        "# TYPE x counter\nx 1 2 3\n",              /* trailing text */
        "# TYPE x counter\nx one\n",                /* not a number */
        "# TYPE x countr\nx 1\n",                   /* bad type */
        "# TYPE x counter\n# TYPE x counter\nx 1\n",/* TYPE twice */
        "# TYPE x counter\nx 1",                    /* no final newline */
        "# TYPE x counter\n# TYPE y gauge\nx 1\n",  /* away from family */
    };
    static struct exposition x;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!parse_exposition(bad[i], &x), "accepted: %s", bad[i]);
    ck_assert_msg(parse_exposition("# HELP x a \\\\ help\n# TYPE x counter\n"
                                   "x{a=\"q\\\"\\\\\\n\",b=\"\"} 1.5e3 "
                                   "1700000000\n",
                                   &x),
                  "%s", x.error);
    ck_assert_uint_eq(x.n, 1);
    ck_assert_str_eq(x.s[0].labels, "a=q\"\\\n\x1f" "b=\x1f");
    ck_assert(x.s[0].value == 1500);
}
END_TEST

/* ---- HTTP: both endpoints -------------------------------------------------- */

static void allocate_12345(void *arg, const cpprof_labelset *labels)
{
    (void)arg, (void)labels;
    escape = malloc(12345);
    free(escape);
    cpprof_counter_add("requests", 2);
}

START_TEST(metrics_endpoint)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    /* Keys Prometheus cannot take as they are, values needing escapes. */
    const char *kv[] = {"tenant", "ac\"me\\\n", "a-b", "1", "a.b", "2",
                        "9z", "3", "__x", "4"};
    cpprof_labelset *odd;
    ck_assert_int_eq(cpprof_labels(&odd, 10, kv), 0);
    cpprof_do(NULL, odd, allocate_12345, NULL);
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    char *body, *resp = http_get("/metrics", &body);
    ck_assert_msg(strstr(resp, "Content-Type: text/plain; version=0.0.4"),
                  "%s", resp);
    static struct exposition x;
    ck_assert_msg(parse_exposition(body, &x), "%s\n%s", x.error, body);
    const char *labels = "label_9z=3\x1f" "label___x=4\x1f" "a_b=1\x1f"
                         "a_b_2=2\x1f" "tenant=ac\"me\\\n\x1f";
    const struct series *s =
        find_series(&x, "cpprof_alloc_bytes_total", labels);
    ck_assert_msg(s != NULL, "%s", body);
    ck_assert(s->value == 12345);
    s = find_series(&x, "cpprof_alloc_objects_total", labels);
    ck_assert(s && s->value == 1);
    s = find_series(&x, "cpprof_user_requests_total", labels);
    ck_assert(s && s->value == 2);
    ck_assert_ptr_nonnull(find_series(&x, "cpprof_cpu_seconds_total", labels));
    ck_assert_ptr_nonnull(
        find_series(&x, "cpprof_lock_wait_seconds_total", labels));
    ck_assert_ptr_nonnull(find_series(&x, "cpprof_threads", ""));
    s = find_series(&x, "cpprof_labelsets_folded_total", "");
    ck_assert(s && s->value == 0);
    free(resp);
    ck_assert_int_eq(cpprof_http_stop(), 0);
    cpprof_labelset_release(odd);
}
END_TEST

START_TEST(json_endpoint)
{
    ck_assert_int_eq(cpprof_accounting_enable(), 0);
    cpprof_labelset *a = set_of("tenant", "json");
    cpprof_do(NULL, a, allocate_12345, NULL);
    ck_assert_int_eq(cpprof_set_thread_labels(a), 0); /* one holder */
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    char *body, *resp = http_get("/debug/pprof/accounting", &body);
    ck_assert_msg(strstr(resp, "Content-Type: application/json"), "%s", resp);
    json_error_t err;
    json_t *doc = json_loads(body, 0, &err);
    ck_assert_msg(doc != NULL, "%s: %s", err.text, body);
    ck_assert(json_is_true(json_object_get(doc, "enabled")));
    json_t *sets = json_object_get(doc, "sets"), *row;
    size_t i;
    int found = 0;
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(sets, 0), "kind")),
                     "unlabelled");
    json_array_foreach(sets, i, row)
    {
        json_t *tenant =
            json_object_get(json_object_get(row, "labels"), "tenant");
        if (!tenant || strcmp(json_string_value(tenant), "json"))
            continue;
        found++;
        ck_assert_int_eq(
            json_integer_value(json_object_get(row, "alloc_bytes")), 12345);
        ck_assert_int_eq(
            json_integer_value(json_object_get(row, "alloc_objects")), 1);
        ck_assert_int_eq(json_integer_value(json_object_get(row, "threads")),
                         1);
        ck_assert_int_eq(json_integer_value(json_object_get(
                             json_object_get(row, "user"), "requests")),
                         2);
        ck_assert(json_is_integer(json_object_get(row, "cpu_nanoseconds")));
    }
    ck_assert_int_eq(found, 1);
    json_decref(doc);
    free(resp);
    ck_assert_int_eq(cpprof_http_stop(), 0);
    cpprof_set_thread_labels(NULL);
    cpprof_labelset_release(a);
}
END_TEST

/* test/http_metrics.sh runs the parsers on the demo's responses:
 *   check_accounting --parse-metrics FILE   strict Prometheus text parse
 *   check_accounting --parse-json FILE      jansson parse of the JSON */
static int parse_file(const char *mode, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return perror(path), 2;
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    if (!strcmp(mode, "--parse-json")) {
        json_error_t err;
        json_t *doc = json_loads(text, 0, &err);
        if (!doc || !json_is_array(json_object_get(doc, "sets")))
            return fprintf(stderr, "%s: %s\n", path, doc ? "no sets" : err.text),
                   1;
        json_decref(doc);
        return 0;
    }
    static struct exposition x;
    if (!parse_exposition(text, &x))
        return fprintf(stderr, "%s: %s\n", path, x.error), 1;
    printf("%zu series\n", x.n);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3)
        return parse_file(argv[1], argv[2]);
    Suite *s = suite_create("accounting");
    TCase *tc = tcase_create("accounting");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, allocations_are_exact_per_set);
    tcase_add_test(tc, thread_exit_flushes);
    tcase_add_test(tc, a_task_is_charged_on_every_thread);
    tcase_add_test(tc, cpu_short_and_long_scopes);
    tcase_add_test(tc, pending_charges_reach_readers);
    tcase_add_loop_test(tc, tick_charges_a_thread_that_keeps_its_set, 0, 2);
    tcase_add_test(tc, sampled_switches_charge_no_cpu);
    tcase_add_test(tc, settings_read_once_refuse_changes);
    tcase_add_test(tc, cpu_profile_runs_alongside);
    tcase_add_test(tc, lock_waits_are_charged);
    tcase_add_test(tc, user_counters);
    tcase_add_test(tc, reclaimed_sets_are_retired);
    tcase_add_test(tc, parser_is_strict);
    tcase_add_test(tc, metrics_endpoint);
    tcase_add_test(tc, json_endpoint);
#ifndef CPPROF_SANITIZER_INTERCEPTS
    /* A sanitizer runtime defines sigaction ahead of the convenience
     * library this program links, so cpprof's sigaction (siginterpose.c)
     * is not linked in here; libcpprof.so under a sanitizer is found after
     * the runtime's interceptor, which calls it. */
    tcase_add_test(tc, program_handler_gets_no_ticks);
#endif
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
