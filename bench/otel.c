/*
 * bench/otel -- what the OpenTelemetry context adds to applying labels.
 *
 *   scoped apply+restore (cpprof_do) with a prebuilt two-label set, ns,
 *   with the context off, then on (cpprof_otel_context_enable), and the
 *   difference
 *
 * Goal: at most 5 ns added per scoped apply with the context on;
 * off must cost nothing measurable (compare "off" with bench/labels).
 * The context cannot be switched off again, so the two are compared in
 * child processes, round by round (bench.h).
 */
#define _GNU_SOURCE
#include "bench.h"

enum { ITERS = 2000000, ROUNDS = 15 };

static double apply_ns(void *set)
{
    return bench_apply_ns(set, bench_empty_job, ITERS);
}

int main(void)
{
    if (getenv("CPPROF_OTEL_CONTEXT")) {
        fprintf(stderr, "bench/otel: unset CPPROF_OTEL_CONTEXT; the "
                        "benchmark switches the context on itself\n");
        return 2;
    }
    const char *kv[] = {"tenant", "acme", "kind", "reindex"};
    cpprof_labelset *set;
    bench_check(cpprof_labels(&set, 4, kv), "cpprof_labels");
    double off, on;
    bench_off_on(cpprof_otel_context_enable, ROUNDS, apply_ns, set, &off,
                 &on);
    printf("scoped apply+restore, context off: %.2f ns\n", off);
    printf("scoped apply+restore, context on:  %.2f ns\n", on);
    printf("added by the context: %.2f ns (goal: at most 5)\n", on - off);
    cpprof_labelset_release(set);
    return 0;
}
