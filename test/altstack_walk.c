/*
 * altstack_walk.c -- the CPU profile's signal handler
 * must not run off the bottom of a small sigaltstack.
 *
 * A thread runs its own SIGUSR1 handler on an 8 KB sigaltstack
 * (SA_ONSTACK), keeping 1.5 KB on it while it spins for about 1 ms, over
 * and over, while a CPU profile runs at 1000 Hz.  The profiling signal
 * arrives mostly inside that handler and nests on the same altstack (a
 * signal that interrupts code on the altstack stays on it, SA_ONSTACK or
 * not): two kernel frames (AT_MINSIGSTKSZ each at most) and the 1.5 KB
 * leave too little for the walk.  The altstack has an inaccessible page
 * below it, so a handler that runs past its bottom dies of SIGSEGV there
 * rather than writing over whatever lies below.  cpprof must refuse those
 * walks and count them: the profile (read by google/pprof's parser,
 * test/gocheck) carries a cpprof.unsampled.stackTooShort pseudo-sample
 * with more than zero samples, and the process lives.  Where two of the
 * kernel's signal frames (measured: a probe signal's handler on the
 * altstack sees how far below its top it runs; AT_MINSIGSTKSZ is an upper
 * bound, 3,376 bytes where the frames take 2,950) and the 1.5 KB do not
 * fit in 8 KB at all, the kernel itself would kill the program on any
 * nested signal, which no handler can prevent: skipped (77).
 * Not under TSan either (77): its runtime runs an asynchronous signal's
 * handler later, at its next interceptor or safe point, rather than
 * nested on the altstack inside the program's handler.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define ALTSTACK (8 << 10)
#define KEEP 1536           /* what the program's handler keeps on it */
#define HANDLER_NS 1000000L /* its CPU time per call */
#define CALLS 3000          /* about 3 s of CPU in the handler */

static atomic_long calls;
static long spins_per_call = 1 << 20; /* then about HANDLER_NS of CPU */
static uintptr_t alt_top;
static volatile uintptr_t frame_bytes; /* the probe's depth on the altstack */

static int64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The program's handler: 1.5 KB in use on the altstack for 1 ms of CPU.
 * It calls nothing, so that its stack use is its frame in every build (a
 * sanitizer's clock_gettime interceptor would add frames of its own). */
static void on_usr1(int sig)
{
    (void)sig;
    volatile unsigned char keep[KEEP];
    for (long i = 0; i < spins_per_call; i++)
        keep[i % KEEP] = (unsigned char)i;
    (void)keep[0];
    atomic_fetch_add(&calls, 1);
}

/* Sets spins_per_call for about HANDLER_NS of CPU per call. */
static void calibrate(void)
{
    int64_t start = thread_cpu_ns();
    on_usr1(0);
    int64_t took = thread_cpu_ns() - start;
    spins_per_call = (long)((double)spins_per_call * HANDLER_NS /
                            (double)(took > 0 ? took : 1)) + 1;
    atomic_store(&calls, 0);
}

/* The probe: how much of the altstack the kernel's frame took. */
static void on_usr2(int sig)
{
    (void)sig;
    frame_bytes = alt_top - (uintptr_t)__builtin_frame_address(0);
}

/* An 8 KB altstack with an inaccessible page below it. */
static int use_altstack(void)
{
    long page = sysconf(_SC_PAGESIZE);
    char *m = mmap(NULL, page + ALTSTACK, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m, page, PROT_NONE) != 0)
        return -1;
    stack_t ss = {.ss_sp = m + page, .ss_size = ALTSTACK};
    alt_top = (uintptr_t)m + page + ALTSTACK;
    return sigaltstack(&ss, NULL);
}

static void *signalled(void *arg)
{
    (void)arg;
    if (use_altstack() != 0) {
        perror("altstack_walk: sigaltstack");
        exit(1);
    }
    calibrate();
    pthread_kill(pthread_self(), SIGUSR2);
    if (2 * frame_bytes + KEEP > ALTSTACK) {
        printf("altstack_walk: two signal frames (%lu bytes each) and %d "
               "bytes do not fit in %d: the kernel would kill the program "
               "on a nested signal, cpprof or not\n",
               (unsigned long)frame_bytes, KEEP, ALTSTACK);
        exit(77);
    }
    printf("altstack_walk: signal frame %lu bytes (AT_MINSIGSTKSZ %lu)\n",
           (unsigned long)frame_bytes, getauxval(AT_MINSIGSTKSZ));
    while (atomic_load(&calls) < CALLS)
        pthread_kill(pthread_self(), SIGUSR1);
    return NULL;
}

/* The sum of the samples under the stackTooShort pseudo-frame, by
 * google/pprof's parser; -1 when it rejects the profile. */
static long refusals(const unsigned char *gz, size_t len)
{
    char path[] = "/tmp/altstack_walk.XXXXXX", cmd[300], line[512];
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, gz, len) != (ssize_t)len)
        return -1;
    close(fd);
    snprintf(cmd, sizeof cmd,
             "%s -chain 'cpprof\\.unsampled\\.stackTooShort.*' %s", GOCHECK,
             path);
    FILE *out = popen(cmd, "r");
    long judged = 0, complete = -1, total = 0;
    while (out && fgets(line, sizeof line, out)) {
        fputs(line, stdout);
        sscanf(line, "chain judged %ld complete %ld", &judged, &complete);
        sscanf(line, "total 0 %ld", &total);
    }
    int status = out ? pclose(out) : -1;
    unlink(path);
    printf("altstack_walk: %ld samples, %ld refused for want of stack\n",
           total, complete);
    return status == 0 ? complete : -1;
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
    puts("altstack_walk: not under TSan (it defers asynchronous signals)");
    return 77;
#endif
    setvbuf(stdout, NULL, _IOLBF, 0); /* what it said before any crash */
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_usr2;
    sigaction(SIGUSR2, &sa, NULL);
    if (cpprof_set("cpu_hz", "1000") != 0 || cpprof_cpu_profile_start() != 0) {
        fputs("altstack_walk: cannot start the profile\n", stderr);
        return 1;
    }
    pthread_t t;
    pthread_create(&t, NULL, signalled, NULL);
    pthread_join(t, NULL);
    unsigned char *gz;
    size_t len;
    if (cpprof_cpu_profile_stop(&gz, &len) != 0)
        return 1;
    long refused = refusals(gz, len);
    free(gz);
    return refused > 0 ? 0 : 1;
}
