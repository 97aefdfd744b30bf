/*
 * bench/otel -- what the OpenTelemetry context adds to applying labels.
 *
 *   scoped apply+restore (cpprof_do) with a prebuilt two-label set, ns,
 *   with the context off, then on (cpprof_otel_context_enable), and the
 *   difference
 *
 * Goal (issue 9): at most 5 ns added per scoped apply with the context on;
 * off must cost nothing measurable (compare "off" with bench/labels).
 * The context cannot be switched off again, so each round runs in a child
 * process of its own, alternating off and on rounds: a busy machine then
 * slows both alike, and each figure is the best round (thread CPU time),
 * which drops interruptions rather than averaging them in.
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>

enum { ITERS = 2000000, ROUNDS = 15 };

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void empty_job(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    ++*(volatile long *)arg;
}

static void check(int rc, const char *what)
{
    if (rc) {
        fprintf(stderr, "bench/otel: %s: %s\n", what, cpprof_strerror(rc));
        exit(1);
    }
}

/* Time per scoped apply over ITERS of them. */
static double apply_ns(const cpprof_labelset *set)
{
    volatile long calls = 0;
    double t0 = now_ns();
    for (int i = 0; i < ITERS; i++)
        cpprof_do(NULL, set, empty_job, (void *)&calls);
    return (now_ns() - t0) / ITERS;
}

/* One round in a child process: a scoped apply's time, with the context
 * switched on first when `on`. */
static double round_ns(const cpprof_labelset *set, int on)
{
    int fd[2];
    double ns = -1;
    if (pipe(fd) != 0)
        return -1;
    pid_t child = fork();
    if (child == 0) {
        if (on)
            check(cpprof_otel_context_enable(), "cpprof_otel_context_enable");
        ns = apply_ns(set);
        _exit(write(fd[1], &ns, sizeof ns) == sizeof ns ? 0 : 1);
    }
    close(fd[1]);
    if (child < 0 || read(fd[0], &ns, sizeof ns) != sizeof ns)
        ns = -1;
    close(fd[0]);
    if (child > 0)
        waitpid(child, NULL, 0);
    return ns;
}

static double min(double a, double b) { return a < b ? a : b; }

int main(void)
{
    if (getenv("CPPROF_OTEL_CONTEXT")) {
        fprintf(stderr, "bench/otel: unset CPPROF_OTEL_CONTEXT; the "
                        "benchmark switches the context on itself\n");
        return 2;
    }
    const char *kv[] = {"tenant", "acme", "kind", "reindex"};
    cpprof_labelset *set;
    check(cpprof_labels(&set, 4, kv), "cpprof_labels");
    double off = 1e30, on = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double a = round_ns(set, 0), b = round_ns(set, 1);
        if (a < 0 || b < 0) {
            fprintf(stderr, "bench/otel: a round failed\n");
            return 1;
        }
        off = min(off, a);
        on = min(on, b);
    }
    printf("scoped apply+restore, context off: %.2f ns\n", off);
    printf("scoped apply+restore, context on:  %.2f ns\n", on);
    printf("added by the context: %.2f ns (goal: at most 5)\n", on - off);
    cpprof_labelset_release(set);
    return 0;
}
