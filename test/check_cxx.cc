/*
 * check_cxx.cc -- include/cpprof.hpp, each piece against what the C API
 * then reports: label values, copies sharing one set, merging, errors as
 * exceptions and error codes, cpprof::scope, cpprof::do_ with capturing
 * lambdas (a result returned, an exception arriving intact with the
 * previous labels restored, pthread_cancel unwinding through it),
 * cpprof::thread and inherit_labels, cpprof::trace_region and
 * cpprof::trace_log (found in the flight recorder's snapshot: the program
 * runs itself again with CPPROF_TRACE_FLIGHT_SECONDS set).
 *
 * Built as a user's C++17 program is (-std=c++17 -Wall -Wextra -Werror,
 * the installed-shape library); plain checks rather than Check, which is a
 * C framework.  Each failed check prints its line and the run fails.
 */
#include <cpprof.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <pthread.h>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <unistd.h>

static int failures;

#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,    \
                         __LINE__, #cond);                                 \
            failures++;                                                    \
        }                                                                  \
    } while (0)

/* The calling thread's value of `key` as the C API sees it ("" if none). */
static std::string thread_label(const char *key)
{
    cpprof_labelset *set = cpprof_thread_labels();
    const char *value = nullptr;
    bool found = false;
    cpprof_label(set, key, &value, &found);
    std::string out = found ? value : "";
    cpprof_labelset_release(set);
    return out;
}

static void test_labels_value()
{
    cpprof::labels l{{"tenant", "acme"}, {"kind", "decode"}};
    CHECK(l.size() == 2);
    CHECK(l.get("tenant") == std::string_view("acme"));
    CHECK(!l.get("region").has_value());
    CHECK(l.to_string() == "{\"kind\":\"decode\", \"tenant\":\"acme\"}");

    cpprof::labels copy = l;
    CHECK(copy.native_handle() == l.native_handle());
    cpprof::labels same{{"kind", "decode"}, {"tenant", "acme"}};
    CHECK(same == l); /* interned: equal content, one set */
    cpprof::labels moved = std::move(copy);
    CHECK(moved == l);
    CHECK(copy.empty() && copy.native_handle() == nullptr);

    cpprof::labels later{{"k", "first"}, {"k", "second"}};
    CHECK(later.get("k") == std::string_view("second"));
    CHECK(cpprof::labels{}.to_string() == "{}");
}

static void test_merge()
{
    cpprof::labels a{{"tenant", "acme"}, {"kind", "decode"}};
    cpprof::labels b{{"kind", "encode"}, {"region", "eu"}};
    cpprof::labels m = cpprof::merge(a, b);
    CHECK(m.size() == 3);
    CHECK(m.get("tenant") == std::string_view("acme"));
    CHECK(m.get("kind") == std::string_view("encode"));
    CHECK(m.get("region") == std::string_view("eu"));
    CHECK(a.get("kind") == std::string_view("decode")); /* a unchanged */
    CHECK(cpprof::merge(a, cpprof::labels{}) == a);
    CHECK(cpprof::merge(cpprof::labels{}, b) == b);
    CHECK(a.with({{"kind", "resize"}}).get("kind") ==
          std::string_view("resize"));
}

static void test_errors()
{
    bool thrown = false;
    try {
        cpprof::labels bad{{"", "x"}};
    } catch (const std::system_error &e) { /* cpprof::error is one */
        thrown = true;
        CHECK(e.code().value() == CPPROF_EEMPTYKEY);
        CHECK(e.code().category() == cpprof::category());
        CHECK(std::strstr(e.what(), "label key is empty") != nullptr);
        CHECK(dynamic_cast<const cpprof::error *>(&e) != nullptr);
    }
    CHECK(thrown);

    std::error_code ec(cpprof_set("no_such_setting", "1"), cpprof::category());
    CHECK(ec.message() == "no such setting");
    CHECK(std::error_code(-EINVAL, cpprof::category()).message() ==
          std::strerror(EINVAL));
}

static void test_trace()
{
    {
        cpprof::trace_region region("cxx-region");
        cpprof::trace_log("cxx-category", "cxx-message");
    }
    bool thrown = false;
    try {
        cpprof::trace_log("cxx-category", nullptr);
    } catch (const cpprof::error &e) {
        thrown = e.code().value() == -EINVAL;
    }
    CHECK(thrown);
    std::FILE *f = std::tmpfile();
    CHECK(f && cpprof_trace_flight_write(fileno(f)) == 0);
    std::string trace;
    char buf[4096];
    size_t n;
    std::rewind(f);
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
        trace.append(buf, n);
    std::fclose(f);
    /* Perfetto's protobuf keeps interned names and annotations as bytes. */
    for (const char *text : {"cxx-region", "cxx-category", "cxx-message"})
        CHECK(trace.find(text) != std::string::npos);
}

static void test_scope()
{
    cpprof::labels outer{{"tenant", "acme"}};
    cpprof::labels inner{{"kind", "decode"}};
    cpprof_set_thread_labels(nullptr);
    {
        cpprof::scope s1(outer);
        CHECK(thread_label("tenant") == "acme");
        {
            cpprof::scope s2(inner);
            CHECK(thread_label("tenant") == "acme"); /* merged, as pprof.Do */
            CHECK(thread_label("kind") == "decode");
        }
        CHECK(thread_label("kind").empty());
        CHECK(cpprof::labels::current() == outer);
    }
    CHECK(cpprof::labels::current().empty());
}

static void test_do()
{
    cpprof::labels job{{"tenant", "initech"}, {"kind", "encode"}};
    int counted = 0;
    std::string seen;
    int result = cpprof::do_(job, [&] {
        counted += 41;
        seen = thread_label("tenant");
        return counted + 1;
    });
    CHECK(result == 42 && counted == 41 && seen == "initech");

    /* The labels in force, passed to a callable that takes them. */
    cpprof::scope outer(cpprof::labels{{"region", "eu"}});
    std::string region, kind;
    cpprof::do_(job, [&](const cpprof::labels &in_force) {
        region = std::string(in_force.get("region").value_or(""));
        kind = std::string(in_force.get("kind").value_or(""));
    });
    CHECK(region == "eu" && kind == "encode");
    CHECK(thread_label("kind").empty() && thread_label("region") == "eu");
}

struct job_failed : std::runtime_error {
    int job;
    job_failed(int j) : std::runtime_error("job failed"), job(j) {}
};

static void test_do_exception()
{
    cpprof::labels before{{"tenant", "acme"}};
    cpprof::labels job{{"tenant", "globex"}};
    cpprof::scope s(before);
    std::string inside;
    bool caught = false;
    try {
        cpprof::do_(job, [&] {
            inside = thread_label("tenant");
            throw job_failed(7);
        });
    } catch (const job_failed &e) { /* its own type, its own fields */
        caught = true;
        CHECK(e.job == 7 && std::string(e.what()) == "job failed");
        CHECK(thread_label("tenant") == "acme"); /* restored before here */
    }
    CHECK(caught && inside == "globex");
    CHECK(cpprof::labels::current() == before);

    caught = false;
    try {
        cpprof::do_(job, [] { throw 42; }); /* not even an exception class */
    } catch (int v) {
        caught = v == 42;
    }
    CHECK(caught && cpprof::labels::current() == before);
}

/* pthread_cancel unwinds through do_'s trampoline and cpprof_do: the
 * trampoline must let glibc's forced unwind go on (swallowing it aborts
 * the process: "FATAL: exception not rethrown"), and the thread ends
 * cancelled. */
static void *cancelled_in_do(void *arg)
{
    cpprof::do_(cpprof::labels{{"kind", "cancelled"}}, [arg] {
        *static_cast<volatile bool *>(arg) = true;
        for (;;)
            pthread_testcancel();
    });
    return nullptr;
}

static void test_do_cancel()
{
    volatile bool started = false;
    pthread_t t;
    CHECK(pthread_create(&t, nullptr, cancelled_in_do,
                         const_cast<bool *>(&started)) == 0);
    while (!started)
        sched_yield();
    CHECK(pthread_cancel(t) == 0);
    void *ret = nullptr;
    CHECK(pthread_join(t, &ret) == 0);
    CHECK(ret == PTHREAD_CANCELED);
}

static void test_threads()
{
    cpprof_set_thread_labels(nullptr);
    cpprof::labels creator{{"tenant", "hooli"}};
    std::string in_thread, in_std_thread, in_async, argument;
    {
        cpprof::scope s(creator);
        cpprof::thread t(
            [&](std::string arg) {
                in_thread = thread_label("tenant");
                argument = arg;
            },
            std::string("passed"));
        std::thread st(cpprof::inherit_labels(
            [&] { in_std_thread = thread_label("tenant"); }));
        auto fut = std::async(std::launch::async, cpprof::inherit_labels([] {
                                  return thread_label("tenant");
                              }));
        in_async = fut.get();
        t.join();
        st.join();
    }
    CHECK(in_thread == "hooli" && argument == "passed");
    CHECK(in_std_thread == "hooli");
    CHECK(in_async == "hooli");
    CHECK(cpprof::labels::current().empty()); /* creator's scope ended */
}

/* bind_labels: the pool thread runs the job under the labels where it was
 * bound, exactly (not merged with its own), and gets its own back. */
static void test_bind_labels()
{
    cpprof_set_thread_labels(nullptr);
    std::function<std::string(int)> job;
    {
        cpprof::scope s(cpprof::labels{{"tenant", "acme"}});
        job = cpprof::bind_labels([](int n) {
            return thread_label("tenant") + "/" + thread_label("pool") +
                   std::to_string(n);
        });
    }
    std::string seen, after;
    std::thread pool([&] {
        cpprof::scope own(cpprof::labels{{"pool", "worker"}});
        seen = job(7);
        after = thread_label("pool") + thread_label("tenant");
    });
    pool.join();
    CHECK(seen == "acme/7");
    CHECK(after == "worker");
    bool thrown = false;
    try {
        cpprof::bind_labels([]() -> int { throw std::runtime_error("x"); })();
    } catch (const std::runtime_error &) {
        thrown = true;
    }
    CHECK(thrown && cpprof::labels::current().empty());
}

/* cpprof::task: its labels while run() lasts, on any thread; a scope in it
 * goes with it; ends when destroyed (its handle is stale then). */
static void test_task()
{
    cpprof_set_thread_labels(nullptr);
    cpprof::task job(cpprof::labels{{"tenant", "globex"}});
    cpprof_task handle = job.native_handle();
    {
        auto running = job.run("queue");
        CHECK(thread_label("tenant") == "globex");
        CHECK(cpprof_task_current().id == handle.id);
    }
    CHECK(thread_label("tenant").empty());
    std::string there;
    std::thread other([&] {
        auto running = job.run();
        there = thread_label("tenant");
    });
    other.join();
    CHECK(there == "globex");
    bool refused = false;
    try {
        auto running = job.run();
        auto again = job.run(); /* tasks do not nest */
    } catch (const cpprof::error &e) {
        refused = e.code().value() == CPPROF_ETASKBUSY;
    }
    CHECK(refused);
    CHECK(cpprof_task_current().id == 0);
    cpprof::task moved = std::move(job);
    CHECK(!job && moved);
    moved.end();
    CHECK(cpprof_task_enter(handle) == CPPROF_ETASKENDED);
}

/* run_in: f in the task on another thread, left after it (or by f
 * itself); a task that cannot be entered still gets f run; called from
 * work in another task, f runs in its own. */
static void test_run_in()
{
    cpprof_set_thread_labels(nullptr);
    cpprof::task job(cpprof::labels{{"tenant", "initech"}});
    std::string seen;
    int left_by_f = 0;
    auto step = cpprof::run_in(job, [&](int n) {
        seen = thread_label("tenant") + std::to_string(n);
        return n + 1;
    }, "timer");
    auto leaving = cpprof::run_in(job, [&] {
        job.leave("io");
        left_by_f = cpprof_task_current().id == 0;
    });
    int got = 0;
    std::thread other([&] {
        got = step(41);
        leaving();
    });
    other.join();
    CHECK(seen == "initech41" && got == 42 && left_by_f == 1);
    CHECK(cpprof_task_current().id == 0);
    std::string elsewhere;
    {
        auto running = job.run();
        std::thread t([&] {
            cpprof::run_in(job, [&] {
                elsewhere = cpprof_task_current().id == 0 ? "ran outside" : "in it";
            })();
        });
        t.join();
    }
    CHECK(elsewhere == "ran outside"); /* run elsewhere: f ran all the same */
    /* Called inline from work in another task (an executor's dispatch on
     * its own thread): f runs in its own task, the other one left
     * meanwhile and run again after; from work in the same task: f runs
     * in it, and the task stays run. */
    cpprof::task outer(cpprof::labels{{"tenant", "umbrella"}});
    std::string inside, back;
    {
        auto running = outer.run();
        cpprof::run_in(job, [&] { inside = thread_label("tenant"); })();
        back = thread_label("tenant");
        CHECK(cpprof_task_current().id == outer.native_handle().id);
    }
    CHECK(inside == "initech" && back == "umbrella");
    {
        auto running = job.run();
        cpprof::run_in(job, [&] { inside = thread_label("tenant") + "!"; })();
        CHECK(cpprof_task_current().id == job.native_handle().id);
    }
    CHECK(inside == "initech!");
}

int main(int argc, char **argv)
{
    (void)argc;
    if (!std::getenv("CPPROF_TRACE_FLIGHT_SECONDS")) {
        setenv("CPPROF_TRACE_FLIGHT_SECONDS", "5", 1);
        execv("/proc/self/exe", argv);
        /* Under qemu-user /proc/self/exe is the emulator's own. */
        std::fprintf(stderr, "check_cxx: cannot run again with the flight "
                             "recorder on (%s): its checks are skipped\n",
                     std::strerror(errno));
        unsetenv("CPPROF_TRACE_FLIGHT_SECONDS");
    }
    test_labels_value();
    test_merge();
    test_errors();
    test_scope();
    test_do();
    test_do_exception();
    test_do_cancel();
    test_threads();
    test_bind_labels();
    test_task();
    test_run_in();
    if (std::getenv("CPPROF_TRACE_FLIGHT_SECONDS"))
        test_trace();
    cpprof_set_thread_labels(nullptr);
    if (failures) {
        std::fprintf(stderr, "check_cxx: %d checks failed\n", failures);
        return 1;
    }
    std::printf("check_cxx: all checks passed\n");
    return 0;
}
