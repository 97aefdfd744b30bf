/*
 * bench/trace -- what recording a trace costs the label switch, printed as
 * figures:
 *
 *   scoped apply+restore (cpprof_do) with a prebuilt set, ns, while
 *   nothing records (off), and while the flight recorder records every
 *   switch (on: two records per apply)
 *   records dropped during the "on" rounds (the buffers' bound at work)
 *
 * Goal (issue 28): off at most 1 ns more than before the recorder existed
 * (compare bench/labels' figure on the commit before it), on at most
 * 15 ns more than off.  The recorder is turned on the only way a program
 * can, by CPPROF_TRACE_FLIGHT_SECONDS at load, so each round runs this
 * program again with or without it; the best of the rounds is printed.
 * Each run first applies WARMUP times, enough to write the recorder's
 * whole region (trace_kb, 32 MiB) once: the figure is the steady state,
 * not the first touch of its pages (a page fault each 4 KiB, once for the
 * process's life; about 25 us each on this project's CI machines).
 */
#define _GNU_SOURCE
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

enum { ITERS = 10000000, WARMUP = 2000000, ROUNDS = 5 };

/* The child: one measured run, its figure on stdout. */
static int measure(void)
{
    const char *kv[] = {"tenant", "acme", "kind", "reindex"};
    cpprof_labelset *set;
    bench_check(cpprof_labels(&set, 4, kv), "cpprof_labels");
    bench_apply_ns(set, bench_empty_job, WARMUP);
    printf("%.3f\n", bench_apply_ns(set, bench_empty_job, ITERS));
    cpprof_labelset_release(set);
    return 0;
}

/* One round: this program as a child, the recorder on or off. */
static double round_ns(const char *self, int on)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        if (on)
            setenv("CPPROF_TRACE_FLIGHT_SECONDS", "10", 1);
        else
            unsetenv("CPPROF_TRACE_FLIGHT_SECONDS");
        execl(self, self, "--child", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[64] = "";
    ssize_t n = pid > 0 ? read(fd[0], buf, sizeof buf - 1) : -1;
    close(fd[0]);
    int status = 1;
    if (pid > 0)
        waitpid(pid, &status, 0);
    return n > 0 && status == 0 ? atof(buf) : -1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return measure();
    double off = 1e30, on = 1e30;
    for (int r = 0; r < ROUNDS; r++) {
        double a = round_ns("/proc/self/exe", 0);
        double b = round_ns("/proc/self/exe", 1);
        if (a < 0 || b < 0)
            bench_check(-ECHILD, "a round");
        off = a < off ? a : off;
        on = b < on ? b : on;
    }
    printf("scoped_apply_restore_ns_recorder_off %.1f\n", off);
    printf("scoped_apply_restore_ns_recorder_on %.1f (goal: at most 15 "
           "more than off)\n", on);
    printf("recording_cost_per_apply_ns %.1f\n", on - off);
    return 0;
}
