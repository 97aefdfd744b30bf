/*
 * task_pool.c -- the program of test/task_pool.sh: a thread pool running
 * three tenants' jobs as tasks (cpprof_task_*) that park on simulated I/O
 * and resume on whichever pool thread is free, with its own truth to hold
 * the profiles to.
 *
 *   task_pool --addr HOST:PORT --profile FILE
 *
 * Jobs: acme 3, globex 4, initech 5, each a task labelled tenant=NAME.  A
 * job's step burns its tenant's cost in CPU (acme 5 ms, globex 10 ms,
 * initech 25 ms) in a function of the tenant's own (work_acme, ...), then
 * parks in await_io ("io"); the I/O thread puts it back on the ready queue
 * 2 to 4 ms later, for any of the WORKERS pool threads.  Each step measures its
 * own CPU with the thread's CPU clock, from just after enter to just
 * before leave, and adds it to its tenant's truth.
 *
 * The run: 1 s to settle, then a CPU profile (cpprof_cpu_profile_start and
 * stop, in the process) of TASK_PROFILE_S seconds, written to FILE, which the
 * truth covers exactly: the pool is held, with no job running, while the
 * profile starts and stops.  Then one line
 *
 *   truth acme=NS globex=NS initech=NS migrations=N
 *
 * (the tenants' CPU in the window; migrations: steps that ran on another
 * thread than the job's step before).  Then the quiet moment: the first
 * job of each tenant is ended, the pool stops taking jobs, and once no job
 * runs, every other one is parked in await_io:
 *
 *   quiet acme=2 globex=3 initech=4
 *
 * The script takes the census then.  SIGTERM (blocked in every thread,
 * taken by main with sigwait) ends the tasks and the run; a task call that
 * fails ends the program at once, saying which (task_run.h).
 */
#define _GNU_SOURCE
#include "task_run.h"

#include <cpprof.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKERS 3
#define IO_NS 2000000

struct job {
    cpprof_task task;
    int tenant;
    pid_t last_thread;
    int64_t due; /* on the I/O list: when it is ready again */
    bool ended;
    struct job *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cv = PTHREAD_COND_INITIALIZER;
static struct job *ready_head, *ready_tail, *io_list;
static bool hold, stopping;
static int running_jobs;
static _Atomic int64_t truth_ns[TASK_TENANTS];
static atomic_long migrations;

/* Under mu. */
static void push_ready(struct job *j)
{
    j->next = NULL;
    if (ready_tail)
        ready_tail->next = j;
    else
        ready_head = j;
    ready_tail = j;
    pthread_cond_broadcast(&ready_cv);
}

/* Where every job parks: the census must show it. */
static __attribute__((noinline)) void await_io(struct job *j)
{
    task_check(cpprof_task_leave(j->task, "io", 0), "leave");
    __asm__ volatile(""); /* not a tail call */
}

static void run_step(struct job *j, pid_t self)
{
    task_check(cpprof_task_enter(j->task), "enter");
    if (j->last_thread && j->last_thread != self)
        atomic_fetch_add(&migrations, 1);
    j->last_thread = self;
    atomic_fetch_add(&truth_ns[j->tenant], task_work(j->tenant));
    await_io(j);
}

static void *pool_main(void *arg)
{
    (void)arg;
    pid_t self = gettid();
    unsigned seed = (unsigned)self;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!stopping && (hold || !ready_head))
            pthread_cond_wait(&ready_cv, &mu);
        if (stopping)
            break;
        struct job *j = ready_head;
        ready_head = j->next;
        if (!ready_head)
            ready_tail = NULL;
        running_jobs++;
        pthread_mutex_unlock(&mu);
        run_step(j, self);
        pthread_mutex_lock(&mu);
        running_jobs--;
        j->due = task_clock_ns(CLOCK_MONOTONIC) + IO_NS + rand_r(&seed) % IO_NS;
        j->next = io_list;
        io_list = j;
        pthread_cond_broadcast(&ready_cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* The simulated I/O: completes due jobs, every half millisecond. */
static void *io_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!stopping) {
        int64_t now = task_clock_ns(CLOCK_MONOTONIC);
        for (struct job **p = &io_list; *p;) {
            struct job *j = *p;
            if (j->due <= now) {
                *p = j->next;
                push_ready(j);
            } else {
                p = &j->next;
            }
        }
        pthread_mutex_unlock(&mu);
        nanosleep(&(struct timespec){0, 500000}, NULL);
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* ---- The run ------------------------------------------------------------- */

/* Holds the pool (true) until no job runs, or lets it go on (false). */
static void hold_pool(bool on)
{
    pthread_mutex_lock(&mu);
    hold = on;
    pthread_cond_broadcast(&ready_cv);
    while (on && running_jobs > 0) {
        pthread_mutex_unlock(&mu);
        usleep(1000);
        pthread_mutex_lock(&mu);
    }
    pthread_mutex_unlock(&mu);
}

static int64_t truth_of(int t) { return atomic_load(&truth_ns[t]); }
static long migrations_so_far(void) { return atomic_load(&migrations); }

/* Ends each tenant's first job, holds the pool and waits until no job
 * runs; prints how many are parked per tenant. */
static void quiet(struct job *jobs, int njobs)
{
    bool first_seen[TASK_TENANTS] = {false};
    int parked[TASK_TENANTS] = {0};
    hold_pool(true);
    pthread_mutex_lock(&mu);
    for (int i = 0; i < njobs; i++) {
        struct job *j = &jobs[i];
        if (!first_seen[j->tenant]) {
            first_seen[j->tenant] = true;
            task_check(cpprof_task_end(j->task), "end");
            j->ended = true;
        } else {
            parked[j->tenant]++;
        }
    }
    pthread_mutex_unlock(&mu);
    task_print_quiet(parked);
}

int main(int argc, char **argv)
{
    const char *path = task_start(argc, argv);
    struct job jobs[3 + 4 + 5];
    int njobs = 0;
    for (int t = 0; t < TASK_TENANTS; t++) {
        const char *kv[] = {"tenant", task_tenant_names[t]};
        cpprof_labelset *set;
        task_check(cpprof_labels(&set, 2, kv), "labels");
        for (int k = 0; k < task_tenant_jobs[t]; k++) {
            struct job *j = &jobs[njobs++];
            *j = (struct job){.tenant = t};
            task_check(cpprof_task_create(&j->task, set), "create");
        }
        cpprof_labelset_release(set);
    }
    pthread_mutex_lock(&mu);
    for (int i = 0; i < njobs; i++)
        push_ready(&jobs[i]);
    pthread_mutex_unlock(&mu);
    pthread_t pool[WORKERS], io;
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&pool[i], NULL, pool_main, NULL);
    pthread_create(&io, NULL, io_main, NULL);

    sleep(1);
    task_profile(path, hold_pool, truth_of, migrations_so_far);
    quiet(jobs, njobs);

    task_await_term();
    pthread_mutex_lock(&mu);
    stopping = true;
    pthread_cond_broadcast(&ready_cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(pool[i], NULL);
    pthread_join(io, NULL);
    for (int i = 0; i < njobs; i++)
        if (!jobs[i].ended)
            task_check(cpprof_task_end(jobs[i].task), "end");
    cpprof_http_stop();
    return 0;
}
