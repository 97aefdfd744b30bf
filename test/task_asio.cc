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
constexpr int PROFILE_S = 8;
constexpr int64_t IO_NS = 2000000;
constexpr int NTENANTS = 3;
const char *const tenant_names[NTENANTS] = {"acme", "globex", "initech"};
const int tenant_jobs[NTENANTS] = {3, 4, 5};
const int64_t tenant_cost_ns[NTENANTS] = {5000000, 10000000, 25000000};

int64_t clock_of(clockid_t c)
{
    timespec t;
    clock_gettime(c, &t);
    return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

struct job {
    job(asio::io_context &ioc, int t)
        : task(cpprof::labels{{"tenant", tenant_names[t]}}), tenant(t),
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
std::atomic<int64_t> truth_ns[NTENANTS];
std::atomic<long> migrations;
std::atomic<int> failures;

thread_local volatile uint64_t sink;

void spin(int64_t ns)
{
    int64_t end = clock_of(CLOCK_THREAD_CPUTIME_ID) + ns;
    uint64_t x = sink;
    do
        for (int i = 0; i < 20000; i++)
            x = x * 6364136223846793005u + 1442695040888963407u;
    while (clock_of(CLOCK_THREAD_CPUTIME_ID) < end);
    sink = x;
}

#define WORK(name, tag)                                                   \
    __attribute__((noinline)) void name(int64_t ns)                       \
    {                                                                     \
        spin(ns);                                                         \
        sink = sink + tag;                                                \
        __asm__ volatile("" ::: "memory");                                \
    }
WORK(work_acme, 1)
WORK(work_globex, 2)
WORK(work_initech, 3)
void (*const work[NTENANTS])(int64_t) = {work_acme, work_globex, work_initech};

void step(job &j);

/* Where a job waits: it leaves its task first, before the timer can
 * hand the next step to another thread (the census finds it here); at
 * the quiet moment it stops here, parked, with no timer. */
__attribute__((noinline)) void wait_for_io(job &j)
{
    if (cpprof_task_leave(j.task.native_handle(), "io", 0) != 0)
        failures++;
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
        int64_t start = clock_of(CLOCK_THREAD_CPUTIME_ID);
        if (j.last_thread && j.last_thread != self)
            migrations++;
        j.last_thread = self;
        work[j.tenant](tenant_cost_ns[j.tenant]);
        truth_ns[j.tenant] += clock_of(CLOCK_THREAD_CPUTIME_ID) - start;
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

void profile(const char *path)
{
    int64_t before[NTENANTS], after[NTENANTS];
    hold_jobs(true);
    int rc = cpprof_cpu_profile_start();
    for (int t = 0; t < NTENANTS; t++)
        before[t] = truth_ns[t];
    long moved = migrations;
    hold_jobs(false);
    sleep(PROFILE_S);
    hold_jobs(true);
    for (int t = 0; t < NTENANTS; t++)
        after[t] = truth_ns[t];
    unsigned char *buf = nullptr;
    size_t len = 0;
    if (rc == 0)
        rc = cpprof_cpu_profile_stop(&buf, &len);
    hold_jobs(false);
    FILE *f = std::fopen(path, "wb");
    if (rc != 0 || !f || std::fwrite(buf, 1, len, f) != len ||
        std::fclose(f) != 0) {
        std::fprintf(stderr, "task_asio: the profile: %s\n",
                     rc ? cpprof_strerror(rc) : std::strerror(errno));
        std::exit(1);
    }
    std::free(buf);
    std::printf("truth");
    for (int t = 0; t < NTENANTS; t++)
        std::printf(" %s=%lld", tenant_names[t],
                    (long long)(after[t] - before[t]));
    std::printf(" migrations=%ld\n", migrations - moved);
    std::fflush(stdout);
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
    bool first_seen[NTENANTS] = {false, false, false};
    int parked[NTENANTS] = {0, 0, 0};
    for (auto &j : jobs) {
        if (first_seen[j->tenant]) {
            parked[j->tenant]++;
            continue;
        }
        first_seen[j->tenant] = true;
        j->task.end();
    }
    std::printf("quiet");
    for (int t = 0; t < NTENANTS; t++)
        std::printf(" %s=%d", tenant_names[t], parked[t]);
    std::printf("\n");
    std::fflush(stdout);
}

} // namespace

int main(int argc, char **argv)
{
    const char *addr = nullptr, *path = nullptr;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (std::strcmp(argv[i], "--addr") == 0)
            addr = argv[i + 1];
        else if (std::strcmp(argv[i], "--profile") == 0)
            path = argv[i + 1];
    }
    if (!addr || !path) {
        std::fprintf(stderr, "usage: task_asio --addr HOST:PORT --profile FILE\n");
        return 2;
    }
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, nullptr);
    int rc = cpprof_set("cpu_hz", "1000");
    if (rc == 0)
        rc = cpprof_http_start(addr);
    if (rc != 0) {
        std::fprintf(stderr, "task_asio: %s\n", cpprof_strerror(rc));
        return 1;
    }
    std::printf("serving http://%s/debug/pprof/\n", addr);
    std::fflush(stdout);

    asio::io_context ioc;
    auto guard = asio::make_work_guard(ioc);
    std::vector<std::unique_ptr<job>> jobs;
    for (int t = 0; t < NTENANTS; t++)
        for (int k = 0; k < tenant_jobs[t]; k++)
            jobs.push_back(std::make_unique<job>(ioc, t));
    for (auto &j : jobs) {
        job *p = j.get();
        asio::post(ioc, cpprof::run_in(p->task, [p] { step(*p); }));
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < THREADS; i++)
        threads.emplace_back([&ioc] { ioc.run(); });

    sleep(1);
    profile(path);
    quiet(jobs);

    int sig;
    sigwait(&term, &sig);
    guard.reset();
    ioc.stop();
    for (std::thread &t : threads)
        t.join();
    return failures ? 1 : 0;
}
