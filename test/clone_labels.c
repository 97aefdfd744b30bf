/*
 * clone_labels.c -- a CPU sample's labels are the
 * sampled thread's, also for threads made with raw clone(2).
 *
 * Two threads made with clone(CLONE_THREAD | CLONE_VM | ...) without
 * CLONE_SETTLS share their creator's thread pointer, and so every
 * thread-local variable of it.  They never set labels (the census shows
 * them unlabelled); the creator holds tenant=main and spins too.  A CPU
 * profile taken meanwhile is read by google/pprof's parser (test/gocheck
 * -chain): no sample whose stack holds clone_spin may carry tenant=main,
 * clone_spin's samples must be there (unlabelled), and main_spin's must
 * carry tenant=main (the control).  The sampler finds the clone threads
 * by listing /proc/self/task, so the window lasts until each clone thread
 * has used CLONE_CPU_NS of CPU.  The clone threads call nothing (glibc's
 * clone ends them with the exit system call), since every libc call would
 * use their creator's thread-local state.  Not under TSan: its
 * instrumentation of clone_spin would share the creator's thread state
 * with both clone threads (77).
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NCLONES 2
#define CLONE_STACK (64 << 10)
#define CLONE_CPU_NS 1500000000L
#define MAX_WALL_NS 120000000000L

static atomic_int stop, running;
static char stacks[NCLONES][CLONE_STACK] __attribute__((aligned(16)));
static volatile unsigned long sink;

static int64_t clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* A thread's CPU clock by its id (the kernel's encoding of a per-thread
 * CPU-time clock, as glibc's pthread_getcpuclockid makes it). */
static clockid_t thread_clock(pid_t tid)
{
    return (clockid_t)((~(unsigned)tid << 3) | 6);
}

__attribute__((noinline)) static int clone_spin(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop))
        for (int i = 0; i < 100000; i++)
            sink += (unsigned long)i;
    atomic_fetch_sub(&running, 1);
    return 0;
}

__attribute__((noinline)) static void main_spin(const pid_t *tids)
{
    int64_t give_up = clock_ns(CLOCK_MONOTONIC) + MAX_WALL_NS;
    for (;;) {
        for (int i = 0; i < 100000; i++)
            sink += (unsigned long)i;
        int done = 0;
        for (int c = 0; c < NCLONES; c++)
            done += clock_ns(thread_clock(tids[c])) >= CLONE_CPU_NS;
        if (done == NCLONES || clock_ns(CLOCK_MONOTONIC) > give_up)
            return;
    }
}

/* gocheck -chain PATTERN -where WHERE FILE: the sum of samples of those
 * with label WHERE whose stack holds PATTERN; -1 if it failed. */
static long chain_samples(const char *path, const char *pattern,
                          const char *where)
{
    char cmd[400], line[512];
    snprintf(cmd, sizeof cmd, "%s -chain '%s' -where '%s' %s", GOCHECK,
             pattern, where, path);
    FILE *out = popen(cmd, "r");
    long judged = 0, complete = -1;
    while (out && fgets(line, sizeof line, out))
        sscanf(line, "chain judged %ld complete %ld", &judged, &complete);
    int status = out ? pclose(out) : -1;
    printf("clone_labels: %s with %s: %ld samples\n", pattern, where,
           complete);
    return status == 0 ? complete : -1;
}

static int validate(const unsigned char *gz, size_t len)
{
    char path[] = "/tmp/clone_labels.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, gz, len) != (ssize_t)len)
        return 1;
    close(fd);
    long wrong = chain_samples(path, "clone_spin", "tenant=main");
    long unlabelled = chain_samples(path, "clone_spin", "!tenant");
    long control = chain_samples(path, "main_spin", "tenant=main");
    unlink(path);
    return wrong == 0 && unlabelled > 0 && control > 0 ? 0 : 1;
}

#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

int main(void)
{
#ifdef UNDER_TSAN
    puts("clone_labels: not under TSan (its per-thread state is in TLS)");
    return 77;
#endif
    static const char *const kv[] = {"tenant", "main"};
    cpprof_labelset *set;
    if (cpprof_labels(&set, 2, kv) != 0 || cpprof_set_thread_labels(set) != 0)
        return 1;
    cpprof_labelset_release(set);
    if (cpprof_set("cpu_hz", "250") != 0 || cpprof_cpu_profile_start() != 0) {
        fputs("clone_labels: cannot start the profile\n", stderr);
        return 1;
    }
    pid_t tids[NCLONES];
    int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
                CLONE_THREAD | CLONE_SYSVSEM;
    atomic_store(&running, NCLONES);
    for (int c = 0; c < NCLONES; c++) {
        tids[c] = clone(clone_spin, stacks[c] + CLONE_STACK, flags, NULL);
        if (tids[c] < 0) {
            perror("clone_labels: clone");
            return 1;
        }
    }
    main_spin(tids);
    unsigned char *gz;
    size_t len;
    int rc = cpprof_cpu_profile_stop(&gz, &len);
    atomic_store(&stop, 1);
    while (atomic_load(&running) > 0)
        sched_yield();
    if (rc != 0)
        return 1;
    rc = validate(gz, len);
    free(gz);
    return rc;
}
