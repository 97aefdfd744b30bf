/*
 * bench/census_floor -- the least a census of new blocked threads can cost
 * per thread on this kernel, without cpprof: the system calls that the
 * walk of one thread from outside cannot do without, each timed alone.
 *
 * A thread blocked in the kernel tells its user SP and PC only through
 * /proc/self/task/TID/syscall (there is no other interface short of
 * ptrace, which cannot trace a thread of its own process), its stack can
 * be read without risking a fault only through process_vm_readv, and
 * only its CPU clock, read before and after, proves it held still
 * meanwhile.  The thread list comes from /proc/self/task.  So per thread:
 * a share of getdents, clock_gettime, openat + pread + close of the
 * syscall file, process_vm_readv of its stack, clock_gettime.  This
 * program starts BATCHES batches of NTHREADS new threads parked in a pipe
 * read (as bench/census does), does exactly that for every thread of each
 * batch once (new threads: the kernel builds their /proc entries on
 * first use, as it does for a census), and prints the mean microseconds
 * of each call per thread (wall time around each call: the calls are
 * all in the kernel, on the CPU) and their sum, those of the batch with
 * the least sum (other work on the machine only adds to a batch: the
 * least is the floor), then the median and largest sums:
 *
 *   floor 1000 threads us/thread getdents 2.9 clock 0.7 openat 6.4 pread 3.5 close 1.7 vm_readv_8k 4.7 vm_readv_1k 2.9 clock 0.5 sum 19.7 (batches: median 20.6 max 20.9)
 *
 * vm_readv_1k is a second, 1 KB read of the same stack, for comparison
 * (not in the sum): what a smaller first read would save.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 1000
#define BATCHES 5

enum step { GETDENTS, CLOCK1, OPENAT, PREAD, CLOSE, VM8K, VM1K, CLOCK2,
            STEPS };
static const char *const step_names[STEPS] = {
    "getdents", "clock", "openat", "pread", "close", "vm_readv_8k",
    "vm_readv_1k", "clock"};

static int pipe_fds[2];
static atomic_int parked;

static void *park(void *arg)
{
    (void)arg;
    char c;
    atomic_fetch_add(&parked, 1);
    while (read(pipe_fds[0], &c, 1) > 0)
        ;
    return NULL;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* The thread's CPU clock, as the census reads it (thread.h). */
static void read_cpu_clock(pid_t tid)
{
    clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 6);
    struct timespec t;
    clock_gettime(clock, &t);
}

/* The user SP: the next-to-last field of "NR ARGS... SP PC". */
static uintptr_t sp_from(const char *text)
{
    const char *last = strrchr(text, ' ');
    if (!last)
        return 0;
    const char *p = last;
    while (p > text && p[-1] != ' ')
        p--;
    return (uintptr_t)strtoull(p, NULL, 16);
}

static void copy_stack(uintptr_t sp, size_t len)
{
    static char copy[8192];
    struct iovec local = {copy, len}, remote = {(void *)(sp & ~7ul), len};
    syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0);
}

/* Adds the microseconds of each step for one thread to sum[]. */
static void walk_one(int task_fd, pid_t tid, double sum[STEPS])
{
    char path[32], text[200];
    snprintf(path, sizeof path, "%d/syscall", (int)tid);
    double t0 = now_us();
    read_cpu_clock(tid);
    double t1 = now_us();
    int fd = openat(task_fd, path, O_RDONLY | O_CLOEXEC);
    double t2 = now_us();
    ssize_t n = fd < 0 ? -1 : pread(fd, text, sizeof text - 1, 0);
    double t3 = now_us();
    if (fd >= 0)
        close(fd);
    double t4 = now_us();
    text[n > 0 ? n : 0] = '\0';
    uintptr_t sp = sp_from(text);
    copy_stack(sp, 8192);
    double t5 = now_us();
    copy_stack(sp, 1024);
    double t6 = now_us();
    read_cpu_clock(tid);
    double t7 = now_us();
    sum[CLOCK1] += t1 - t0;
    sum[OPENAT] += t2 - t1;
    sum[PREAD] += t3 - t2;
    sum[CLOSE] += t4 - t3;
    sum[VM8K] += t5 - t4;
    sum[VM1K] += t6 - t5;
    sum[CLOCK2] += t7 - t6;
}

/* One batch of new threads: lists them, walks each once.  Returns the sum
 * of the per-thread steps (vm_readv_1k left out), per[] per thread. */
static double measure_batch(double per[STEPS])
{
    pthread_t t[NTHREADS];
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    atomic_store(&parked, 0);
    if (pipe(pipe_fds) != 0)
        exit(1);
    for (int i = 0; i < NTHREADS; i++)
        if (pthread_create(&t[i], &attr, park, NULL) != 0)
            exit(1);
    while (atomic_load(&parked) < NTHREADS)
        sched_yield();
    struct timespec settle = {0, 20000000}; /* into their read */
    nanosleep(&settle, NULL);

    double sum[STEPS] = {0};
    static pid_t tids[NTHREADS + 8];
    size_t n = 0;
    double t0 = now_us();
    DIR *dir = opendir("/proc/self/task");
    struct dirent *d;
    while (dir && (d = readdir(dir)) != NULL)
        if (atoi(d->d_name) > 0 && n < NTHREADS + 8)
            tids[n++] = (pid_t)atoi(d->d_name);
    sum[GETDENTS] = now_us() - t0;
    size_t walked = 0;
    for (size_t i = 0; i < n; i++)
        if (tids[i] != gettid()) {
            walk_one(dirfd(dir), tids[i], sum);
            walked++;
        }
    closedir(dir);

    close(pipe_fds[1]);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    close(pipe_fds[0]);
    double total = 0;
    for (int s = 0; s < STEPS; s++) {
        per[s] = sum[s] / (double)walked;
        if (s != VM1K)
            total += per[s];
    }
    return total;
}

int main(void)
{
    double per[BATCHES][STEPS], total[BATCHES];
    int order[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        total[b] = measure_batch(per[b]);
        order[b] = b;
    }
    /* The batches by their sums. */
    for (int i = 1; i < BATCHES; i++)
        for (int j = i; j > 0 && total[order[j]] < total[order[j - 1]]; j--) {
            int k = order[j];
            order[j] = order[j - 1];
            order[j - 1] = k;
        }
    int least = order[0];
    printf("floor %d threads us/thread", NTHREADS);
    for (int s = 0; s < STEPS; s++)
        printf(" %s %.1f", step_names[s], per[least][s]);
    printf(" sum %.1f (batches: median %.1f max %.1f)\n", total[least],
           total[order[BATCHES / 2]], total[order[BATCHES - 1]]);
    return 0;
}
