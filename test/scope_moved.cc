/*
 * scope_moved.cc -- the program of test/scope_moved.sh: a label scope held
 * across a co_await in a coroutine that is not a task, so that its code
 * moves on: cpprof must say so when it sees that, not only at the scope's
 * end, and name the threads.
 *
 *   scope_moved STDERR-FILE
 *
 * Thread A takes a CPU profile and runs job(), which applies
 * cpprof::scope tenant=acme, works 100 ms in it (nothing may be said
 * then: "early=0") and suspends; A then works on (spin(), its
 * stack above the suspended block's), reading STDERR-FILE (the program's
 * own stderr) until cpprof's line about a scope whose code moved on
 * appears, at most 5 s.  Thread B then resumes job(), whose scope ends on
 * B.  Prints "threads a=TID b=TID", "seen_ms=N" (-1: never) and
 * "early=0|1".
 */
#include <cpprof.hpp>

#include <coroutine>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

namespace {

/* A coroutine that is no task: its promise does not derive from
 * cpprof::task_promise. */
struct plain {
    struct promise_type {
        plain get_return_object() { return {}; }
        std::suspend_never initial_suspend() noexcept { return {}; }
        std::suspend_never final_suspend() noexcept { return {}; }
        void return_void() {}
        void unhandled_exception() { std::terminate(); }
    };
};

std::coroutine_handle<> waiting;
const char *stderr_path;
bool said_early;

struct park {
    bool await_ready() { return false; }
    void await_suspend(std::coroutine_handle<> h) { waiting = h; }
    void await_resume() {}
};

bool said(const char *path);
void spin(int64_t ms);

/* While its block runs, on A, nothing is said; once it has suspended,
 * A's stack is above the block. */
plain job()
{
    cpprof::scope in_tenant(cpprof::labels{{"tenant", "acme"}});
    spin(100);
    said_early = said(stderr_path);
    co_await park{};
}

int64_t now_ms()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return int64_t(t.tv_sec) * 1000 + t.tv_nsec / 1000000;
}

/* Whether `path` holds cpprof's line about a scope whose code moved on. */
bool said(const char *path)
{
    char buf[8192];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strstr(buf, "the code that began it has moved on") != nullptr;
}

volatile unsigned long sink;

/* CPU in this very frame, for the sampler to find the thread above the
 * suspended block. */
__attribute__((noinline)) void spin(int64_t ms)
{
    int64_t end = now_ms() + ms;
    unsigned long x = sink;
    while (now_ms() < end)
        for (int i = 0; i < 100000; i++)
            x = x * 6364136223846793005u + 1;
    sink = x;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: scope_moved STDERR-FILE\n");
        return 2;
    }
    if (cpprof_set("cpu_hz", "1000") != 0 || cpprof_cpu_profile_start() != 0) {
        fprintf(stderr, "scope_moved: no CPU profile\n");
        return 1;
    }
    stderr_path = argv[1];
    pid_t a = gettid();
    job();
    int64_t suspended = now_ms(), seen = -1;
    while (seen < 0 && now_ms() - suspended < 5000) {
        spin(10);
        if (said(argv[1]))
            seen = now_ms() - suspended;
    }
    pid_t b = 0;
    std::thread([&b] {
        b = gettid();
        waiting.resume();
    }).join();
    unsigned char *buf;
    size_t len;
    if (cpprof_cpu_profile_stop(&buf, &len) == 0)
        free(buf);
    printf("threads a=%d b=%d\nseen_ms=%lld\nearly=%d\n", int(a), int(b),
           (long long)seen, int(said_early));
    return 0;
}
