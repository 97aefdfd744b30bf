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
 * the labels it had before (as cpprof_do, for code that cannot be a
 * callback).  Scopes nest; each must end on the thread that made it, in
 * reverse order, as blocks do. */
class scope {
public:
    explicit scope(const labels &l) : previous_(labels::current())
    {
        labels derived = previous_.merged(l);
        detail::throw_if_failed(
            cpprof_set_thread_labels(derived.native_handle()),
            "cpprof_set_thread_labels");
    }
    ~scope() { cpprof_set_thread_labels(previous_.native_handle()); }
    scope(const scope &) = delete;
    scope &operator=(const scope &) = delete;

private:
    labels previous_;
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
    using Call = detail::do_call<std::remove_reference_t<F>, R>;
    Call call(fn);
    int rc = cpprof_do(nullptr, l.native_handle(),
                       detail::do_trampoline<Call>, &call);
    if (call.thrown)
        std::rethrow_exception(call.thrown);
    detail::throw_if_failed(rc, "cpprof_do");
    if constexpr (!std::is_void_v<R>)
        return std::move(*call.result);
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

#endif /* CPPROF_HPP */
