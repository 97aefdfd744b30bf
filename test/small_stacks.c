/*
 * small_stacks -- a program whose default thread stack is 128 KiB
 * (pthread_setattr_default_np, as `ulimit -s 128` would make it), for
 * test/small_stacks.sh.  Its executable's debug
 * information is, by the script, a separate file with compressed sections
 * found through .gnu_debuglink (and its CRC: no build id), so that every
 * symbolization of its code inflates that file.
 *
 * It creates two threads of its own with the default stack (blocked in
 * read), starts cpprof's server on --addr and says "serving ...", and
 * waits for STOPFILE (the script asks for goroutine profiles meanwhile,
 * symbolized on the server's threads).  Then, on a thread of its own
 * with the default 128 KiB stack, it runs a CPU profile of a busy
 * function of its executable and builds it there
 * (cpprof_cpu_profile_stop symbolizes on the calling thread), and while
 * the profile runs measures, for every thread, the stack left below its
 * stack pointer: the distance from the SP in /proc/self/task/TID/syscall
 * down to the start of the mapping holding it (the guard page below
 * ends it).  Prints one line per thread,
 *     stack NAME OWNER KIB
 * (OWNER "program" or "cpprof") and exits 0 when each of cpprof's threads
 * has more than the program's 128 KiB default left, 1 otherwise (2 when
 * it cannot run the test).
 *
 * Usage: small_stacks --addr HOST:PORT STOPFILE
 */
#define _GNU_SOURCE
#include "cpprof.h"

#include <dirent.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { DEFAULT_STACK = 128 * 1024, NEIGHBOURS = 2 };

static int neighbour_pipe[2];
static pthread_t busy_thread;

static void *neighbour(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "neighbour");
    char c;
    while (read(neighbour_pipe[0], &c, 1) < 0)
        ;
    return NULL;
}

static bool read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    if (ok)
        buf[strcspn(buf, "\n")] = '\0';
    return ok;
}

/* Thread tid's stack pointer while it waits in a system call; 0 while it
 * runs (tried again a while) or when it has gone. */
static uintptr_t blocked_sp(const char *tid)
{
    char path[300], line[256];
    snprintf(path, sizeof path, "/proc/self/task/%s/syscall", tid);
    for (int tries = 0; tries < 400; tries++) {
        if (!read_line(path, line, sizeof line))
            return 0;
        unsigned long sp;
        if (sscanf(line, "%*s %*s %*s %*s %*s %*s %*s %lx", &sp) == 1)
            return sp;
        struct timespec pause = {0, 5 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

/* The start of the mapping that holds address a, or 0. */
static uintptr_t mapping_start(uintptr_t a)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return 0;
    char line[512];
    uintptr_t found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= a && a < hi)
            found = lo;
    }
    fclose(f);
    return found;
}

static bool is_programs(const char *tid, const char *name)
{
    return strcmp(name, "neighbour") == 0 || strcmp(name, "busy") == 0 ||
           atoi(tid) == getpid();
}

/* Prints every thread's stack left below its SP; false when one of
 * cpprof's has no more than the program's default. */
static bool stacks_are_cpprofs_own(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return false;
    bool ok = true;
    int cpprofs = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == gettid())
            continue;
        char path[300], name[32];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        uintptr_t sp = blocked_sp(e->d_name), lo = sp ? mapping_start(sp) : 0;
        if (!read_line(path, name, sizeof name) || !lo)
            continue; /* gone, or running all along: not judged */
        bool programs = is_programs(e->d_name, name);
        size_t kib = (sp - lo) / 1024;
        printf("stack %s %s %zu\n", name, programs ? "program" : "cpprof", kib);
        if (!programs) {
            cpprofs++;
            ok &= kib * 1024 > DEFAULT_STACK;
        }
    }
    closedir(d);
    return ok && cpprofs > 0;
}

/* Busy in this executable's code for 300 ms of CPU time. */
static __attribute__((noinline)) uint64_t small_stacks_burn(void)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    uint64_t x = 1;
    do {
        for (int i = 0; i < 100000; i++)
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) <
             300 * 1000000L);
    return x;
}

/* On a thread with the default stack: a CPU profile built here. */
static void *profile_here(void *arg)
{
    int *status = arg;
    pthread_setname_np(pthread_self(), "busy");
    int rc = cpprof_cpu_profile_start();
    if (rc != 0) {
        printf("cpu profile: %s\n", cpprof_strerror(rc));
        *status = 2;
        return NULL;
    }
    bool own = stacks_are_cpprofs_own();
    volatile uint64_t sink = small_stacks_burn();
    (void)sink;
    unsigned char *buf = NULL;
    size_t len = 0;
    rc = cpprof_cpu_profile_stop(&buf, &len);
    printf("cpu profile: %s, %zu bytes, built on a %d KiB stack\n",
           cpprof_strerror(rc), len, DEFAULT_STACK / 1024);
    free(buf);
    *status = rc != 0 ? 2 : own ? 0 : 1;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: small_stacks --addr HOST:PORT STOPFILE\n");
        return 2;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, DEFAULT_STACK);
    if (pthread_setattr_default_np(&attr) != 0 || pipe(neighbour_pipe) != 0)
        return perror("small_stacks"), 2;
    pthread_t n[NEIGHBOURS];
    for (int i = 0; i < NEIGHBOURS; i++)
        if (pthread_create(&n[i], NULL, neighbour, NULL) != 0)
            return 2;
    int rc = cpprof_http_start(argv[2]);
    if (rc != 0) {
        fprintf(stderr, "cpprof_http_start: %s\n", cpprof_strerror(rc));
        return 2;
    }
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);
    for (int i = 0; i < 6000 && access(argv[3], F_OK) != 0; i++) {
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    int status = 2;
    if (pthread_create(&busy_thread, NULL, profile_here, &status) != 0)
        return 2;
    pthread_join(busy_thread, NULL);
    close(neighbour_pipe[1]);
    for (int i = 0; i < NEIGHBOURS; i++)
        pthread_join(n[i], NULL);
    cpprof_http_stop();
    printf("status %d\n", status);
    return status;
}
