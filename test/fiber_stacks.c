/*
 * fiber_stacks.c -- the CPU profile's signal handler must
 * not fault when a thread runs on a stack allocated with malloc (fibers,
 * coroutines) while the heap shrinks under it.
 *
 * The main thread runs a fiber (makecontext/swapcontext) on a malloc'd
 * stack at 1000 Hz of profiling.  Each round grows the heap well past the
 * fiber's stack for longer than the sampler's maps refresh period, so the
 * unwinder's region table learns the big heap; then frees and trims it
 * (malloc_trim) and spins in the fiber with the frame-pointer register
 * holding an address in the memory just returned to the kernel, as a
 * function built without frame pointers may (rbp used as data).  A walker
 * that trusts the stale table reads there and the process dies of
 * SIGSEGV; the walker must instead survive and still see the fiber's
 * frames.  The profile must be accepted by google/pprof's parser
 * (test/gocheck) and show fiber_spin.  x86-64 only (the register trick is
 * written in its assembly); elsewhere the test is skipped (77).
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define FIBER_STACK (64 << 10) /* below the mmap threshold: in the heap */
#define NPADS 64               /* 64 x 64 KiB of heap growth above it */
#define PHASE_NS 150000000L    /* longer than the sampler's refresh period */

static ucontext_t main_ctx, fiber_ctx;
static volatile uintptr_t fiber_rbp; /* 0: leave rbp alone */
static volatile bool fiber_done;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins for about `ns` with rbp = fiber_rbp when that is set.  The red
 * zone is stepped over before rbp is pushed. */
__attribute__((noinline)) static void fiber_spin(int64_t ns)
{
    int64_t end = now_ns() + ns;
    while (now_ns() < end) {
#if defined(__x86_64__)
        uintptr_t rbp = fiber_rbp;
        if (rbp) {
            unsigned long n = 200000;
            __asm__ volatile("sub $128, %%rsp\n\t"
                             "push %%rbp\n\t"
                             "mov %1, %%rbp\n\t"
                             "1: dec %0\n\t"
                             "jnz 1b\n\t"
                             "pop %%rbp\n\t"
                             "add $128, %%rsp"
                             : "+r"(n)
                             : "r"(rbp)
                             : "cc", "memory");
        }
#endif
    }
}

static void fiber_main(void)
{
    while (!fiber_done) {
        fiber_spin(PHASE_NS);
        swapcontext(&fiber_ctx, &main_ctx);
    }
}

/* One round: the heap grows above the fiber's stack, the fiber runs; the
 * heap is trimmed, the fiber runs with rbp in the trimmed memory. */
static void round_trip(void)
{
    void *pads[NPADS];
    for (int i = 0; i < NPADS; i++) {
        pads[i] = malloc(FIBER_STACK);
        memset(pads[i], 1, FIBER_STACK);
    }
    uintptr_t gone = ((uintptr_t)pads[NPADS / 2] + 4096) & ~(uintptr_t)15;
    fiber_rbp = 0;
    swapcontext(&main_ctx, &fiber_ctx);
    for (int i = NPADS - 1; i >= 0; i--)
        free(pads[i]);
    malloc_trim(0);
    fiber_rbp = gone;
    swapcontext(&main_ctx, &fiber_ctx);
}

/* google/pprof's parser must accept the profile, and the fiber's function
 * must be in it. */
static int validate(const unsigned char *gz, size_t len)
{
    char path[] = "/tmp/fiber_stacks.XXXXXX", cmd[300], line[512];
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, gz, len) != (ssize_t)len)
        return 1;
    close(fd);
    snprintf(cmd, sizeof cmd, "%s -frames %s", GOCHECK, path);
    FILE *out = popen(cmd, "r");
    bool seen = false;
    long samples = 0;
    while (out && fgets(line, sizeof line, out)) {
        sscanf(line, "total 0 %ld", &samples);
        seen |= strncmp(line, "frame fiber_spin ", 17) == 0;
    }
    int status = out ? pclose(out) : -1;
    unlink(path);
    printf("fiber_stacks: %ld samples, fiber_spin %s, gocheck status %d\n",
           samples, seen ? "seen" : "missing", status);
    return status == 0 && seen ? 0 : 1;
}

int main(int argc, char **argv)
{
#if !defined(__x86_64__)
    puts("fiber_stacks: x86-64 only");
    return 77;
#endif
    int rounds = argc > 1 ? atoi(argv[1]) : 12;
    void *stack = malloc(FIBER_STACK);
    getcontext(&fiber_ctx);
    fiber_ctx.uc_stack = (stack_t){.ss_sp = stack, .ss_size = FIBER_STACK};
    fiber_ctx.uc_link = &main_ctx;
    makecontext(&fiber_ctx, fiber_main, 0);
    if (cpprof_set("cpu_hz", "1000") != 0 || cpprof_cpu_profile_start() != 0) {
        fputs("fiber_stacks: cannot start the profile\n", stderr);
        return 1;
    }
    for (int i = 0; i < rounds; i++)
        round_trip();
    fiber_done = true;
    swapcontext(&main_ctx, &fiber_ctx);
    unsigned char *gz;
    size_t len;
    if (cpprof_cpu_profile_stop(&gz, &len) != 0)
        return 1;
    int rc = validate(gz, len);
    free(gz);
    free(stack);
    return rc;
}
