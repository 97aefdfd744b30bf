// stress_throw.cc -- C++ exceptions for stress_sampler.c: the unwinder that
// runs a throw takes the loader lock (dl_iterate_phdr), the lock a
// profiling signal handler must never wait for, so the stress test throws
// all the time while it is sampled at 1000 Hz.
#include <stdexcept>

__attribute__((noinline)) static int throw_at(int depth)
{
    if (depth == 0)
        throw std::runtime_error("stress");
    return throw_at(depth - 1) + 1;
}

// Throws through `depth` frames and catches; returns 1 when caught.
extern "C" int stress_throw_catch(int depth)
{
    try {
        return throw_at(depth);
    } catch (const std::runtime_error &) {
        return 1;
    }
}
