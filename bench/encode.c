/*
 * bench/encode -- profile size and encode time by number of distinct
 * stacks: N samples, each a different 8-frame stack,
 * through the profile builder (symbolization of every location included,
 * as in a real profile), encoded to gzip'd profile.proto.
 *
 * Stacks are built from 64 program counters inside this program's own
 * code, three varying frames over five fixed ones, so locations stay few
 * while stacks are all distinct, as in a real profile.
 *
 * Usage: encode [N...]   (default 10000 100000); prints per N:
 *   stacks N encode_ms T bytes B
 */
#include "builder.h"
#include "symbolize_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NPCS 64
#define DEPTH 8

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Some code to point into: PCs are spread over its body. */
__attribute__((noinline)) static unsigned long spread(unsigned long x)
{
    for (int i = 0; i < 64; i++)
        x = x * 6364136223846793005ul + (unsigned long)i;
    return x;
}

static int run(size_t n)
{
    uintptr_t base = (uintptr_t)&spread, pcs[DEPTH];
    int64_t one[2] = {1, 10000000};
    builder *b = builder_new();
    if (!b || builder_add_sample_type(b, "samples", "count") ||
        builder_add_sample_type(b, "cpu", "nanoseconds") ||
        builder_set_period(b, "cpu", "nanoseconds", 10000000))
        return -1;
    double t0 = now_ms();
    for (size_t i = 0; i < n; i++) {
        pcs[0] = base + 1 + i % NPCS;
        pcs[1] = base + 1 + i / NPCS % NPCS;
        pcs[2] = base + 1 + i / (NPCS * NPCS) % NPCS;
        for (int d = 3; d < DEPTH; d++)
            pcs[d] = base + 1 + (uintptr_t)d;
        if (builder_add_sample(b, pcs, DEPTH, 0, one, NULL, NULL, 0))
            return -1;
    }
    unsigned char *out;
    size_t len;
    if (symbolize_and_encode(b, &out, &len))
        return -1;
    double t1 = now_ms();
    printf("stacks %zu encode_ms %.1f bytes %zu\n", n, t1 - t0, len);
    free(out);
    builder_free(b);
    return 0;
}

int main(int argc, char **argv)
{
    static const size_t defaults[] = {10000, 100000};
    if (argc < 2) {
        for (size_t i = 0; i < 2; i++)
            if (run(defaults[i]) != 0)
                return 1;
        return 0;
    }
    for (int i = 1; i < argc; i++)
        if (run(strtoul(argv[i], NULL, 10)) != 0)
            return 1;
    return 0;
}
