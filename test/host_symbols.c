/*
 * host_symbols -- the program of test/host_symbols.sh, built by it with
 * -rdynamic beside a generated file that defines a function of every
 * name cpprof's libraries call one another by, each of which ends the
 * process when called (host_symbols_called).  Built without cpprof:
 * zero-code mode serves it.
 *
 * Usage: host_symbols SECONDS.  One thread works in host_symbols_burn(),
 * allocating as it goes, a tenth of the time, so that the CPU, heap and
 * trace endpoints have samples to encode and symbolize at little cost to
 * a loaded machine; the program exits after SECONDS.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

/* Called by every generated function: says which, and ends the process,
 * so that the test sees the call in stderr and in every later request. */
void host_symbols_called(const char *name);
void host_symbols_called(const char *name)
{
    static const char said[] = "host_symbols: cpprof called the program's ";
    (void)!write(2, said, sizeof said - 1);
    (void)!write(2, name, strlen(name));
    (void)!write(2, "\n", 1);
    _exit(70);
}

__attribute__((noinline)) static uint64_t host_symbols_burn(uint64_t seed)
{
    for (int i = 0; i < 100000; i++)
        seed = seed * 6364136223846793005u + 1442695040888963407u;
    return seed;
}

int main(int argc, char **argv)
{
    time_t deadline = time(NULL) + (argc > 1 ? atoi(argv[1]) : 10);
    uint64_t seed = 1;
    while (time(NULL) < deadline) {
        char *block = malloc(4096 + seed % 4096);
        memset(block, (int)seed, 64);
        seed = host_symbols_burn(seed + (unsigned char)block[0]);
        free(block);
        sink += seed;
        /* About ten times as long as the burn. */
        nanosleep(&(struct timespec){0, 2000000}, NULL);
    }
    printf("%llu\n", (unsigned long long)sink);
    return 0;
}
