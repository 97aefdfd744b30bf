/*
 * check_census.c -- unit tests of the thread census (census.h): labelled
 * threads parked in a blocking call appear with their labels, counts,
 * state and stacks, read from outside even when they block the census
 * signal; a running thread blocking it and a thread in vfork appear with
 * their labels and a reason instead of a stack, without waiting; threads
 * exiting while censuses run never crash or hang one; 1,000 threads; a
 * signal with somebody else's handler is refused; a running thread that
 * cannot be signalled for want of queued-signal room is named with its
 * whole reason, and a blocked one still read; a thread that has not run
 * since the last census is taken from it, but one that moved to another
 * call, or that another thread renamed, shows its new place and name; the
 * labels-only census counts the same threads and sets; the stacks-only
 * census (census_take_stacks) gives the same stacks without reading
 * names, and names an exited leader (a zombie, whose syscall file has no
 * stack pointer) as exited, as the full one does.
 */
#define _GNU_SOURCE
#include <check.h>
#include <cpprof.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "census.h"
#include "census_crew.h"
#include "sigq.h"

/* The census signal every test uses (set by the fixture). */
static int census_signal;

static void use_census_signal(void)
{
    char value[12];
    census_signal = SIGRTMIN + 5;
    snprintf(value, sizeof value, "%d", census_signal);
    ck_assert_int_eq(cpprof_set("census_signal", value), 0);
}

static cpprof_labelset *make(const char *tenant)
{
    const char *kv[] = {"tenant", tenant};
    cpprof_labelset *s = NULL;
    ck_assert_int_eq(cpprof_labels(&s, 2, kv), 0);
    return s;
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* ---- Parked threads: each blocks in read() on a pipe until it closes ---- */

struct park {
    int pipe[2];
    atomic_int ready;
    bool block_signal;
};

static void read_until_closed(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    struct park *p = arg;
    char c;
    atomic_fetch_add(&p->ready, 1);
    while (read(p->pipe[0], &c, 1) != 0)
        ;
}

struct parked_arg {
    struct park *park;
    const cpprof_labelset *labels;
};

static void *parked_thread(void *arg)
{
    struct parked_arg *a = arg;
    if (a->park->block_signal) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, census_signal);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
    }
    cpprof_do(NULL, a->labels, read_until_closed, a->park);
    return NULL;
}

/* Starts n threads parked under `labels` and waits until all have their
 * labels on and are about to block. */
static pthread_t *park_threads(struct park *p, size_t n,
                               const cpprof_labelset *labels)
{
    static struct parked_arg arg;
    arg = (struct parked_arg){p, labels};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_t *t = calloc(n, sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&t[i], &attr, parked_thread, &arg), 0);
    pthread_attr_destroy(&attr);
    while ((size_t)atomic_load(&p->ready) < n)
        sched_yield();
    return t;
}

static void release_threads(struct park *p, pthread_t *t, size_t n)
{
    close(p->pipe[1]);
    for (size_t i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    close(p->pipe[0]);
    free(t);
}

static size_t count_with(const census *c, const cpprof_labelset *labels,
                         const char *missing)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->threads[i].labels == labels &&
            strcmp(c->threads[i].missing, missing) == 0)
            n++;
    return n;
}

/* The state letter of thread `tid` (/proc/self/task/TID/stat), or 0. */
static char thread_state(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren != NULL && paren[1] == ' ' ? paren[2] : 0;
}

/* Waits until every thread but this one sleeps (in its read): a thread
 * still on its way there would be signalled, and walk another stack. */
static void wait_all_sleeping(void)
{
    census l;
    ck_assert_int_eq(census_take_labels(&l), 0);
    for (size_t i = 0; i < l.n; i++) {
        pid_t tid = l.threads[i].tid;
        for (int tries = 0; tid != gettid() && thread_state(tid) != 'S';
             tries++) {
            ck_assert_int_lt(tries, 5000);
            usleep(1000);
        }
    }
    census_release(&l);
}

/* ---- A thread that moves between censuses ------------------------------ */

struct mover {
    int first[2], second[2];
    atomic_int stage; /* 1: about to wait in the first call; 2: the second */
    pid_t tid;
};

/* Each waits in read(2) through syscall(), which no sanitizer intercepts
 * (ASan's read interceptor is a frame a walk from outside cannot cross
 * without the frame pointer: chains.sh). */
static __attribute__((noinline)) void wait_first(struct mover *m)
{
    char c;
    atomic_store(&m->stage, 1);
    ck_assert_int_eq(syscall(SYS_read, m->first[0], &c, 1), 1);
    __asm__ volatile("" ::: "memory"); /* a return address inside */
}

static __attribute__((noinline)) void wait_second(struct mover *m)
{
    char c;
    atomic_store(&m->stage, 2);
    ck_assert_int_eq(syscall(SYS_read, m->second[0], &c, 1), 0);
    __asm__ volatile("" ::: "memory");
}

static void *mover_thread(void *arg)
{
    struct mover *m = arg;
    m->tid = gettid();
    wait_first(m);
    wait_second(m);
    return NULL;
}

static const census_thread *find_tid(const census *c, pid_t tid)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->threads[i].tid == tid)
            return &c->threads[i];
    ck_abort_msg("thread %d is not in the census", (int)tid);
    return NULL;
}

/* Whether one of t's frames returns into fn: between its address and the
 * next of the mover's functions (or 256 bytes on; each is a few
 * instructions). */
static bool returns_into(const census_thread *t, void (*fn)(struct mover *))
{
    uintptr_t from = (uintptr_t)fn, to = from + 256;
    uintptr_t others[] = {(uintptr_t)wait_first, (uintptr_t)wait_second,
                          (uintptr_t)mover_thread};
    for (size_t i = 0; i < 3; i++)
        if (others[i] > from && others[i] < to)
            to = others[i];
    for (unsigned i = 0; i < t->depth; i++)
        if (t->pcs[i] > from && t->pcs[i] <= to)
            return true;
    return false;
}

/* Waits until the thread sleeps in its call (its state from the census). */
static void take_when_sleeping(census *c, pid_t tid)
{
    for (int tries = 0;; tries++) {
        ck_assert_int_eq(census_take(c), 0);
        if (find_tid(c, tid)->state == 'S')
            return;
        ck_assert_int_lt(tries, 1000);
        census_release(c);
        usleep(1000);
    }
}

/* ---- Tests ------------------------------------------------------------- */

START_TEST(moved_or_renamed_thread_is_read_afresh)
{
    struct mover m = {0};
    ck_assert_int_eq(pipe(m.first), 0);
    ck_assert_int_eq(pipe(m.second), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, mover_thread, &m), 0);
    while (atomic_load(&m.stage) < 1)
        sched_yield();

    census a, b, c;
    take_when_sleeping(&a, m.tid);
    const census_thread *first = find_tid(&a, m.tid);
    ck_assert_str_eq(first->missing, "");
    ck_assert(returns_into(first, wait_first));
    ck_assert(!returns_into(first, wait_second));

    /* Renamed by this thread while it sleeps, without running itself. */
    ck_assert_int_eq(pthread_setname_np(t, "renamed"), 0);
    ck_assert_int_eq(census_take(&b), 0);
    const census_thread *renamed = find_tid(&b, m.tid);
    ck_assert_str_eq(renamed->name, "renamed");
    ck_assert(returns_into(renamed, wait_first));
    census_release(&b);

    /* It runs on into the second call: a new stack. */
    ck_assert_int_eq(write(m.first[1], "x", 1), 1);
    while (atomic_load(&m.stage) < 2)
        sched_yield();
    take_when_sleeping(&b, m.tid);
    const census_thread *moved = find_tid(&b, m.tid);
    ck_assert_str_eq(moved->missing, "");
    ck_assert(returns_into(moved, wait_second));
    ck_assert(!returns_into(moved, wait_first));
    ck_assert_str_eq(moved->name, "renamed");
    /* The stacks-only census takes it from there, name and all. */
    census s;
    ck_assert_int_eq(census_take_stacks(&s), 0);
    const census_thread *kept = find_tid(&s, m.tid);
    ck_assert_uint_eq(kept->depth, moved->depth);
    ck_assert_mem_eq(kept->pcs, moved->pcs, moved->depth * sizeof *moved->pcs);
    ck_assert_str_eq(kept->name, "renamed");
    census_release(&s);

    /* Still there: the same stack again. */
    ck_assert_int_eq(census_take(&c), 0);
    const census_thread *again = find_tid(&c, m.tid);
    ck_assert_uint_eq(again->depth, moved->depth);
    ck_assert_mem_eq(again->pcs, moved->pcs, moved->depth * sizeof *moved->pcs);
    ck_assert_str_eq(again->wchan, moved->wchan);
    ck_assert_str_eq(again->state_name, "sleeping");

    census_release(&a);
    census_release(&b);
    census_release(&c);
    close(m.second[1]);
    pthread_join(t, NULL);
    close(m.first[0]);
    close(m.first[1]);
    close(m.second[0]);
}
END_TEST

/* The stacks-only census of new threads: every one with its stack and
 * labels, and no name read for those blocked in the kernel. */
static void check_stacks_census(census *s, const cpprof_labelset *acme,
                                const cpprof_labelset *globex)
{
    wait_all_sleeping();
    ck_assert_int_eq(census_take_stacks(s), 0);
    ck_assert_uint_eq(s->n, 6);
    ck_assert_uint_eq(count_with(s, acme, ""), 3);
    ck_assert_uint_eq(count_with(s, globex, ""), 2);
    for (size_t i = 0; i < s->n; i++) {
        const census_thread *t = &s->threads[i];
        ck_assert_uint_ge(t->depth, 1);
        if (t->tid != gettid() && t->state != 'R')
            ck_assert_str_eq(t->name, "");
    }
}

START_TEST(parked_threads_with_labels_and_stacks)
{
    cpprof_labelset *acme = make("acme"), *globex = make("globex");
    struct park pa = {0}, pg = {0};
    ck_assert_int_eq(pipe(pa.pipe), 0);
    ck_assert_int_eq(pipe(pg.pipe), 0);
    pthread_t *ta = park_threads(&pa, 3, acme);
    pthread_t *tg = park_threads(&pg, 2, globex);

    census s, c;
    check_stacks_census(&s, acme, globex);
    /* Then the full census, which cannot take a thread whole from one that
     * read no name: each stack walked again, and found the same. */
    ck_assert_int_eq(census_take(&c), 0);
    ck_assert_uint_eq(count_with(&c, acme, ""), 3);
    ck_assert_uint_eq(count_with(&c, globex, ""), 2);
    /* Every thread of the process, each once, in tid order; the main
     * thread (this one) without labels. */
    ck_assert_uint_eq(c.n, 6);
    bool saw_self = false;
    for (size_t i = 0; i < c.n; i++) {
        const census_thread *t = &c.threads[i];
        ck_assert_str_eq(t->missing, "");
        ck_assert_uint_ge(t->depth, 1);
        ck_assert_ptr_nonnull(memchr("RSD", t->state, 3));
        if (i)
            ck_assert_int_lt(c.threads[i - 1].tid, t->tid);
        if (t->tid == gettid()) {
            saw_self = true;
            ck_assert_ptr_null(t->labels);
            ck_assert_str_eq(t->state_name, "running");
        } else {
            ck_assert_str_eq(t->state_name, "sleeping");
            ck_assert_str_ne(t->name, "");
            const census_thread *o = &s.threads[i];
            ck_assert_int_eq(o->tid, t->tid);
            ck_assert_uint_eq(o->depth, t->depth);
            ck_assert_mem_eq(o->pcs, t->pcs, t->depth * sizeof *t->pcs);
        }
    }
    ck_assert(saw_self);
    census_release(&s);
    census_release(&c);
    /* The labels-only census: the same threads and sets, nothing else. */
    ck_assert_int_eq(census_take_labels(&c), 0);
    ck_assert_uint_eq(c.n, 6);
    ck_assert_uint_eq(count_with(&c, acme, ""), 3);
    ck_assert_uint_eq(count_with(&c, globex, ""), 2);
    for (size_t i = 0; i < c.n; i++)
        ck_assert_uint_eq(c.threads[i].depth, 0);
    census_release(&c);
    release_threads(&pa, ta, 3);
    release_threads(&pg, tg, 2);
    cpprof_labelset_release(acme);
    cpprof_labelset_release(globex);
}
END_TEST

/* A spinning thread that blocks the census signal: it runs, so only the
 * signal could give its stack. */
static atomic_bool spin_stop;

static void *spin_with_signal_blocked(void *arg)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, census_signal);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    cpprof_set_thread_labels(arg);
    while (!atomic_load(&spin_stop))
        ;
    return NULL;
}

START_TEST(thread_blocking_the_signal_keeps_labels)
{
    cpprof_labelset *initech = make("initech");
    cpprof_labelset *hooli = make("hooli");
    struct park p = {.block_signal = true};
    ck_assert_int_eq(pipe(p.pipe), 0);
    pthread_t *t = park_threads(&p, 1, initech);
    pthread_t spinner;
    atomic_store(&spin_stop, false);
    ck_assert_int_eq(pthread_create(&spinner, NULL, spin_with_signal_blocked,
                                    hooli), 0);

    ck_assert_int_eq(cpprof_set("census_timeout_ms", "1000"), 0);
    /* The parked thread is read from outside once it blocks in read():
     * the signal it blocks is not needed.  Censuses until it has (it may
     * still be on its way into the call at first). */
    bool parked_read = false, spinner_seen = false;
    for (int round = 0; round < 200 && !(parked_read && spinner_seen);
         round++) {
        int64_t start = now_ms();
        census c;
        ck_assert_int_eq(census_take(&c), 0);
        /* Known from /proc before any signal: no wait for its answer. */
        ck_assert_int_lt(now_ms() - start, 500);
        parked_read = count_with(&c, initech, "") == 1;
        /* Runnable, whether or not it has a CPU just now. */
        spinner_seen = count_with(&c, hooli, "signal blocked") == 1;
        census_release(&c);
        if (!parked_read) {
            struct timespec ms = {0, 10000000};
            nanosleep(&ms, NULL);
        }
    }
    ck_assert(parked_read);
    ck_assert(spinner_seen);
    atomic_store(&spin_stop, true);
    pthread_join(spinner, NULL);
    release_threads(&p, t, 1);
    cpprof_labelset_release(initech);
    cpprof_labelset_release(hooli);
}
END_TEST

/* A thread in vfork() waits for its child, which runs on the thread's
 * stack: the stack cannot be read, and a signal would wait for the child.
 * The census says so at once instead of waiting for an answer. */
static atomic_int vfork_tid;

static void *vfork_for_a_second(void *arg)
{
    cpprof_labelset *labels = arg;
    cpprof_set_thread_labels(labels);
    atomic_store(&vfork_tid, gettid());
    pid_t pid = vfork();
    if (pid == 0) {
        struct timespec second = {1, 0};
        nanosleep(&second, NULL);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    return NULL;
}

START_TEST(thread_in_vfork_given_a_reason_at_once)
{
    ck_assert_int_eq(cpprof_set("census_timeout_ms", "2000"), 0);
    cpprof_labelset *umbrella = make("umbrella");
    atomic_store(&vfork_tid, 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, vfork_for_a_second, umbrella),
                     0);
    /* Not before the thread waits for its child (state D): a census that
     * found it still running would signal it, and the signal would wait
     * for the child -- the case this test is not about. */
    int64_t end = now_ms() + 5000;
    pid_t tid = 0;
    while (now_ms() < end &&
           ((tid = atomic_load(&vfork_tid)) == 0 || thread_state(tid) != 'D')) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    ck_assert_msg(tid != 0 && thread_state(tid) == 'D',
                  "the thread never waited in vfork (state %c)",
                  tid ? thread_state(tid) : '?');
    /* Both kinds: the stacks-only census knows it from its syscall file
     * alone. */
    for (int details = 0; details <= 1; details++) {
        int64_t start = now_ms();
        census c;
        ck_assert_int_eq(details ? census_take(&c) : census_take_stacks(&c),
                         0);
        int64_t took = now_ms() - start;
        int seen =
            count_with(&c, umbrella, "in vfork: the child has its stack");
        census_release(&c);
        ck_assert_msg(seen == 1,
                      "the thread in vfork was not given the reason (%s)",
                      details ? "census_take" : "census_take_stacks");
        ck_assert_msg(took < 1000, "the census waited %lld ms for it",
                      (long long)took);
    }
    pthread_join(t, NULL);
    cpprof_labelset_release(umbrella);
}
END_TEST

/* In a child whose leader has called pthread_exit: both censuses list
 * the leader, a zombie until the last thread exits, as exited (its
 * syscall file reads "-1 0x0 0x0": no stack to walk).  Exits 0 when so. */
static void *census_exited_leader(void *arg)
{
    (void)arg;
    pid_t leader = getpid();
    for (int tries = 0; thread_state(leader) != 'Z'; tries++) {
        if (tries == 5000)
            _exit(2);
        usleep(1000);
    }
    int ok = 1;
    for (int details = 0; details <= 1; details++) {
        census c;
        if ((details ? census_take(&c) : census_take_stacks(&c)) != 0)
            _exit(3);
        size_t seen = 0;
        for (size_t i = 0; i < c.n; i++)
            if (c.threads[i].tid == leader) {
                seen++;
                ok &= strcmp(c.threads[i].missing, "thread exited") == 0;
            }
        ok &= seen == 1;
        census_release(&c);
    }
    _exit(ok ? 0 : 1);
}

START_TEST(exited_leader_given_a_reason)
{
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, census_exited_leader, NULL) != 0)
            _exit(4);
        pthread_exit(NULL);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the exited leader was not listed as exited (status %#x)",
                  status);
}
END_TEST

/* ---- Threads exiting while censuses run --------------------------------- */

static atomic_bool churn_stop;

static void *short_lived(void *arg)
{
    (void)arg;
    return NULL;
}

static void *churn(void *arg)
{
    cpprof_set_thread_labels(arg);
    while (!atomic_load(&churn_stop)) {
        pthread_t t;
        if (cpprof_thread_create(&t, NULL, short_lived, NULL) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

START_TEST(threads_exiting_during_census)
{
    ck_assert_int_eq(cpprof_set("census_timeout_ms", "100"), 0);
    cpprof_labelset *churner = make("churner");
    pthread_t churners[3];
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(pthread_create(&churners[i], NULL, churn, churner),
                         0);
    for (int round = 0; round < 30; round++) {
        int64_t start = now_ms();
        census c;
        ck_assert_int_eq(census_take(&c), 0);
        ck_assert_int_lt(now_ms() - start, 100 + 400);
        ck_assert_uint_ge(c.n, 1 + 3);
        for (size_t i = 0; i < c.n; i++) {
            const census_thread *t = &c.threads[i];
            ck_assert_int_gt(t->tid, 0);
            if (!t->missing[0])
                ck_assert_uint_ge(t->depth, 1);
        }
        census_release(&c);
    }
    atomic_store(&churn_stop, true);
    for (int i = 0; i < 3; i++)
        pthread_join(churners[i], NULL);
    cpprof_labelset_release(churner);
}
END_TEST

/* A census after the last one's thread exited and another started in its
 * place, so that the process has as many threads as that census listed:
 * the new thread is in it, the gone one not (census.c's list_known finds
 * the one gone and lists the threads afresh). */
START_TEST(thread_in_a_gone_ones_place_is_listed)
{
    cpprof_labelset *before = make("before"), *after = make("after");
    for (int round = 0; round < 20; round++) {
        struct park p1 = {0}, p2 = {0};
        ck_assert_int_eq(pipe(p1.pipe), 0);
        ck_assert_int_eq(pipe(p2.pipe), 0);
        pthread_t *t1 = park_threads(&p1, 1, before);
        census c;
        ck_assert_int_eq(census_take_stacks(&c), 0);
        ck_assert_uint_eq(count_with(&c, before, ""), 1);
        size_t n = c.n;
        census_release(&c);
        release_threads(&p1, t1, 1);
        pthread_t *t2 = park_threads(&p2, 1, after);
        ck_assert_int_eq(census_take_stacks(&c), 0);
        ck_assert_uint_eq(c.n, n);
        ck_assert_uint_eq(count_with(&c, before, ""), 0);
        ck_assert_uint_eq(count_with(&c, after, ""), 1);
        census_release(&c);
        release_threads(&p2, t2, 1);
    }
    cpprof_labelset_release(before);
    cpprof_labelset_release(after);
}
END_TEST

START_TEST(thousand_threads)
{
    /* Every one must answer: a long timeout, since this is about counts,
     * not speed (bench/census measures that). */
    ck_assert_int_eq(cpprof_set("census_timeout_ms", "5000"), 0);
    cpprof_labelset *many = make("many");
    struct park p = {0};
    ck_assert_int_eq(pipe(p.pipe), 0);
    pthread_t *t = park_threads(&p, 1000, many);
    census c;
    ck_assert_int_eq(census_take(&c), 0);
    /* A census this large is shared with the crew's helpers (one fewer
     * than the CPUs, at most three), started by the first: they are
     * listed too, as the profiler's, with their stacks. */
    unsigned helpers;
    census_crew_cpu_ns(&helpers);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_uint_eq(helpers, cpus > 4 ? 3 : (unsigned)cpus - 1);
    ck_assert_uint_eq(c.n, 1001 + helpers);
    ck_assert_uint_eq(count_with(&c, many, ""), 1000);
    size_t labelled = 0;
    for (size_t i = 0; i < c.n; i++) {
        const char *role = NULL;
        bool found = false;
        if (cpprof_label(c.threads[i].labels, "pprof_internal", &role,
                         &found) == 0 &&
            found && strcmp(role, "census") == 0) {
            ck_assert_str_eq(c.threads[i].name, "cpprof-census");
            ck_assert_str_eq(c.threads[i].missing, "");
            ck_assert_uint_ge(c.threads[i].depth, 2);
            labelled++;
        }
    }
    ck_assert_uint_eq(labelled, helpers);
    census_release(&c);
    release_threads(&p, t, 1000);
    cpprof_labelset_release(many);
}
END_TEST

/* 300 threads under a queued-signal limit 120 above what is used: the
 * census sends its signals in waves within half of what is free, so that
 * the program's own queued signals would still fit, and every thread
 * still answers.  Sent all at once, the signals
 * failed from the 121st with EAGAIN ("signal not sent"). */
START_TEST(census_stays_within_queued_signal_limit)
{
    sigq_count_apart();
    ck_assert_int_eq(cpprof_set("census_timeout_ms", "5000"), 0);
    cpprof_labelset *few = make("few");
    struct park p = {0};
    ck_assert_int_eq(pipe(p.pipe), 0);
    pthread_t *t = park_threads(&p, 300, few);
    unsigned long used = sigq_used();
    struct rlimit lim = {used + 120, used + 120};
    ck_assert_int_eq(setrlimit(RLIMIT_SIGPENDING, &lim), 0);
    census c;
    ck_assert_int_eq(census_take(&c), 0);
    const char *why = "";
    for (size_t i = 0; i < c.n; i++)
        if (c.threads[i].missing[0])
            why = c.threads[i].missing;
    ck_assert_msg(count_with(&c, few, "") == 300, "%zu of 300 answered; %s",
                  count_with(&c, few, ""), why);
    census_release(&c);
    release_threads(&p, t, 300);
    cpprof_labelset_release(few);
}
END_TEST

static void someone_elses_handler(int sig) { (void)sig; }

/* Running threads labelled "acme": they spin with the census signal
 * unblocked, so only a signal could give their stacks. */
struct spinners {
    atomic_int ready;
    atomic_bool stop;
    const cpprof_labelset *labels;
};

static void *spin_labelled(void *arg)
{
    struct spinners *s = arg;
    cpprof_set_thread_labels(s->labels);
    atomic_fetch_add(&s->ready, 1);
    while (!atomic_load(&s->stop))
        ;
    return NULL;
}

/* With no room for queued signals (RLIMIT_SIGPENDING 0), the census
 * signals no thread: a running thread (the only kind it signals) appears
 * with its labels and the whole reason, "queued-signal limit", at once,
 * since no signal is outstanding to free a unit; a thread blocked in the
 * kernel is read from outside and keeps its stack.  The reason field has
 * room for the longest reason, "signal not sent: " and strerror's longest
 * text (the kernel can still refuse a signal the budget allowed, when
 * another process of the user fills the queue between); it was once cut
 * at 39 characters. */
START_TEST(signal_not_sent_reason_is_whole)
{
    const char *reason = "queued-signal limit";
    ck_assert_int_eq(cpprof_set("census_timeout_ms", "5000"), 0);
    cpprof_labelset *acme = make("acme"), *globex = make("globex");
    struct spinners sp = {.labels = acme};
    pthread_t spin[2];
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&spin[i], NULL, spin_labelled, &sp),
                         0);
    while (atomic_load(&sp.ready) < 2)
        sched_yield();
    struct park pg = {0};
    ck_assert_int_eq(pipe(pg.pipe), 0);
    pthread_t *tg = park_threads(&pg, 1, globex);
    struct rlimit old, none;
    ck_assert_int_eq(getrlimit(RLIMIT_SIGPENDING, &old), 0);
    none = (struct rlimit){0, old.rlim_max};
    /* Censuses until the parked thread is inside read() (it may still be
     * on its way at first, running, and then is signalled like the
     * spinners). */
    bool parked_read = false;
    for (int round = 0; round < 200 && !parked_read; round++) {
        ck_assert_int_eq(setrlimit(RLIMIT_SIGPENDING, &none), 0);
        int64_t start = now_ms();
        census c;
        int rc = census_take(&c);
        int64_t took = now_ms() - start;
        ck_assert_int_eq(setrlimit(RLIMIT_SIGPENDING, &old), 0);
        ck_assert_int_eq(rc, 0);
        const char *why = "";
        for (size_t i = 0; i < c.n; i++)
            if (c.threads[i].labels == acme)
                why = c.threads[i].missing;
        ck_assert_msg(count_with(&c, acme, reason) == 2,
                      "%zu of 2 running threads with \"%s\"; one has \"%s\"",
                      count_with(&c, acme, reason), reason, why);
        /* No unit to wait for: the 5 s timeout is not waited out. */
        ck_assert_int_lt(took, 2500);
        parked_read = count_with(&c, globex, "") == 1;
        census_release(&c);
        if (!parked_read) {
            struct timespec ms = {0, 10000000};
            nanosleep(&ms, NULL);
        }
    }
    ck_assert(parked_read);
    /* Room for every reason a refused signal can be given, whole. */
    for (int e = 0; e < 4096; e++) {
        char want[256];
        int len = snprintf(want, sizeof want, "signal not sent: %s",
                           strerror(e));
        ck_assert_msg(len < (int)sizeof ((census_thread *)0)->missing,
                      "\"%s\" (%d characters) does not fit", want, len);
    }
    atomic_store(&sp.stop, true);
    for (int i = 0; i < 2; i++)
        pthread_join(spin[i], NULL);
    release_threads(&pg, tg, 1);
    cpprof_labelset_release(acme);
    cpprof_labelset_release(globex);
}
END_TEST

START_TEST(signal_with_another_handler_is_refused)
{
    ck_assert_int_eq(cpprof_set("census_signal", "9"), CPPROF_EVALUE);
    int sig = SIGRTMIN + 7;
    char value[12];
    snprintf(value, sizeof value, "%d", sig);
    signal(sig, someone_elses_handler);
    ck_assert_int_eq(cpprof_set("census_signal", value), 0);
    census c;
    ck_assert_int_eq(census_take(&c), CPPROF_ESIGTAKEN);
    /* Still the application's. */
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    ck_assert_ptr_eq(sa.sa_handler, someone_elses_handler);
}
END_TEST

/* In a chroot without /proc (a daemon's jail), the census and the CPU
 * profile fail with CPPROF_ENOPROC, whose message says why, not a bare
 * "No such file or directory".  In a child of its own, which chroots; it
 * needs the right to chroot (root, as in CI): without it the test says so
 * and checks nothing. */
START_TEST(chroot_without_proc_is_named)
{
    char jail[] = "/tmp/cpprof-jail-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(jail));
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        if (chroot(jail) != 0 || chdir("/") != 0)
            _exit(errno == EPERM ? 77 : 1);
        census c;
        int census_rc = census_take_stacks(&c);
        int profile_rc = cpprof_cpu_profile_start();
        _exit(census_rc == CPPROF_ENOPROC && profile_rc == CPPROF_ENOPROC
                  ? 0
                  : 2);
    }
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    rmdir(jail);
    ck_assert(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        printf("chroot_without_proc_is_named: not checked, chroot refused\n");
        return;
    }
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert(strstr(cpprof_strerror(CPPROF_ENOPROC), "chroot") != NULL);
}
END_TEST

static Suite *census_suite(void)
{
    Suite *s = suite_create("census");
    TCase *tc = tcase_create("census");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, use_census_signal, NULL);
    tcase_add_test(tc, parked_threads_with_labels_and_stacks);
    tcase_add_test(tc, thread_blocking_the_signal_keeps_labels);
    tcase_add_test(tc, thread_in_vfork_given_a_reason_at_once);
    tcase_add_test(tc, exited_leader_given_a_reason);
    tcase_add_test(tc, threads_exiting_during_census);
    tcase_add_test(tc, thread_in_a_gone_ones_place_is_listed);
    tcase_add_test(tc, thousand_threads);
    tcase_add_test(tc, census_stays_within_queued_signal_limit);
    tcase_add_test(tc, signal_with_another_handler_is_refused);
    tcase_add_test(tc, signal_not_sent_reason_is_whole);
    tcase_add_test(tc, moved_or_renamed_thread_is_read_afresh);
    tcase_add_test(tc, chroot_without_proc_is_named);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(census_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
