/*
 * task_fiber.cc -- the program of test/task_fiber.sh: test/task_pool.c's run
 * on Boost.Fiber: each job a fiber, run by 4 threads sharing one ready
 * queue (boost::fibers::algo::shared_work) under cpprof::fiber_tasks
 * (include/cpprof_fiber.hpp), so a fiber that sleeps resumes on whichever
 * thread is free, in its task.
 *
 *   task_fiber --addr HOST:PORT --profile FILE
 *
 * Jobs: acme 3, globex 4, initech 5, each launched inside a cpprof::scope
 * tenant=NAME, so its task has its launcher's labels.  A step burns its
 * tenant's cost in CPU (acme 5 ms, globex 10 ms, initech 25 ms) in a
 * function of the tenant's own (work_acme, ...), measured with the
 * thread's CPU clock, then waits in wait_for_io: a 2 to 4 ms sleep named
 * "io" (cpprof::fiber_wait), holding a cpprof::scope step=job across
 * every wait.  Each tenant's first job returns after its
 * first step: its fiber's end ends its task, so the census at the quiet
 * moment, seconds later, must not list it.
 *
 * Output and run as task_pool.c's ("truth ...", "quiet ...").  While the
 * run is held (the profile's start and stop) a step does no work and
 * waits again; at the quiet moment each job stops at its next
 * wait_for_io, asleep for an hour.
 */
#include "task_run.h"

#include <cpprof.hpp>
#include <cpprof_fiber.hpp>

#include <boost/fiber/algo/shared_work.hpp>
#include <boost/fiber/all.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

namespace {

constexpr int THREADS = 4;
constexpr int64_t IO_NS = 2000000;

using scheduler = cpprof::fiber_tasks<boost::fibers::algo::shared_work>;

/* The run's state, shared with the main thread, which is no fiber: a
 * fiber takes mu only briefly and never waits on cv. */
std::mutex mu;
std::condition_variable cv;
bool hold, quieting;
int running_jobs, stopped_jobs, jobs_total;
std::atomic<int64_t> truth_ns[TASK_TENANTS];
std::atomic<long> migrations;

/* Where a job waits, named "io"; at the quiet moment it stops here. */
__attribute__((noinline)) void wait_for_io()
{
    cpprof::fiber_wait io("io");
    bool stop;
    {
        std::lock_guard<std::mutex> l(mu);
        stop = quieting;
        if (stop) {
            stopped_jobs++;
            cv.notify_all();
        }
    }
    if (stop) {
        boost::this_fiber::sleep_for(std::chrono::hours(1));
        return;
    }
    thread_local unsigned seed = unsigned(gettid());
    boost::this_fiber::sleep_for(
        std::chrono::nanoseconds(IO_NS + rand_r(&seed) % IO_NS));
    __asm__ volatile(""); /* not a tail call */
}

/* A job: steps until the quiet moment; a tenant's first job, one step.
 * The scope it holds across every switch goes with its task. */
void job(int tenant, bool first)
{
    cpprof::scope in_job(cpprof::labels{{"step", "job"}});
    pid_t last_thread = 0;
    for (;;) {
        bool work_now;
        {
            std::lock_guard<std::mutex> l(mu);
            work_now = !hold && !quieting;
            if (work_now)
                running_jobs++;
        }
        if (work_now) {
            pid_t self = gettid();
            if (last_thread && last_thread != self)
                migrations++;
            last_thread = self;
            truth_ns[tenant] += task_work(tenant);
            std::lock_guard<std::mutex> l(mu);
            running_jobs--;
            cv.notify_all();
            if (first) {
                jobs_total--;
                return;
            }
        }
        wait_for_io();
    }
}

/* Each thread runs fibers until the process ends; the first launches the
 * jobs, each inside its tenant's scope. */
void run_fibers(bool launcher)
{
    boost::fibers::use_scheduling_algorithm<scheduler>();
    if (launcher)
        for (int t = 0; t < TASK_TENANTS; t++) {
            cpprof::scope s(cpprof::labels{{"tenant", task_tenant_names[t]}});
            for (int k = 0; k < task_tenant_jobs[t]; k++)
                boost::fibers::fiber(job, t, k == 0).detach();
        }
    boost::fibers::mutex never;
    boost::fibers::condition_variable_any until_exit;
    std::unique_lock<boost::fibers::mutex> l(never);
    until_exit.wait(l, [] { return false; });
}

void hold_jobs(bool on)
{
    std::unique_lock<std::mutex> l(mu);
    hold = on;
    cv.wait(l, [on] { return !on || running_jobs == 0; });
}


/* Every job but the ended ones stops at its next wait, parked. */
void quiet()
{
    std::unique_lock<std::mutex> l(mu);
    quieting = true;
    cv.wait(l, [] { return stopped_jobs == jobs_total; });
    int parked[TASK_TENANTS];
    for (int t = 0; t < TASK_TENANTS; t++)
        parked[t] = task_tenant_jobs[t] - 1;
    task_print_quiet(parked);
}

} // namespace

int main(int argc, char **argv)
{
    /* A fiber_wait under Boost.Fiber's own scheduler, where a fiber has
     * no task, names nothing, and neither yields nor crashes. */
    std::thread([] {
        boost::fibers::fiber([] { cpprof::fiber_wait w("io"); }).join();
    }).join();
    const char *path = task_start(argc, argv);
    for (int t = 0; t < TASK_TENANTS; t++)
        jobs_total += task_tenant_jobs[t];
    std::vector<std::thread> threads;
    for (int i = 0; i < THREADS; i++)
        threads.emplace_back(run_fibers, i == 0);
    sleep(1);
    task_profile(
        path, hold_jobs, [](int t) -> int64_t { return truth_ns[t]; },
        [] { return long(migrations); });
    quiet();
    task_await_term();
    cpprof_http_stop();
    /* The fibers sleep for an hour and the threads run them: no join. */
    fflush(stdout);
    _exit(0);
}
