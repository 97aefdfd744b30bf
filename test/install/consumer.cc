/*
 * consumer.cc -- a C++17 program built against an installed cpprof with
 * CMake's find_package(cpprof) and cpprof.hpp (test/install_consumers.sh):
 * a scope guard, a capturing lambda inside do_, and a cpprof::thread that
 * starts with its creator's labels.  Writes a 1-second labelled CPU
 * profile to argv[1]; exits 1 if the thread did not see the labels.
 *
 * Labels: consumer=cxx (the scope) on everything; kind=lambda on the main
 * thread's work, kind=thread on the thread's.
 */
#include <cpprof.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

static double thread_cpu_seconds()
{
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return double(t.tv_sec) + double(t.tv_nsec) / 1e9;
}

static unsigned long spin(double cpu_seconds)
{
    unsigned long sum = 0;
    double start = thread_cpu_seconds();
    while (thread_cpu_seconds() - start < cpu_seconds)
        for (unsigned long i = 0; i < 100000; i++)
            sum += i * i;
    return sum;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: consumer_cxx FILE\n");
        return 2;
    }
    try {
        if (int rc = cpprof_cpu_profile_start(); rc < 0)
            throw cpprof::error(rc, "cpprof_cpu_profile_start");
        std::string seen_in_thread;
        unsigned long work = 0;
        {
            cpprof::scope guard(cpprof::labels{{"consumer", "cxx"}});
            cpprof::thread worker([&] {
                seen_in_thread = std::string(
                    cpprof::labels::current().get("consumer").value_or(""));
                cpprof::do_(cpprof::labels{{"kind", "thread"}},
                            [&] { work += spin(0.5); });
            });
            worker.join();
            work += cpprof::do_(cpprof::labels{{"kind", "lambda"}},
                                [&] { return spin(0.5); });
        }
        unsigned char *buf;
        size_t len;
        if (int rc = cpprof_cpu_profile_stop(&buf, &len); rc < 0)
            throw cpprof::error(rc, "cpprof_cpu_profile_stop");
        std::FILE *f = std::fopen(argv[1], "wb");
        bool written = f != nullptr && std::fwrite(buf, 1, len, f) == len;
        if (f != nullptr && std::fclose(f) != 0)
            written = false;
        std::free(buf);
        if (!written) {
            std::perror(argv[1]);
            return 1;
        }
        if (seen_in_thread != "cxx") {
            std::fprintf(stderr, "consumer_cxx: the thread saw consumer=\"%s\"\n",
                         seen_in_thread.c_str());
            return 1;
        }
        std::printf("consumer_cxx: work %lu\n", work);
    } catch (const cpprof::error &e) {
        std::fprintf(stderr, "consumer_cxx: %s\n", e.what());
        return 1;
    }
    return 0;
}
