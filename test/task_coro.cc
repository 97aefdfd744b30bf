/*
 * task_coro.cc -- the program of test/task_coro.sh: test/task_pool.c's run
 * with C++20 coroutines in place of explicit tasks.  Each job is a
 * coroutine whose promise derives from cpprof::task_promise (include/
 * cpprof.hpp), so the job is a task made with its creator's labels; the
 * job co_awaits simulated I/O, and whichever of the WORKERS pool threads
 * is free resumes it.  Nothing in the job calls the task API.
 *
 *   task_coro --addr HOST:PORT --profile FILE [--inline]
 *
 * Jobs: acme 3, globex 4, initech 5, each created under a cpprof::scope
 * of tenant=NAME.  A step burns its tenant's cost in CPU (acme 5 ms,
 * globex 10 ms, initech 25 ms) in a function of the tenant's own
 * (work_acme, ...) and co_awaits io_wait, whose await_suspend puts the
 * coroutine on the I/O list; the I/O thread makes it ready again 2 to 4
 * ms later.  Each step measures its own CPU with the thread's CPU clock
 * from its resume to its next co_await.  Each job holds a cpprof::scope
 * (step=job) across all its co_awaits, which the task carries along.
 *
 * --inline (test/task_coro_inline.sh): jobs also resume one another on
 * their own threads, as an event's set() resumes its waiters.  A job's
 * steps end in turn in io_wait, in reply_wait (it waits for a reply that
 * another job delivers) and in hand_off (back to the I/O list, handing
 * its thread straight to a job waiting for a reply, by symmetric
 * transfer).  The step after a hand_off begins by delivering the reply
 * awaited longest: the waiting job is resumed there, inline, from the
 * delivering job's body, which runs in its own task; so is the job a
 * hand_off transfers to when its thread is inside such a step (as it is
 * in the step after a reply_wait).  Every reply_wait ends so, unless no
 * job is left to deliver (the I/O thread then readies the waiting ones);
 * the run fails (status 1) if none was resumed inline, or by transfer.
 *
 * Output and run as task_pool.c's ("truth ...", "quiet ..."); a tenant's
 * first job is ended at the quiet moment by destroying its coroutine,
 * parked, which ends its task.
 */
#include "task_run.h"

#include <cpprof.hpp>

#include <atomic>
#include <condition_variable>
#include <coroutine>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include <pthread.h>
#include <unistd.h>

namespace {

constexpr int WORKERS = 3;
constexpr int64_t IO_NS = 2000000;

struct job;

std::mutex mu;
std::condition_variable ready_cv;
std::deque<job *> ready;
std::vector<job *> io_list;
std::vector<job *> awaiting_reply; /* --inline */
bool inline_resumes, hold, stopping;
int running_jobs;
std::atomic<int64_t> truth_ns[TASK_TENANTS];
std::atomic<long> migrations;
/* --inline: jobs resumed inline from a job running in its task, and
 * handed a thread by symmetric transfer. */
std::atomic<long> resumed_inline, transferred;

/* ---- The coroutine type ------------------------------------------------ */

struct coro {
    struct promise_type : cpprof::task_promise {
        coro get_return_object()
        {
            return coro{std::coroutine_handle<promise_type>::from_promise(*this)};
        }
        void return_void() {}
        void unhandled_exception() { std::terminate(); }
    };
    std::coroutine_handle<promise_type> handle;
};

struct job {
    int tenant = 0;
    pid_t last_thread = 0;
    int64_t due = 0;
    std::coroutine_handle<> handle;
    bool ended = false;
};

/* Puts j on the I/O list, due 2 to 4 ms from now.  Under mu. */
void to_io_list(job *j)
{
    thread_local unsigned seed = unsigned(gettid());
    j->due = task_clock_ns(CLOCK_MONOTONIC) + IO_NS + rand_r(&seed) % IO_NS;
    io_list.push_back(j);
}

/* What a job waits for: the I/O thread makes it ready again. */
struct io_wait {
    static constexpr const char *cpprof_wait_reason = "io";
    job *j;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<>) const
    {
        std::lock_guard<std::mutex> l(mu);
        to_io_list(j);
    }
    void await_resume() const noexcept {}
};

/* --inline: a reply another job delivers (deliver_reply), which is I/O
 * to the job that waits. */
struct reply_wait {
    static constexpr const char *cpprof_wait_reason = "io";
    job *j;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<>) const
    {
        std::lock_guard<std::mutex> l(mu);
        awaiting_reply.push_back(j);
    }
    void await_resume() const noexcept {}
};

/* --inline: to the I/O list, this thread going straight on with a job
 * that waits for a reply (symmetric transfer), if one does. */
struct hand_off {
    static constexpr const char *cpprof_wait_reason = "io";
    job *j;
    bool await_ready() const noexcept { return false; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<>) const
    {
        std::lock_guard<std::mutex> l(mu);
        to_io_list(j);
        if (awaiting_reply.empty())
            return std::noop_coroutine();
        job *next = awaiting_reply.back();
        awaiting_reply.pop_back();
        transferred++;
        return next->handle;
    }
    void await_resume() const noexcept {}
};

/* --inline: resumes the job that has waited longest for a reply, here,
 * inline (the others are left for the next steps and hand_offs). */
void deliver_reply()
{
    job *w = nullptr;
    {
        std::lock_guard<std::mutex> l(mu);
        if (awaiting_reply.empty())
            return;
        w = awaiting_reply.front();
        awaiting_reply.erase(awaiting_reply.begin());
    }
    if (cpprof_task_current().id != 0)
        resumed_inline++;
    w->handle.resume();
}

/* The job: its co_await is where the census must find it parked.  The
 * scope it holds across every co_await goes with its task. */
coro run_job(job *j)
{
    cpprof::scope in_job(cpprof::labels{{"step", "job"}});
    for (unsigned step = 0;; step++) {
        if (inline_resumes && step % 3 == 0)
            deliver_reply();
        pid_t self = gettid();
        if (j->last_thread && j->last_thread != self)
            migrations++;
        j->last_thread = self;
        truth_ns[j->tenant] += task_work(j->tenant);
        if (!inline_resumes || step % 3 == 0)
            co_await io_wait{j};
        else if (step % 3 == 1)
            co_await reply_wait{j};
        else
            co_await hand_off{j};
    }
}

void pool_main()
{
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
        ready_cv.wait(l, [] { return stopping || (!hold && !ready.empty()); });
        if (stopping)
            return;
        job *j = ready.front();
        ready.pop_front();
        running_jobs++;
        l.unlock();
        j->handle.resume();
        l.lock();
        running_jobs--;
        ready_cv.notify_all();
    }
}

void io_main()
{
    std::unique_lock<std::mutex> l(mu);
    while (!stopping) {
        /* Replies nobody is left to deliver: the jobs go on without. */
        if (ready.empty() && io_list.empty() && running_jobs == 0) {
            ready.insert(ready.end(), awaiting_reply.begin(),
                         awaiting_reply.end());
            awaiting_reply.clear();
            ready_cv.notify_all();
        }
        int64_t now = task_clock_ns(CLOCK_MONOTONIC);
        for (auto it = io_list.begin(); it != io_list.end();) {
            if ((*it)->due <= now) {
                ready.push_back(*it);
                it = io_list.erase(it);
                ready_cv.notify_all();
            } else {
                ++it;
            }
        }
        l.unlock();
        timespec half_ms{0, 500000};
        nanosleep(&half_ms, nullptr);
        l.lock();
    }
}

/* ---- The run ------------------------------------------------------------- */

/* Holds the pool (true) until no job runs, or lets it go on (false). */
void hold_pool(bool on)
{
    std::unique_lock<std::mutex> l(mu);
    hold = on;
    ready_cv.notify_all();
    ready_cv.wait(l, [on] { return !on || running_jobs == 0; });
}


/* Held pool, no job running: each is parked in io_wait (or reply_wait,
 * hand_off) or ready to resume.  A tenant's first job is destroyed (its task ends); the others
 * are counted. */
void quiet(std::vector<job> &jobs)
{
    bool first_seen[TASK_TENANTS] = {false, false, false};
    int parked[TASK_TENANTS] = {0, 0, 0};
    hold_pool(true);
    std::lock_guard<std::mutex> l(mu);
    for (job &j : jobs) {
        if (first_seen[j.tenant]) {
            parked[j.tenant]++;
            continue;
        }
        first_seen[j.tenant] = true;
        std::erase(ready, &j);
        std::erase(io_list, &j);
        std::erase(awaiting_reply, &j);
        j.handle.destroy();
        j.ended = true;
    }
    task_print_quiet(parked);
}

} // namespace

int main(int argc, char **argv)
{
    const char *path = task_start(argc, argv);
    inline_resumes = std::string_view(argv[argc - 1]) == "--inline";
    std::vector<job> jobs(3 + 4 + 5);
    size_t n = 0;
    for (int t = 0; t < TASK_TENANTS; t++) {
        /* The coroutines take the labels in force where they are made. */
        cpprof::scope tenant(cpprof::labels{{"tenant", task_tenant_names[t]}});
        for (int k = 0; k < task_tenant_jobs[t]; k++) {
            job &j = jobs[n++];
            j.tenant = t;
            j.handle = run_job(&j).handle;
        }
    }
    {
        std::lock_guard<std::mutex> l(mu);
        for (job &j : jobs)
            ready.push_back(&j);
    }
    std::vector<std::thread> pool;
    for (int i = 0; i < WORKERS; i++)
        pool.emplace_back(pool_main);
    std::thread io(io_main);

    sleep(1);
    task_profile(
        path, hold_pool, [](int t) -> int64_t { return truth_ns[t]; },
        [] { return long(migrations); });
    quiet(jobs);

    task_await_term();
    {
        std::lock_guard<std::mutex> l(mu);
        stopping = true;
        ready_cv.notify_all();
    }
    for (std::thread &t : pool)
        t.join();
    io.join();
    for (job &j : jobs)
        if (!j.ended)
            j.handle.destroy();
    cpprof_http_stop();
    if (!inline_resumes)
        return 0;
    printf("inline resumed=%ld transferred=%ld\n", long(resumed_inline),
           long(transferred));
    if (resumed_inline == 0 || transferred == 0) {
        fprintf(stderr, "task_coro: --inline resumed no job inline, or "
                        "none by transfer: the run shows nothing\n");
        return 1;
    }
    return 0;
}
