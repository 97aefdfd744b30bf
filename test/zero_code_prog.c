/*
 * zero_code_prog -- a program that has never heard of cpprof, for
 * test/zero_code.sh: it is built without cpprof's header or library, and
 * the test runs it with LD_PRELOAD=libcpprof.so CPPROF_HTTP=... to check
 * that every profile is served from outside.
 *
 * Usage: zero_code_prog SECONDS.  Two threads burn CPU in
 * zero_code_burn(), allocating as they go, and contend for one mutex, so
 * the CPU, heap, allocs, mutex, block and threadcreate profiles all have
 * something to show; the program exits after SECONDS.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t shared = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t sink;
static time_t deadline;

__attribute__((noinline)) static uint64_t zero_code_burn(uint64_t seed)
{
    for (int i = 0; i < 200000; i++)
        seed = seed * 6364136223846793005u + 1442695040888963407u;
    return seed;
}

static void *worker(void *arg)
{
    uint64_t seed = (uintptr_t)arg;
    while (time(NULL) < deadline) {
        char *block = malloc(4096 + seed % 4096);
        memset(block, (int)seed, 64);
        pthread_mutex_lock(&shared);
        seed = zero_code_burn(seed + (unsigned char)block[0]);
        sink += seed;
        pthread_mutex_unlock(&shared);
        free(block);
        seed = zero_code_burn(seed);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t threads[2];
    deadline = time(NULL) + (argc > 1 ? atoi(argv[1]) : 10);
    for (uintptr_t i = 0; i < 2; i++)
        if (pthread_create(&threads[i], NULL, worker, (void *)(i + 1)) != 0)
            return 1;
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    printf("%llu\n", (unsigned long long)sink);
    return 0;
}
