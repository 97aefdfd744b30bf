/*
 * cpprof_fiber.hpp -- Boost.Fiber fibers as cpprof tasks (C++17, header
 * only; needs Boost.Fiber, Debian's libboost-fiber-dev).
 *
 * A fiber is a goroutine in all but name: work that parks without a
 * thread and resumes on whichever thread its scheduler picks.  Labels kept
 * on the thread would stay behind at every switch (the next fiber would
 * run under them), so each fiber is a task (cpprof.h, cpprof_task_*):
 *
 *     boost::fibers::use_scheduling_algorithm<
 *         cpprof::fiber_tasks<boost::fibers::algo::shared_work>>();
 *
 * on every thread that runs fibers, with the algorithm it would have used
 * (round_robin, shared_work, work_stealing: fiber_tasks passes its own
 * constructor's arguments on; test/task_fiber.sh runs shared_work, the
 * others are untried).  Then:
 *   - each fiber is a task made with the labels of the code that launched
 *     it (as a goroutine inherits its creator's) and ended with the fiber;
 *   - the task is entered on the thread the scheduler resumes the fiber on
 *     and left when the fiber suspends, so labels the fiber applies
 *     (cpprof::scope, cpprof_do) go with it, also across a switch;
 *   - the goroutine profile lists the suspended fibers with their labels,
 *     the stack where they suspended and what they wait for: "fiber", or
 *     what a cpprof::fiber_wait in force names ("io", "queue").
 * The switch is seen where the scheduler picks the next fiber
 * (pick_next), so a fiber launched with launch::dispatch, which starts at
 * once without a pick, runs under its launcher's task until it first
 * suspends: keep the default, launch::post.
 */
#ifndef CPPROF_FIBER_HPP
#define CPPROF_FIBER_HPP

#include <cpprof.h>

#include <boost/fiber/algo/algorithm.hpp>
#include <boost/fiber/context.hpp>
#include <boost/fiber/operations.hpp>
#include <boost/fiber/properties.hpp>

#include <chrono>
#include <utility>

namespace cpprof {

/* A fiber's task, as the fiber's Boost.Fiber properties. */
class fiber_task : public boost::fibers::fiber_properties {
public:
    explicit fiber_task(boost::fibers::context *ctx)
        : fiber_properties(ctx)
    {
        /* The thread's main fiber and the scheduler's own are the thread
         * itself: no task. */
        if (ctx->is_context(boost::fibers::type::worker_context) &&
            cpprof_task_create(&task_, nullptr) != 0)
            task_ = cpprof_task{0}; /* the limit reached: stderr said so */
    }
    ~fiber_task() override
    {
        if (task_.id != 0)
            cpprof_task_end(task_);
    }
    fiber_task(const fiber_task &) = delete;
    fiber_task &operator=(const fiber_task &) = delete;

    cpprof_task native_handle() const noexcept { return task_; }
    const char *wait_reason = "fiber";

private:
    cpprof_task task_{0};
};

/* Names what the calling fiber waits for while it is in force: its
 * suspensions in that time are parked with `reason` (a string that
 * outlives them, such as a literal) instead of "fiber".  In a fiber
 * that no fiber_tasks scheduler runs it does nothing. */
class fiber_wait {
public:
    explicit fiber_wait(const char *reason)
        : task_(active_task()),
          previous_(task_ ? std::exchange(task_->wait_reason, reason)
                          : nullptr)
    {
    }
    ~fiber_wait()
    {
        if (task_)
            task_->wait_reason = previous_;
    }
    fiber_wait(const fiber_wait &) = delete;
    fiber_wait &operator=(const fiber_wait &) = delete;

private:
    /* The running fiber's task, or nullptr where it has none: under a
     * scheduler that is not fiber_tasks (Boost.Fiber's own, or one of the
     * program's), and in a thread's main fiber before it first yields.
     * Then the wait names nothing.  Not this_fiber::properties, which
     * there yields the fiber and then dereferences a null pointer, or
     * throws std::bad_cast. */
    static fiber_task *active_task()
    {
        boost::fibers::context *ctx = boost::fibers::context::active();
        return ctx ? dynamic_cast<fiber_task *>(ctx->get_properties())
                   : nullptr;
    }
    fiber_task *task_;
    const char *previous_;
};

/* Algo (a Boost.Fiber scheduling algorithm) with each fiber run in its
 * task: Algo chooses, this enters and leaves. */
template <class Algo>
class fiber_tasks
    : public boost::fibers::algo::algorithm_with_properties<fiber_task> {
public:
    template <class... Args>
    explicit fiber_tasks(Args &&...args) : algo_(std::forward<Args>(args)...)
    {
    }

    void awakened(boost::fibers::context *ctx, fiber_task &) noexcept override
    {
        algo_.awakened(ctx);
    }

    /* The switch: the fiber that suspends (whose stack this runs on)
     * leaves its task, with its stack, before Algo can hand it to another
     * thread; the one picked enters its own here, on the thread that runs
     * it next. */
    boost::fibers::context *pick_next() noexcept override
    {
        if (running_) {
            cpprof_task_leave(running_->native_handle(), running_->wait_reason,
                              0);
            running_ = nullptr;
        }
        boost::fibers::context *next = algo_.pick_next();
        if (next) {
            auto *t = static_cast<fiber_task *>(get_properties(next));
            if (t && t->native_handle().id != 0 &&
                cpprof_task_enter(t->native_handle()) == 0)
                running_ = t;
        }
        return next;
    }

    bool has_ready_fibers() const noexcept override
    {
        return algo_.has_ready_fibers();
    }
    void suspend_until(
        std::chrono::steady_clock::time_point const &t) noexcept override
    {
        algo_.suspend_until(t);
    }
    void notify() noexcept override { algo_.notify(); }

private:
    Algo algo_;
    fiber_task *running_ = nullptr; /* the task entered on this thread */
};

} // namespace cpprof

#endif
