// chains_cxx.cc -- workload (d) of test/chains.c: C++17 built without frame
// pointers, the shapes a C++ program's profile must walk through:
//   d_sort   chain_d1 -> chain_d2<Item> (a template) -> std::sort, its
//            internals inlined into one another, with a comparator that is
//            itself hot and inlined into them;
//   d_throw  chain_dt1 -> chain_dt2<uint64_t> (catches) -> chain_dt3 -> chain_dt4
//            (throws): samples inside libstdc++'s and libgcc's unwinder,
//            which runs on top of the throwing frames.
// Names are distinct (chain_d*, chain_dt*) so a test can ask for each.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace {

struct Item {
    uint64_t key;
    uint64_t payload[3];
};

// The comparator's work: a few rounds of mixing per comparison, so that
// sort's time is spent in code inlined into std::sort's internals.
inline uint64_t weight(const Item &it)
{
    uint64_t h = it.key;
    for (int i = 0; i < 32; i++)
        h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9u;
    return h;
}

template <typename T> struct ByWeight {
    bool operator()(const T &a, const T &b) const { return weight(a) < weight(b); }
};

// "+ 1" after each call in this file: a tail call would take the caller's
// frame off the stack and out of the known chain.
template <typename T>
__attribute__((noipa)) uint64_t chain_d2(std::vector<T> &v)
{
    std::sort(v.begin(), v.end(), ByWeight<T>());
    return v.front().key + 1;
}

__attribute__((noipa)) void chain_dt4(int depth)
{
    if (depth == 0)
        throw std::runtime_error("chains");
}

__attribute__((noipa)) int chain_dt3(int depth)
{
    chain_dt4(depth);
    return depth + 1;
}

template <typename T> __attribute__((noipa)) T chain_dt2(T rounds)
{
    T caught = 0;
    for (T i = 0; i < rounds; i++) {
        try {
            chain_dt3(0);
        } catch (const std::runtime_error &) {
            caught++;
        }
    }
    return caught + 1;
}

} // namespace

// Sorts 100,000 items once, from a fresh pseudo-random order.  The vector
// is kept between calls: allocating it anew each time would spend a share
// of the profiled time in page faults outside std::sort.
extern "C" __attribute__((noipa)) uint64_t chain_d1()
{
    static thread_local std::vector<Item> v(100000);
    uint64_t x = 88172645463325252u;
    for (auto &it : v) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        it.key = x;
    }
    return chain_d2(v) + 1;
}

// Throws and catches 1,000 times.
extern "C" __attribute__((noipa)) uint64_t chain_dt1()
{
    return chain_dt2<uint64_t>(1000) + 1;
}
