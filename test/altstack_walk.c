/*
 * altstack_walk.c -- cpprof's signals never nest on a program's small
 * sigaltstack, and where they still can, the profiling signal's handler
 * does not run off its bottom.
 *
 * A thread runs its own SIGUSR1 handler on an 8 KB sigaltstack
 * (SA_ONSTACK), spinning for about 1 ms a call, over and over, while a
 * CPU profile runs at 1000 Hz, the accounting tick at 1000 Hz and, in
 * the main thread, censuses.  A signal that interrupts code on the
 * altstack is delivered on it, SA_ONSTACK or not, below the handler's
 * frames.  The altstack has an inaccessible page below it.
 *
 * The kernel's signal frame is measured first (a probe signal's handler
 * on the altstack sees how far below its top it runs; this CPU's
 * AT_MINSIGSTKSZ is printed beside it, an upper bound).  With AMX state it
 * is so large that an 8 KB altstack holds the program's handler but no
 * second frame, and the kernel killed the program with SIGSEGV at the
 * first cpprof signal inside the handler, before any handler of cpprof's
 * could check for room.  The same is made on any CPU: the handler keeps
 * what leaves half a frame below it.  Each case runs in a child process:
 * - "sigaction": the handler installed through sigaction, before the
 *   profile;
 * - "around": installed through glibc's __sigaction, which cpprof does
 *   not see (as a handler from before cpprof was loaded), before the
 *   profile.
 * Both must live; no CPU sample refused for want of stack
 * (cpprof.unsampled.stackTooShort, by google/pprof's parser, test/gocheck:
 * none ran on the altstack); samples under signalled() for at least half
 * the thread's CPU (a sample that waited for the handler to return keeps
 * its weight); every census lists the thread; and sigaction reads back
 * the mask the program set ({SIGUSR2}), whatever cpprof added.
 * - "late": installed through __sigaction once the profile runs, so that
 *   cpprof cannot see it: the profiling signal still nests, and where two
 *   frames and the handler's 1.5 KB fit in 8 KB but leave too little for
 *   the walk, the walks are refused and counted (stackTooShort > 0), the
 *   process lives.  Skipped where two frames do not fit at all.
 * Not under TSan (77): its runtime runs an asynchronous signal's handler
 * later, at its next interceptor or safe point, rather than nested on the
 * altstack inside the program's handler.
 */
#define _GNU_SOURCE
#include "census.h"

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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ALTSTACK (8 << 10)
#define LATE_KEEP 1536      /* "late": what the handler keeps on it */
#define HANDLER_NS 1000000L /* its CPU time per call */
#define CALLS 1500          /* about 1.5 s of CPU in the handler */
#define CENSUSES 20

/* glibc's sigaction under its other name: not the interposed one. */
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

enum install { THROUGH_SIGACTION, AROUND, LATE };

static atomic_long calls;
static long spins_per_call = 1 << 20; /* then about HANDLER_NS of CPU */
static size_t keep_bytes = LATE_KEEP;
static uintptr_t alt_top;
static volatile uintptr_t frame_bytes; /* the probe's depth on the altstack */
static atomic_int handler_tid;
static int64_t handler_cpu_ns;

static int64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The program's handler: keep_bytes in use on the altstack for 1 ms of
 * CPU.  It calls nothing, so that its stack use is its frame in every
 * build (a sanitizer's clock_gettime interceptor would add frames). */
static void on_usr1(int sig)
{
    (void)sig;
    volatile unsigned char keep[keep_bytes];
    for (long i = 0; i < spins_per_call; i++)
        keep[(size_t)i % keep_bytes] = (unsigned char)i;
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

/* The kernel's signal frame on an altstack of this thread's, probed. */
static size_t measure_frame(void)
{
    struct sigaction sa = {.sa_handler = on_usr2, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    __sigaction(SIGUSR2, &sa, NULL);
    if (use_altstack() != 0) {
        perror("altstack_walk: sigaltstack");
        exit(1);
    }
    pthread_kill(pthread_self(), SIGUSR2);
    return frame_bytes;
}

static void install_usr1(enum install how)
{
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2); /* the program's own, read back */
    if (how == THROUGH_SIGACTION)
        sigaction(SIGUSR1, &sa, NULL);
    else
        __sigaction(SIGUSR1, &sa, NULL);
}

static void *signalled(void *arg)
{
    (void)arg;
    if (use_altstack() != 0) {
        perror("altstack_walk: sigaltstack");
        exit(1);
    }
    calibrate();
    atomic_store(&handler_tid, gettid());
    while (atomic_load(&calls) < CALLS)
        pthread_kill(pthread_self(), SIGUSR1);
    handler_cpu_ns = thread_cpu_ns();
    return NULL;
}

/* Runs google/pprof's parser on the profile for `chain`; the sum of the
 * samples that carry it, -1 when it rejects the profile. */
static long chain_sum(const unsigned char *gz, size_t len, const char *chain)
{
    char path[] = "/tmp/altstack_walk.XXXXXX", cmd[300], line[512];
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, gz, len) != (ssize_t)len)
        return -1;
    close(fd);
    snprintf(cmd, sizeof cmd, "%s -chain '%s' %s", GOCHECK, chain, path);
    FILE *out = popen(cmd, "r");
    long complete = -1;
    while (out && fgets(line, sizeof line, out)) {
        if (strncmp(line, "chain", 5) == 0 || strncmp(line, "total", 5) == 0)
            fputs(line, stdout);
        sscanf(line, "chain judged %*d complete %ld", &complete);
    }
    int status = out ? pclose(out) : -1;
    unlink(path);
    return status == 0 ? complete : -1;
}

/* The program reads back its own mask, {SIGUSR2}, through sigaction;
 * true when it does. */
static bool mask_read_back(void)
{
    struct sigaction old;
    sigaction(SIGUSR1, NULL, &old);
    bool own = sigismember(&old.sa_mask, SIGUSR2) == 1;
    for (int s = 1; s <= SIGRTMAX; s++)
        if (s != SIGUSR2 && sigismember(&old.sa_mask, s) == 1) {
            printf("altstack_walk: sigaction returns signal %d in the "
                   "mask, which the program did not set\n", s);
            own = false;
        }
    return own;
}

/* Censuses while the thread runs its handler: each lists the thread,
 * with its stack or the reason it has none. */
static bool censuses_list_it(void)
{
    while (atomic_load(&handler_tid) == 0)
        sched_yield();
    pid_t tid = atomic_load(&handler_tid);
    int listed = 0, stacks = 0;
    for (int i = 0; i < CENSUSES; i++) {
        census c;
        if (census_take(&c) != 0)
            return false;
        for (size_t j = 0; j < c.n; j++)
            if (c.threads[j].tid == tid) {
                listed++;
                stacks += c.threads[j].missing[0] == '\0';
            }
        census_release(&c);
    }
    printf("altstack_walk: the thread listed in %d of %d censuses, with "
           "its stack in %d\n", listed, CENSUSES, stacks);
    return listed == CENSUSES;
}

/* One case, in a child: 0 when its checks hold. */
static int run_case(enum install how, size_t frame)
{
    keep_bytes = how == LATE ? LATE_KEEP : ALTSTACK - frame - frame / 2;
    if (how != LATE)
        install_usr1(how);
    if (cpprof_set("cpu_hz", "1000") != 0 ||
        cpprof_set("accounting_hz", "1000") != 0 ||
        cpprof_accounting_enable() != 0 || cpprof_cpu_profile_start() != 0) {
        fputs("altstack_walk: cannot start the profile\n", stderr);
        return 1;
    }
    if (how == LATE)
        install_usr1(how);
    bool own_mask = how == LATE || mask_read_back();
    pthread_t t;
    pthread_create(&t, NULL, signalled, NULL);
    bool listed = how == LATE || censuses_list_it();
    pthread_join(t, NULL);
    unsigned char *gz;
    size_t len;
    if (cpprof_cpu_profile_stop(&gz, &len) != 0)
        return 1;
    long refused = chain_sum(gz, len, "cpprof\\.unsampled\\.stackTooShort.*");
    long ran = chain_sum(gz, len, "signalled");
    free(gz);
    long cpu_ms = (long)(handler_cpu_ns / 1000000);
    printf("altstack_walk: %ld samples refused for want of stack, %ld "
           "under signalled() for its %ld ms of CPU\n", refused, ran, cpu_ms);
    if (how == LATE)
        return refused > 0 ? 0 : 1;
    return refused == 0 && 2 * ran >= cpu_ms && own_mask && listed ? 0 : 1;
}

/* Runs a case in a child process; whether it passed. */
static bool passes(const char *name, enum install how, size_t frame)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0)
        _exit(run_case(how, frame));
    int status;
    if (pid < 0 || waitpid(pid, &status, 0) != pid)
        return false;
    if (WIFSIGNALED(status))
        printf("altstack_walk: %s: killed by signal %d\n", name,
               WTERMSIG(status));
    else
        printf("altstack_walk: %s: %s\n", name,
               WEXITSTATUS(status) == 0 ? "passed" : "failed");
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
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
    size_t frame = measure_frame();
    printf("altstack_walk: signal frame %zu bytes (AT_MINSIGSTKSZ %lu), "
           "altstack %d\n", frame, getauxval(AT_MINSIGSTKSZ), ALTSTACK);
    if (frame + frame / 2 + 512 > ALTSTACK) {
        printf("altstack_walk: one signal frame nearly fills %d bytes: no "
               "handler of the program's fits with room to spare\n",
               ALTSTACK);
        return 77;
    }
    bool ok = passes("sigaction", THROUGH_SIGACTION, frame);
    ok &= passes("around", AROUND, frame);
    if (2 * frame + LATE_KEEP + 512 > ALTSTACK)
        printf("altstack_walk: late: skipped, two signal frames and %d "
               "bytes do not fit in %d\n", LATE_KEEP, ALTSTACK);
    else
        ok &= passes("late", LATE, frame);
    return ok ? 0 : 1;
}
