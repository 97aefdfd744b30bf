/*
 * cpprof_asio.hpp -- Boost.Asio's C++20 coroutines (awaitable) followed as
 * tasks: cpprof::co_spawn, a drop-in for boost::asio::co_spawn.
 *
 *     #include <cpprof_asio.hpp>
 *     cpprof::co_spawn(executor, session(std::move(socket)), detached);
 *
 * Same arguments and result as boost::asio::co_spawn (an executor or an
 * execution context; an awaitable, or a function that returns one; any
 * completion token).  The spawned awaitable and every awaitable it
 * co_awaits run as one task (cpprof.hpp), made with the labels in force at
 * the call and ended with the coroutines: a cpprof::scope or cpprof::do_
 * in their code belongs to the task and goes with it across each co_await,
 * whichever thread resumes it; what Asio does for them in the same run
 * once they suspend (the initiation of the operation they wait for:
 * async_write's first send(), a timer's arming) carries the task's labels
 * too; and while they wait the task is parked, listed by the goroutine
 * profile with its labels and pprof_wait=co_await.
 *
 * How: Asio runs all of a spawned coroutine's code -- its own, the
 * coroutines it awaits, the initiations -- in functions submitted to the
 * executor co_spawn is given (the awaitable's executor, this_coro's), and
 * in nothing else.  So co_spawn is given a task_executor: the caller's
 * executor, in a strand of the task's own, with the task's handle; each
 * function it executes runs in the task, left when the function returns
 * (no stack walk: the stack there is Asio's scheduler's, not the
 * coroutine's).  The strand runs the task's functions one at a time, as
 * a task runs on one thread at a time: a completion that comes while the
 * run that started its operation is still returning (an operation that
 * completes at once, on another thread) runs after it, in the task, where
 * it would otherwise find the task busy and run outside it.  Asio never
 * runs one coroutine's functions side by side itself, so this changes
 * nothing for it but the microseconds such a completion waits.
 *
 * A coroutine spawned with boost::asio::co_spawn on the executor of one
 * that cpprof::co_spawn spawned runs in the same task, and so one function
 * at a time with it: spawn each with cpprof::co_spawn, each its own task.
 * cpprof::co_spawn given such an executor spawns on the executor it wraps.
 *
 * Needs an awaitable whose executor is polymorphic (boost::asio::
 * any_io_executor, the default), which holds the wrapper; call it
 * qualified, cpprof::co_spawn (unqualified, argument-dependent lookup
 * also finds Asio's, a better match).  Boost 1.74's Asio (Debian 12).
 */
#ifndef CPPROF_ASIO_HPP
#define CPPROF_ASIO_HPP

#include <cpprof.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/strand.hpp>

#include <optional>
#include <type_traits>
#include <utility>

#if !defined(__cpp_impl_coroutine)
#error "cpprof_asio.hpp: Asio's awaitable needs C++20 coroutines"
#endif

namespace cpprof {

namespace detail {

/* A function submitted to a task_executor: runs in the task, and is
 * destroyed there, run or not (an executor shut down destroys what it
 * did not run): what it holds may be the coroutines' frames, whose end
 * ends their scopes, in the task they began in. */
template <class F> class in_task {
public:
    template <class G>
    in_task(cpprof_task task, G &&fn) : task_(task), fn_(std::forward<G>(fn))
    {
    }
    in_task(in_task &&o) : task_(o.task_), fn_(std::move(o.fn_))
    {
        o.fn_.reset();
    }
    in_task &operator=(in_task &&) = delete;
    ~in_task()
    {
        if (fn_)
            run([] {});
    }

    void operator()()
    {
        run([this] { (*fn_)(); });
    }

private:
    template <class Step> void run(Step step)
    {
        task_run in(task_, enter_displacing(task_), "co_await",
                    CPPROF_TASK_NO_STACK);
        step();
        fn_.reset();
    }

    cpprof_task task_;
    std::optional<F> fn_;
};

/* What boost::asio::co_spawn calls once for the awaitable (the awaitable
 * itself, or the caller's function), and what ends the task: Asio keeps
 * it in the spawn's entry frame, destroyed after the last coroutine. */
template <class Make> struct spawned_in_task {
    Make make;
    cpprof_task task;

    spawned_in_task(Make m, cpprof_task t) : make(std::move(m)), task(t) {}
    spawned_in_task(spawned_in_task &&o) noexcept
        : make(std::move(o.make)), task(std::exchange(o.task, cpprof_task{0}))
    {
    }
    spawned_in_task(const spawned_in_task &) = delete;
    spawned_in_task &operator=(const spawned_in_task &) = delete;
    ~spawned_in_task()
    {
        if (task.id != 0)
            cpprof_task_end(task);
    }

    auto operator()() { return make(); }
};

template <class A> struct awaitable_once {
    A a;
    A operator()() { return std::move(a); }
};

template <class T> struct is_asio_awaitable : std::false_type {};
template <class T, class E>
struct is_asio_awaitable<boost::asio::awaitable<T, E>> : std::true_type {};

template <class E>
constexpr bool is_asio_executor_v = boost::asio::is_executor<E>::value ||
                                    boost::asio::execution::is_executor<E>::value;

template <class C>
constexpr bool is_asio_context_v =
    std::is_convertible_v<C &, boost::asio::execution_context &>;

} // namespace detail

/* An executor that runs every function it is given in a task, one at a
 * time (a strand), on the executor it wraps: what cpprof::co_spawn hands
 * to Asio, and so what this_coro::executor is in the coroutines it
 * spawns.  Properties (blocking, outstanding work, the context...) are
 * the wrapped executor's. */
class task_executor {
public:
    using strand_type = boost::asio::strand<boost::asio::any_io_executor>;

    task_executor(strand_type strand, cpprof_task task) noexcept
        : strand_(std::move(strand)), task_(task)
    {
    }

    /* The executor it wraps. */
    boost::asio::any_io_executor get_inner_executor() const noexcept
    {
        return strand_.get_inner_executor();
    }
    cpprof_task native_task() const noexcept { return task_; }

    template <class P>
        requires boost::asio::can_query<const strand_type &, P>::value
    decltype(auto) query(const P &p) const noexcept(
        boost::asio::is_nothrow_query<const strand_type &, P>::value)
    {
        return boost::asio::query(strand_, p);
    }

    template <class P>
        requires boost::asio::can_require<const strand_type &, P>::value
    task_executor require(const P &p) const
    {
        return task_executor(boost::asio::require(strand_, p), task_);
    }

    template <class P>
        requires boost::asio::can_prefer<const strand_type &, P>::value
    task_executor prefer(const P &p) const
    {
        return task_executor(boost::asio::prefer(strand_, p), task_);
    }

    template <class F> void execute(F &&f) const
    {
        boost::asio::execution::execute(
            strand_,
            detail::in_task<std::decay_t<F>>(task_, std::forward<F>(f)));
    }

    friend bool operator==(const task_executor &a,
                           const task_executor &b) noexcept
    {
        return a.task_.id == b.task_.id && a.strand_ == b.strand_;
    }
    friend bool operator!=(const task_executor &a,
                           const task_executor &b) noexcept
    {
        return !(a == b);
    }

private:
    strand_type strand_;
    cpprof_task task_;
};

namespace detail {

/* What a new task's strand wraps: ex, or the executor ex wraps when it is
 * a task's (this_coro::executor in a spawned coroutine), so that the new
 * task's functions run beside the other task's, not in it. */
template <class Executor>
boost::asio::any_io_executor untasked(const Executor &ex)
{
    boost::asio::any_io_executor any(ex);
    if (const task_executor *t = any.target<task_executor>())
        return t->get_inner_executor();
    return any;
}

/* boost::asio::co_spawn on ex wrapped in a new task's executor, with
 * make (which returns the awaitable) kept with the task.  Asio's first
 * steps of the spawn, here, are the caller's: they only post the start
 * to the executor, which may run it on another thread at once. */
template <class Executor, class Make, class Token>
decltype(auto) spawn_in_task(const Executor &ex, Make &&make, Token &&token)
{
    using awaitable_type = std::invoke_result_t<std::decay_t<Make> &>;
    static_assert(
        std::is_constructible_v<typename awaitable_type::executor_type,
                                task_executor>,
        "cpprof::co_spawn: the awaitable's executor must hold any executor "
        "(boost::asio::any_io_executor, awaitable's default)");
    cpprof_task t{0};
    if (cpprof_task_create(&t, nullptr) != 0)
        t = cpprof_task{0}; /* the limit: it runs as before, untracked */
    return boost::asio::co_spawn(
        task_executor(task_executor::strand_type(untasked(ex)), t),
        spawned_in_task<std::decay_t<Make>>(std::forward<Make>(make), t),
        std::forward<Token>(token));
}

} // namespace detail

/* boost::asio::co_spawn's four forms, each run as a task (above). */

template <class Executor, class T, class AwaitableExecutor,
          class Token = typename boost::asio::default_completion_token<
              Executor>::type>
    requires(detail::is_asio_executor_v<Executor>)
decltype(auto) co_spawn(const Executor &ex,
                        boost::asio::awaitable<T, AwaitableExecutor> a,
                        Token &&token = Token())
{
    return detail::spawn_in_task(
        ex,
        detail::awaitable_once<boost::asio::awaitable<T, AwaitableExecutor>>{
            std::move(a)},
        std::forward<Token>(token));
}

template <class Context, class T, class AwaitableExecutor,
          class Token = typename boost::asio::default_completion_token<
              typename Context::executor_type>::type>
    requires(detail::is_asio_context_v<Context>)
decltype(auto) co_spawn(Context &ctx,
                        boost::asio::awaitable<T, AwaitableExecutor> a,
                        Token &&token = Token())
{
    return cpprof::co_spawn(ctx.get_executor(), std::move(a),
                            std::forward<Token>(token));
}

template <class Executor, class F,
          class Token = typename boost::asio::default_completion_token<
              Executor>::type>
    requires(detail::is_asio_executor_v<Executor> &&
             !detail::is_asio_awaitable<std::decay_t<F>>::value &&
             detail::is_asio_awaitable<
                 std::invoke_result_t<std::decay_t<F> &>>::value)
decltype(auto) co_spawn(const Executor &ex, F &&f, Token &&token = Token())
{
    return detail::spawn_in_task(ex, std::forward<F>(f),
                                 std::forward<Token>(token));
}

template <class Context, class F,
          class Token = typename boost::asio::default_completion_token<
              typename Context::executor_type>::type>
    requires(detail::is_asio_context_v<Context> &&
             !detail::is_asio_awaitable<std::decay_t<F>>::value &&
             detail::is_asio_awaitable<
                 std::invoke_result_t<std::decay_t<F> &>>::value)
decltype(auto) co_spawn(Context &ctx, F &&f, Token &&token = Token())
{
    return cpprof::co_spawn(ctx.get_executor(), std::forward<F>(f),
                            std::forward<Token>(token));
}

} // namespace cpprof

#endif /* CPPROF_ASIO_HPP */
