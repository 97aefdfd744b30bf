/*
 * cpprof.hpp -- C++17 on top of cpprof.h, header-only.
 *
 * What a C++ program wants from the C API, without changing what it does:
 *
 *   cpprof::labels     a label set as a value: copying shares the interned
 *                      set (a reference count), never the strings
 *   cpprof::scope      RAII: the thread's labels plus a set until the end
 *                      of the block, then the previous labels again
 *   cpprof::do_        Go's pprof.Do with any callable, capturing lambdas
 *                      included, returning its result
 *   cpprof::thread     std::thread whose thread starts with its creator's
 *                      labels; cpprof::inherit_labels(f) does the same for
 *                      std::thread, std::async or a thread pool's task
 *   cpprof::bind_labels  f wrapped to run under the labels of the code
 *                      that wrapped it, on whichever thread runs it, and
 *                      to give that thread its own back after
 *   cpprof::task       a task (cpprof_task_*) as a move-only value that
 *                      ends it; task::run, RAII: enter now, leave at the
 *                      end of the block; run_in(task, f): f wrapped to run
 *                      in the task on any thread (executors, callbacks)
 *   cpprof::task_promise  (C++20) a coroutine promise's base: the
 *                      coroutine becomes a task, left at every co_await
 *                      and entered again on whichever thread resumes it,
 *                      inline from another task's work included
 *   cpprof::error      std::system_error carrying a cpprof code and
 *                      cpprof_strerror's text; cpprof::category() turns
 *                      any code the C API returns into a std::error_code
 *
 * Nothing throws through C frames: do_'s trampoline catches whatever the
 * callable throws, carries it out of cpprof_do in a std::exception_ptr and
 * rethrows it once cpprof_do has returned and restored the labels.  The one
 * exception let through is glibc's forced unwind (pthread_cancel), which
 * must reach the top of the thread; cpprof_do is built with -fexceptions
 * for it and restores the labels on the way.
 *
 * Build label sets once per class of work and reuse them, as in C: a
 * labels{...} list allocates strings and interns a set, while applying a
 * prebuilt set (scope, do_) allocates nothing but a merge with the
 * thread's current labels when it has some.
 */
#ifndef CPPROF_HPP
#define CPPROF_HPP

#include <cpprof.h>

#include <exception>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>
#if defined(__GLIBCXX__)
#include <cxxabi.h> /* abi::__forced_unwind */
#endif

namespace cpprof {

/* ---- Errors ------------------------------------------------------------- */

/* The category of every code the C API returns (0 or negative): messages
 * are cpprof_strerror's. */
class error_category_impl final : public std::error_category {
public:
    const char *name() const noexcept override { return "cpprof"; }
    std::string message(int code) const override
    {
        return cpprof_strerror(code);
    }
};

inline const std::error_category &category() noexcept
{
    static const error_category_impl instance;
    return instance;
}

/* A failed call: code().value() is the C API's code (CPPROF_EEMPTYKEY,
 * -ENOMEM...), what() names the call and gives cpprof_strerror's text. */
class error : public std::system_error {
public:
    error(int code, const char *call)
        : std::system_error(code, category(), call)
    {
    }
};

namespace detail {
inline void throw_if_failed(int rc, const char *call)
{
    if (rc < 0)
        throw error(rc, call);
}
} // namespace detail

/* ---- Label sets -------------------------------------------------------- */

/* An immutable label set (NULL in C, the empty set, by default).  Copying
 * takes a reference to the same interned set; equal content is the same
 * set, so == compares identity. */
class labels {
public:
    using pair = std::pair<std::string, std::string>;

    labels() noexcept = default;

    /* labels{{"tenant", "acme"}, {"kind", "decode"}}: a later duplicate
     * key wins.  Throws cpprof::error (an empty key: CPPROF_EEMPTYKEY). */
    labels(std::initializer_list<pair> kv) { build(nullptr, kv); }

    labels(const labels &o) noexcept : set_(cpprof_labelset_ref(o.set_)) {}
    labels(labels &&o) noexcept : set_(std::exchange(o.set_, nullptr)) {}
    labels &operator=(labels o) noexcept
    {
        std::swap(set_, o.set_);
        return *this;
    }
    ~labels() { cpprof_labelset_release(set_); }

    /* The calling thread's current labels. */
    static labels current() noexcept { return adopt(cpprof_thread_labels()); }

    /* Takes over a reference the caller owns (from the C API). */
    static labels adopt(cpprof_labelset *set) noexcept
    {
        labels l;
        l.set_ = set;
        return l;
    }

    /* Takes a reference of its own to `set` (which stays the caller's). */
    static labels share(const cpprof_labelset *set) noexcept
    {
        return adopt(cpprof_labelset_ref(set));
    }

    /* This set plus kv (kv's value wins for a key in both). */
    labels with(std::initializer_list<pair> kv) const
    {
        labels out;
        out.build(set_, kv);
        return out;
    }

    /* This set plus every pair of `other` (other's value wins). */
    labels merged(const labels &other) const
    {
        if (other.empty())
            return *this;
        if (empty())
            return other;
        std::vector<const char *> kv;
        kv.reserve(2 * other.size());
        other.for_each([&kv](const char *k, const char *v) {
            kv.push_back(k);
            kv.push_back(v);
        });
        cpprof_labelset *out = nullptr;
        detail::throw_if_failed(
            cpprof_labels_with(&out, set_, kv.size(), kv.data()),
            "cpprof_labels_with");
        return adopt(out);
    }

    /* The value of `key`, valid while this set is; nullopt when absent. */
    std::optional<std::string_view> get(const char *key) const
    {
        const char *value = nullptr;
        bool found = false;
        detail::throw_if_failed(cpprof_label(set_, key, &value, &found),
                                "cpprof_label");
        if (!found)
            return std::nullopt;
        return std::string_view(value);
    }

    std::size_t size() const noexcept { return cpprof_labelset_size(set_); }
    bool empty() const noexcept { return size() == 0; }

    /* Calls f(key, value) for each pair, in key order. */
    template <class F> void for_each(F &&f) const
    {
        auto visit = [](const char *k, const char *v, void *arg) -> bool {
            (*static_cast<std::remove_reference_t<F> *>(arg))(k, v);
            return true;
        };
        cpprof_labels_foreach(set_, visit, &f);
    }

    /* Go's printed form: {"kind":"decode", "tenant":"acme"}. */
    std::string to_string() const
    {
        int n = cpprof_labelset_format(set_, nullptr, 0);
        detail::throw_if_failed(n, "cpprof_labelset_format");
        std::string s(static_cast<std::size_t>(n) + 1, '\0');
        cpprof_labelset_format(set_, s.data(), s.size());
        s.resize(static_cast<std::size_t>(n));
        return s;
    }

    /* The C handle, for calls to cpprof.h (no reference is passed). */
    const cpprof_labelset *native_handle() const noexcept { return set_; }

    friend bool operator==(const labels &a, const labels &b) noexcept
    {
        return a.set_ == b.set_;
    }
    friend bool operator!=(const labels &a, const labels &b) noexcept
    {
        return a.set_ != b.set_;
    }

private:
    void build(const cpprof_labelset *parent, std::initializer_list<pair> kv)
    {
        std::vector<const char *> flat;
        flat.reserve(2 * kv.size());
        for (const pair &p : kv) {
            flat.push_back(p.first.c_str());
            flat.push_back(p.second.c_str());
        }
        detail::throw_if_failed(
            cpprof_labels_with(&set_, parent, flat.size(), flat.data()),
            "cpprof_labels_with");
    }

    cpprof_labelset *set_ = nullptr;
};

/* a + b: b's value wins for a key in both. */
inline labels merge(const labels &a, const labels &b) { return a.merged(b); }

/* ---- Applying labels --------------------------------------------------- */

/* The thread's current labels plus `l` until the scope ends, then exactly
 * the labels it had before (cpprof_scope_begin/end, for code that cannot
 * be a callback).  Scopes nest; each ends in reverse order, in the work
 * it began in: on its thread, or in its task (a scope may span a
 * co_await of a cpprof::task_promise coroutine, whose task carries its
 * labels).  One that ends on another thread outside a task changes no
 * thread's labels and says so on stderr once (cpprof.h). */
class scope {
public:
    /* Inlined always: cpprof_scope_begin learns where the block is on the
     * stack from its caller, to tell when the block's code moves on
     * without ending it (a co_await outside a task). */
    __attribute__((always_inline)) explicit scope(const labels &l)
    {
        detail::throw_if_failed(
            cpprof_scope_begin(&scope_, nullptr, l.native_handle()),
            "cpprof_scope_begin");
    }
    ~scope() { cpprof_scope_end(&scope_); }
    scope(const scope &) = delete;
    scope &operator=(const scope &) = delete;

private:
    cpprof_scope scope_;
};

namespace detail {

/* What do_'s trampoline shares with its caller across cpprof_do: the
 * callable, and what came out of it (a value or an exception). */
template <class F, class R> struct do_call {
    explicit do_call(F &f) : fn(f) {}
    F &fn;
    std::exception_ptr thrown;
    std::optional<R> result;

    void run(const labels &in_force)
    {
        if constexpr (std::is_invocable_v<F &, const labels &>)
            result.emplace(std::invoke(fn, in_force));
        else
            result.emplace(std::invoke(fn));
    }
};

template <class F> struct do_call<F, void> {
    explicit do_call(F &f) : fn(f) {}
    F &fn;
    std::exception_ptr thrown;

    void run(const labels &in_force)
    {
        if constexpr (std::is_invocable_v<F &, const labels &>)
            std::invoke(fn, in_force);
        else
            std::invoke(fn);
    }
};

/* cpprof_do's callback: no exception leaves it but glibc's forced unwind
 * (pthread_cancel), which must go on to the thread's top. */
template <class Call>
void do_trampoline(void *arg, const cpprof_labelset *in_force)
{
    Call *call = static_cast<Call *>(arg);
    try {
        call->run(labels::share(in_force));
    }
#if defined(__GLIBCXX__)
    catch (abi::__forced_unwind &) {
        throw;
    }
#endif
    catch (...) {
        call->thrown = std::current_exception();
    }
}

template <class F>
using do_result_t =
    typename std::conditional_t<std::is_invocable_v<F &, const labels &>,
                                std::invoke_result<F &, const labels &>,
                                std::invoke_result<F &>>::type;

/* do_ and bind_labels: fn under parent plus l (parent nullptr: the
 * thread's current set; CPPROF_BACKGROUND: l alone). */
template <class F, class R>
R do_with(const cpprof_labelset *parent, const labels &l, F &fn)
{
    using Call = do_call<std::remove_reference_t<F>, R>;
    Call call(fn);
    int rc = cpprof_do(parent, l.native_handle(), do_trampoline<Call>, &call);
    if (call.thrown)
        std::rethrow_exception(call.thrown);
    throw_if_failed(rc, "cpprof_do");
    if constexpr (!std::is_void_v<R>)
        return std::move(*call.result);
}

} // namespace detail

/* Go's pprof.Do: runs fn with the thread's labels plus `l`, then restores
 * the previous labels, and returns what fn returned.  fn takes no argument
 * or the labels in force (const cpprof::labels &).  An exception thrown by
 * fn reaches the caller as it was thrown, after the labels are restored.
 * Throws cpprof::error when the labels cannot be applied (fn not run). */
template <class F> auto do_(const labels &l, F &&fn) -> detail::do_result_t<F>
{
    using R = detail::do_result_t<F>;
    static_assert(!std::is_reference_v<R>,
                  "cpprof::do_: return a value or a pointer, not a reference");
    return detail::do_with<F, R>(nullptr, l, fn);
}

/* f wrapped to run with exactly the labels in force where bind_labels was
 * called, whichever thread calls it, and then to give that thread back
 * the labels it had: for work handed to a thread pool, a queue,
 * std::async or a callback, whose thread is not the one that made it.
 *     pool.post(cpprof::bind_labels([req] { handle(req); }));
 * Its arguments are passed on; what f returns, it returns. */
template <class F> auto bind_labels(F &&f)
{
    return [captured = labels::current(),
            fn = std::decay_t<F>(std::forward<F>(f))](auto &&...args) mutable
           -> decltype(auto) {
        auto call = [&]() -> decltype(auto) {
            return std::invoke(fn, std::forward<decltype(args)>(args)...);
        };
        using R = decltype(call());
        static_assert(!std::is_reference_v<R>,
                      "cpprof::bind_labels: return a value, not a reference");
        return detail::do_with<decltype(call), R>(CPPROF_BACKGROUND, captured,
                                                  call);
    };
}

/* ---- Tasks ------------------------------------------------------------- */

/* A task (cpprof.h: labels that follow the work from thread to thread),
 * owned: moving it moves the task, destroying it ends it.  Made with the
 * creator's current labels, as a goroutine, or with a set of its own. */
class task {
public:
    /* Throws cpprof::error (CPPROF_ETASKLIMIT past "tasks_max"). */
    task() { make(nullptr); }
    explicit task(const labels &l) { make(l.native_handle()); }
    task(task &&o) noexcept : t_(std::exchange(o.t_, cpprof_task{0})) {}
    task &operator=(task o) noexcept
    {
        std::swap(t_, o.t_);
        return *this;
    }
    ~task() { end(); }

    /* This thread runs the task from now (its labels the thread's). */
    void enter()
    {
        detail::throw_if_failed(cpprof_task_enter(t_), "cpprof_task_enter");
    }
    /* The task parks, `reason` (a literal: it is kept by address) what it
     * waits for; the thread gets its own labels back. */
    void leave(const char *reason = nullptr, unsigned flags = 0)
    {
        detail::throw_if_failed(cpprof_task_leave(t_, reason, flags),
                                "cpprof_task_leave");
    }
    /* Ends it now (leaving it first when this thread runs it). */
    void end() noexcept
    {
        if (t_.id != 0)
            cpprof_task_end(t_);
        t_ = cpprof_task{0};
    }

    /* RAII: enters the task now and leaves it, with `reason`, at the end
     * of the block, however the block ends.
     *     { auto running = job.task.run("queue"); step(job); } */
    class running {
    public:
        running(const running &) = delete;
        running &operator=(const running &) = delete;
        ~running() { cpprof_task_leave(t_, reason_, 0); }

    private:
        friend class task;
        running(cpprof_task t, const char *reason) : t_(t), reason_(reason)
        {
            detail::throw_if_failed(cpprof_task_enter(t_),
                                    "cpprof_task_enter");
        }
        cpprof_task t_;
        const char *reason_;
    };
    [[nodiscard]] running run(const char *reason = nullptr) const
    {
        return running(t_, reason);
    }

    cpprof_task native_handle() const noexcept { return t_; }
    explicit operator bool() const noexcept { return t_.id != 0; }

private:
    void make(const cpprof_labelset *set)
    {
        detail::throw_if_failed(cpprof_task_create(&t_, set),
                                "cpprof_task_create");
    }
    cpprof_task t_{0};
};

namespace detail {

/* How a piece of work got into its task: whether this call entered it
 * (else the thread ran it already, or it could not be entered), and the
 * task it displaced from the thread, or {0}. */
struct task_entry {
    bool entered;
    cpprof_task displaced;
};

/* Enters t, as cpprof_task_enter, except on a thread that runs another
 * task: work resumed inline by code running in a task of its own (an
 * event's set() resuming its waiters on the setter's thread, a callback
 * an executor runs on the spot) would be refused (CPPROF_ETASKBUSY: tasks
 * do not nest) and run under that task's labels.  So that task is left
 * first ("inline resume", no stack: its code waits below t's on this very
 * stack), and given back (give_back) once t is left or ended, which is
 * when control returns to it. */
inline task_entry enter_displacing(cpprof_task t) noexcept
{
    int rc = cpprof_task_enter(t);
    if (rc != CPPROF_ETASKBUSY)
        return {rc == 0, cpprof_task{0}};
    cpprof_task running = cpprof_task_current();
    if (running.id == t.id)
        return {false, cpprof_task{0}}; /* in it already: its caller's */
    if (cpprof_task_leave(running, "inline resume", CPPROF_TASK_NO_STACK) != 0)
        return {false, cpprof_task{0}};
    if (cpprof_task_enter(t) != 0) { /* t runs elsewhere, or ended */
        cpprof_task_enter(running);
        return {false, cpprof_task{0}};
    }
    return {true, running};
}

/* The thread runs again the task enter_displacing displaced, if any. */
inline void give_back(cpprof_task displaced) noexcept
{
    if (displaced.id != 0)
        cpprof_task_enter(displaced);
}

/* A piece of work in task h, from construction (entry: how it got in,
 * enter_displacing or the like) to destruction: then the task is left
 * with `reason` and `flags` unless the work left or ended it, and the
 * task it displaced is given back. */
class task_run {
public:
    task_run(cpprof_task h, task_entry entry, const char *reason,
             unsigned flags) noexcept
        : h_(h), entry_(entry), reason_(reason), flags_(flags)
    {
    }
    ~task_run()
    {
        if (entry_.entered && cpprof_task_current().id == h_.id)
            cpprof_task_leave(h_, reason_, flags_);
        give_back(entry_.displaced);
    }
    task_run(const task_run &) = delete;
    task_run &operator=(const task_run &) = delete;

private:
    cpprof_task h_;
    task_entry entry_;
    const char *reason_;
    unsigned flags_;
};

} // namespace detail

/* f wrapped to run in task `t` on whichever thread calls it (an executor's
 * pool, an event loop's callback): it enters the task, calls f, and
 * leaves the task with `reason` unless f left it already.  A step that
 * hands the task's next step to another thread (a timer, a queue) leaves
 * the task itself before it does, where it waits (so the census shows
 * that place):
 *     void step(job &j) {
 *         ...work...
 *         j.task.leave("timer");
 *         j.timer.async_wait(cpprof::run_in(j.task, [&j](auto) { step(j); }));
 *     }
 * The task must outlive every call.  Called inline from work in another
 * task (an executor's dispatch on its own thread), it runs f in `t` all
 * the same, that task left meanwhile and entered again after.  When the
 * task cannot be entered (it runs elsewhere, or ended), f runs anyway,
 * under the thread's labels: the work is never lost to its labels. */
template <class F>
auto run_in(const task &t, F &&f, const char *reason = nullptr)
{
    return [h = t.native_handle(), reason,
            fn = std::decay_t<F>(std::forward<F>(f))](auto &&...args) mutable
           -> decltype(auto) {
        detail::task_run in_task(h, detail::enter_displacing(h), reason, 0);
        return std::invoke(fn, std::forward<decltype(args)>(args)...);
    };
}

/* ---- Threads ----------------------------------------------------------- */

/* f wrapped to run with the labels of the thread calling inherit_labels,
 * as a goroutine starts with its creator's:
 *     std::thread t(cpprof::inherit_labels([&] { work(); }));
 * The new thread's labels are set before f runs and are its own from then
 * on (it may change them); they go with it when it exits.  Whether or not
 * the library passes labels to new threads by itself, this says so in the
 * code and works either way. */
template <class F> auto inherit_labels(F &&f)
{
    return [creator = labels::current(),
            fn = std::decay_t<F>(std::forward<F>(f))](auto &&...args) mutable
           -> decltype(auto) {
        cpprof_set_thread_labels(creator.native_handle());
        return std::invoke(fn, std::forward<decltype(args)>(args)...);
    };
}

/* A named region of the calling thread's work in a trace (Go:
 * trace.WithRegion), from construction to destruction. */
class trace_region {
public:
    explicit trace_region(const char *name) : name_(name)
    {
        detail::throw_if_failed(cpprof_trace_region_begin(name),
                                "cpprof_trace_region_begin");
    }
    ~trace_region() { cpprof_trace_region_end(name_); }
    trace_region(const trace_region &) = delete;
    trace_region &operator=(const trace_region &) = delete;

private:
    const char *name_;
};

/* An instant event with a message in a trace (Go: trace.Log). */
inline void trace_log(const char *category, const char *message)
{
    detail::throw_if_failed(cpprof_trace_log(category, message),
                            "cpprof_trace_log");
}

/* std::thread whose thread starts with its creator's labels: everything
 * else (join, detach, arguments copied, std::terminate on an escaping
 * exception) is std::thread's. */
class thread : public std::thread {
public:
    thread() noexcept = default;
    template <class F, class... Args,
              class = std::enable_if_t<
                  !std::is_same_v<std::decay_t<F>, thread>>>
    explicit thread(F &&f, Args &&...args)
        : std::thread(inherit_labels(std::forward<F>(f)),
                      std::forward<Args>(args)...)
    {
    }
};

} // namespace cpprof

#if defined(__cpp_impl_coroutine) && __has_include(<coroutine>)
#include <coroutine>

namespace cpprof {

/* ---- C++20 coroutines ---------------------------------------------------
 *
 * A coroutine type opts in by deriving its promise from task_promise:
 *
 *     struct job {
 *         struct promise_type : cpprof::task_promise {
 *             job get_return_object() { ... }
 *             void return_void() {}
 *             void unhandled_exception() { std::terminate(); }
 *         };
 *         ...
 *     };
 *
 * Each call of such a coroutine is a task made with the caller's labels;
 * its body runs in the task (entered when it first runs, after a lazy
 * start), every co_await in it leaves the task before the awaited thing
 * can resume it elsewhere, and enters it again on the thread that resumes
 * it; the task ends at the final suspend.  Resumed inline by code that
 * runs in a task of its own (an event's set() resuming its waiters on the
 * setter's thread), it takes the thread from that task until it suspends
 * or ends, and gives it back then.  So labels the body applies
 * (cpprof::scope, cpprof::do_) go with it, and the goroutine profile
 * lists the suspended coroutines with their labels, what they wait for
 * ("co_await", or an awaiter's `static constexpr const char
 * *cpprof_wait_reason`) and the stack of the co_await.
 *
 * A promise with an initial_suspend, final_suspend or await_transform of
 * its own hides these: wrap its awaiters with enter_after(a) (its
 * initial), end_before(a) (its final) and leave_around(a) (what its
 * await_transform returns).  The task limit reached, a coroutine runs
 * without a task, as code did before tasks (stderr says so, once). */

namespace detail {

template <class A> decltype(auto) awaiter_of(A &&a)
{
    if constexpr (requires { std::forward<A>(a).operator co_await(); })
        return std::forward<A>(a).operator co_await();
    else if constexpr (requires { operator co_await(std::forward<A>(a)); })
        return operator co_await(std::forward<A>(a));
    else
        return std::forward<A>(a);
}

template <class T> T &as_lvalue(T &&t) noexcept { return t; }

/* An awaiter returned by reference is held by reference (it lives in the
 * co_await's full expression, which the coroutine frame keeps); one made
 * by operator co_await, by value. */
template <class A>
using held_awaiter_t =
    std::conditional_t<std::is_reference_v<decltype(awaiter_of(
                           std::declval<A>()))>,
                       std::remove_reference_t<decltype(awaiter_of(
                           std::declval<A>()))> &,
                       decltype(awaiter_of(std::declval<A>()))>;

template <class W> constexpr const char *wait_reason()
{
    if constexpr (requires { W::cpprof_wait_reason; })
        return W::cpprof_wait_reason;
    else
        return "co_await";
}

/* A coroutine's task and, while a run of it displaced another task from
 * its thread (it was resumed inline, enter_displacing), that task, given
 * back when the run ends at a suspend or the final one.  The promise
 * holds it; its awaiters point to it. */
struct coro_task {
    cpprof_task task{0};
    cpprof_task displaced{0};

    void enter() noexcept
    {
        if (task.id != 0)
            displaced = enter_displacing(task).displaced;
    }
};

/* Leaves the task before the inner awaiter may hand the coroutine to
 * another thread, and enters it again in await_resume, on whichever
 * thread that is; a task the run displaced is given back once the inner
 * awaiter has taken the coroutine, as control then returns to that task's
 * code (or to what inner.await_suspend returns, which enters its own).
 * After inner.await_suspend has returned (and made the coroutine
 * resumable elsewhere) nothing here touches *this, unless it returned
 * false: then this thread resumes the coroutine itself. */
template <class W> struct leaving_awaiter {
    W inner;
    coro_task *run;
    bool left = false;

    bool await_ready() { return inner.await_ready(); }

    template <class P> auto await_suspend(std::coroutine_handle<P> h)
    {
        using R = decltype(inner.await_suspend(h));
        left = cpprof_task_leave(run->task,
                                 wait_reason<std::remove_reference_t<W>>(),
                                 0) == 0;
        cpprof_task displaced = std::exchange(run->displaced, cpprof_task{0});
        try {
            if constexpr (std::is_same_v<R, bool>) {
                if (!inner.await_suspend(h)) {
                    go_on(displaced);
                    return false;
                }
                give_back(displaced);
                return true;
            } else if constexpr (std::is_void_v<R>) {
                inner.await_suspend(h);
                give_back(displaced);
            } else {
                auto next = inner.await_suspend(h);
                give_back(displaced);
                return next;
            }
        } catch (...) {
            go_on(displaced); /* the coroutine goes on here, with the error */
            throw;
        }
    }

    decltype(auto) await_resume()
    {
        if (left)
            run->enter();
        left = false;
        return inner.await_resume();
    }

    /* Not suspended after all: the coroutine's run goes on in its task,
     * the task it displaced still waiting for its end. */
    void go_on(cpprof_task displaced) noexcept
    {
        if (left)
            cpprof_task_enter(run->task);
        left = false;
        run->displaced = displaced;
    }
};

/* The initial suspend: the task entered when the body first runs. */
template <class W> struct entering_awaiter {
    W inner;
    coro_task *run;
    bool await_ready() { return inner.await_ready(); }
    template <class P> decltype(auto) await_suspend(std::coroutine_handle<P> h)
    {
        return inner.await_suspend(h);
    }
    decltype(auto) await_resume()
    {
        run->enter();
        return inner.await_resume();
    }
};

/* The final suspend: the task ended, and the task its last run displaced
 * given back, before whatever the inner awaiter resumes next (the
 * awaiting coroutine, which enters its own). */
template <class W> struct ending_awaiter {
    W inner;
    cpprof_task task, displaced;
    bool await_ready() noexcept
    {
        cpprof_task_end(task);
        give_back(displaced);
        return inner.await_ready();
    }
    template <class P>
    decltype(auto) await_suspend(std::coroutine_handle<P> h) noexcept
    {
        return inner.await_suspend(h);
    }
    decltype(auto) await_resume() noexcept { return inner.await_resume(); }
};

} // namespace detail

class task_promise {
public:
    /* A task with the labels of the code that called the coroutine. */
    task_promise() noexcept
    {
        if (cpprof_task_create(&run_.task, nullptr) != 0)
            run_.task = cpprof_task{0};
    }
    ~task_promise()
    {
        if (run_.task.id != 0)
            cpprof_task_end(run_.task); /* destroyed before its end */
    }
    task_promise(const task_promise &) = delete;
    task_promise &operator=(const task_promise &) = delete;

    template <class A> auto enter_after(A &&a) noexcept
    {
        /* By value: a's temporary ends with the promise's call. */
        using W = std::decay_t<decltype(detail::awaiter_of(std::declval<A>()))>;
        return detail::entering_awaiter<W>{
            detail::awaiter_of(std::forward<A>(a)), &run_};
    }
    template <class A> auto end_before(A &&a) noexcept
    {
        /* By value: a's temporary ends with the promise's call. */
        using W = std::decay_t<decltype(detail::awaiter_of(std::declval<A>()))>;
        cpprof_task t = std::exchange(run_.task, cpprof_task{0});
        cpprof_task d = std::exchange(run_.displaced, cpprof_task{0});
        return detail::ending_awaiter<W>{
            detail::awaiter_of(std::forward<A>(a)), t, d};
    }
    template <class A> auto leave_around(A &&a)
    {
        using W = detail::held_awaiter_t<A &&>;
        if constexpr (std::is_reference_v<W>)
            return detail::leaving_awaiter<W>{
                detail::as_lvalue(detail::awaiter_of(std::forward<A>(a))),
                &run_};
        else
            return detail::leaving_awaiter<W>{
                detail::awaiter_of(std::forward<A>(a)), &run_};
    }

    auto initial_suspend() noexcept { return enter_after(std::suspend_always{}); }
    auto final_suspend() noexcept { return end_before(std::suspend_always{}); }
    template <class A> auto await_transform(A &&a)
    {
        return leave_around(std::forward<A>(a));
    }

    /* The coroutine's task ({0} after its end, or when the limit refused
     * one). */
    cpprof_task native_task() const noexcept { return run_.task; }

private:
    detail::coro_task run_;
};

} // namespace cpprof
#endif /* C++20 coroutines */

#endif /* CPPROF_HPP */
