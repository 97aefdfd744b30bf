/*
 * task_asio.cc -- the program of test/task_asio.sh: test/task_pool.c's run
 * on Boost.Asio: an io_context run by 4 threads, each job a cpprof::task
 * whose steps are handlers, run by whichever thread is free through
 * cpprof::run_in (include/cpprof.hpp).
 *
 *   task_asio --addr HOST:PORT --profile FILE
 *
 * Jobs: acme 3, globex 4, initech 5, each a task labelled tenant=NAME.  A
 * step burns its tenant's cost in CPU (acme 5 ms, globex 10 ms, initech
 * 25 ms) in a function of the tenant's own (work_acme, ...), measured with
 * the thread's CPU clock, then waits in wait_for_io: it leaves the task
 * ("io") and arms the job's steady_timer for 2 to 4 ms, whose handler,
 * wrapped by run_in, is the next step in the task on any of the threads.
 *
 * Output and run as task_pool.c's ("truth ...", "quiet ...").  While the
 * run is held (the profile's start and stop) a step does no work and
 * waits again; at the quiet moment each job stops at its next
 * wait_for_io, parked without a timer, and each tenant's first job is
 * ended.
 */
#include "task_run.h"

#include <cpprof.hpp>

#include <boost/asio.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <unistd.h>

namespace asio = boost::asio;

namespace {

constexpr int THREADS = 4;
constexpr int64_t IO_NS = 2000000;

struct job {
    job(asio::io_context &ioc, int t)
        : task(cpprof::labels{{"tenant", task_tenant_names[t]}}), tenant(t),
          timer(ioc)
    {
    }
    cpprof::task task;
    int tenant;
    asio::steady_timer timer;
    pid_t last_thread = 0;
    bool stopped = false; /* under mu: parked for the quiet moment */
};

std::mutex mu;
std::condition_variable cv;
bool hold, quieting;
int running_jobs, stopped_jobs;
std::atomic<int64_t> truth_ns[TASK_TENANTS];
std::atomic<long> migrations;

void step(job &j);

/* Where a job waits: it leaves its task first, before the timer can
 * hand the next step to another thread (the census finds it here); at
 * the quiet moment it stops here, parked, with no timer. */
__attribute__((noinline)) void wait_for_io(job &j)
{
    task_check(cpprof_task_leave(j.task.native_handle(), "io", 0), "leave");
    {
        std::lock_guard<std::mutex> l(mu);
        if (quieting) {
            j.stopped = true;
            stopped_jobs++;
            cv.notify_all();
            return;
        }
    }
    thread_local unsigned seed = unsigned(gettid());
    j.timer.expires_after(std::chrono::nanoseconds(IO_NS + rand_r(&seed) % IO_NS));
    j.timer.async_wait(cpprof::run_in(j.task, [&j](const boost::system::error_code &ec) {
        if (!ec)
            step(j);
    }));
    __asm__ volatile(""); /* not a tail call */
}

/* One step, run in the job's task: its work, unless the run is held. */
void step(job &j)
{
    bool work_now;
    {
        std::lock_guard<std::mutex> l(mu);
        work_now = !hold && !quieting;
        if (work_now)
            running_jobs++;
    }
    if (work_now) {
        pid_t self = gettid();
        if (j.last_thread && j.last_thread != self)
            migrations++;
        j.last_thread = self;
        truth_ns[j.tenant] += task_work(j.tenant);
        std::lock_guard<std::mutex> l(mu);
        running_jobs--;
        cv.notify_all();
    }
    wait_for_io(j);
}

/* ---- The run ------------------------------------------------------------- */

void hold_jobs(bool on)
{
    std::unique_lock<std::mutex> l(mu);
    hold = on;
    cv.wait(l, [on] { return !on || running_jobs == 0; });
}


/* Every job stops at its next wait, parked; then each tenant's first job
 * ends. */
void quiet(std::vector<std::unique_ptr<job>> &jobs)
{
    {
        std::unique_lock<std::mutex> l(mu);
        quieting = true;
        cv.wait(l, [&jobs] { return stopped_jobs == int(jobs.size()); });
    }
    bool first_seen[TASK_TENANTS] = {false, false, false};
    int parked[TASK_TENANTS] = {0, 0, 0};
    for (auto &j : jobs) {
        if (first_seen[j->tenant]) {
            parked[j->tenant]++;
            continue;
        }
        first_seen[j->tenant] = true;
        j->task.end();
    }
    task_print_quiet(parked);
}

} // namespace

int main(int argc, char **argv)
{
    const char *path = task_start(argc, argv);
    asio::io_context ioc;
    auto guard = asio::make_work_guard(ioc);
    std::vector<std::unique_ptr<job>> jobs;
    for (int t = 0; t < TASK_TENANTS; t++)
        for (int k = 0; k < task_tenant_jobs[t]; k++)
            jobs.push_back(std::make_unique<job>(ioc, t));
    for (auto &j : jobs) {
        job *p = j.get();
        asio::post(ioc, cpprof::run_in(p->task, [p] { step(*p); }));
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < THREADS; i++)
        threads.emplace_back([&ioc] { ioc.run(); });

    sleep(1);
    task_profile(
        path, hold_jobs, [](int t) -> int64_t { return truth_ns[t]; },
        [] { return long(migrations); });
    quiet(jobs);

    task_await_term();
    guard.reset();
    ioc.stop();
    for (std::thread &t : threads)
        t.join();
    cpprof_http_stop();
    return 0;
}
