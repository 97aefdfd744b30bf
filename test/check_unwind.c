/*
 * check_unwind.c -- the unwinder's own cases that the profile-level tests
 * (test/chains.sh, test/fiber_stacks) do not reach: a walk through a signal
 * frame, a walk of a fiber's stack in a forked child (whose fault-proof
 * reads must ask the child's memory, not the parent's), a walk put off
 * and done later from a copy of the stack (the sampler's answer to code
 * with no table yet), the mapping of an object dlclosed while its
 * generation is pinned, and the bound on those kept for the heap family's
 * stacks, and cfi_build on
 * bad images (a clear error or fewer rows, never a crash or a read outside
 * the image).
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "cpprof.h"
#include "stacktab.h"
#include "unwind.h"
#include "unwind_cfi.h"

/* True when one of pcs[1..n) is a return address into `fn`, whose code
 * is taken to be shorter than 512 bytes (the functions below are). */
static bool returns_into(const uintptr_t *pcs, size_t n, void (*fn)(void))
{
    uintptr_t lo = (uintptr_t)fn;
    for (size_t i = 1; i < n; i++)
        if (pcs[i] > lo && pcs[i] <= lo + 512)
            return true;
    return false;
}

static uintptr_t walked[STACK_MAX_FRAMES];
static size_t nwalked;
static unsigned walked_flags;

/* Installs `fn` as the SA_SIGINFO handler of `signo`. */
static void handle_signal(int signo, void (*fn)(int, siginfo_t *, void *))
{
    struct sigaction sa = {0};
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO;
    ck_assert_int_eq(sigaction(signo, &sa, NULL), 0);
}

/* ---- Signal frames ---------------------------------------------------- */

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    (void)uc;
    ucontext_t here;
    getcontext(&here);
    nwalked = unwind_context(&here, walked, STACK_MAX_FRAMES, &walked_flags,
                             NULL);
}

__attribute__((noinline)) static void raise_usr1(void)
{
    raise(SIGUSR1);
    __asm__ volatile("");
}

START_TEST(signal_frames_are_walked_through)
{
    handle_signal(SIGUSR1, on_usr1);
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    raise_usr1();
    ck_assert_msg(returns_into(walked, nwalked, raise_usr1),
                  "raise_usr1, below the signal frame, not in %zu frames",
                  nwalked);
}
END_TEST

/* ---- A return address far below the CFA ------------------------------ */

/* gcc on AArch64 saves the frame record {x29, x30} at the bottom of a
 * frame of 512 bytes to 4 KiB, so the return address of a 2 KB frame is
 * about 2 KB below its CFA (glibc's vfscanf: 1832 bytes). */
__attribute__((noinline)) static void walk_from_here(void)
{
    ucontext_t here;
    getcontext(&here);
    nwalked = unwind_context(&here, walked, STACK_MAX_FRAMES, &walked_flags,
                             NULL);
}

__attribute__((noinline)) static void big_frame(void)
{
    volatile char buf[2000];
    buf[0] = 1;
    walk_from_here();
    buf[sizeof buf - 1] = buf[0];
}

__attribute__((noinline)) static void calls_big_frame(void)
{
    big_frame();
    __asm__ volatile("");
}

__attribute__((noinline)) static void above_big_frame(void)
{
    calls_big_frame();
    __asm__ volatile("");
}

START_TEST(return_address_far_below_the_cfa)
{
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    above_big_frame();
    ck_assert_msg(returns_into(walked, nwalked, calls_big_frame) &&
                      returns_into(walked, nwalked, above_big_frame),
                  "callers of the 2 KB frame not in %zu frames", nwalked);
    ck_assert_msg(!(walked_flags & STACK_FP_FALLBACK),
                  "the walk fell back to frame pointers (flags %#x)",
                  walked_flags);
}
END_TEST

/* ---- A walk put off, then done from the stack's copy ------------------ */

static struct unwind_snapshot snap;
static bool snap_taken;

static void on_usr2(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)si;
    nwalked = unwind_context(uc, walked, STACK_MAX_FRAMES, &walked_flags,
                             NULL);
    snap_taken = unwind_snapshot_take(uc, &snap);
}

__attribute__((noinline)) static void raise_usr2(void)
{
    raise(SIGUSR2);
    __asm__ volatile("");
}

/* Overwrites the stack the handler above ran on. */
__attribute__((noinline)) static void scribble_stack(void)
{
    volatile uint8_t junk[32768];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 7 + 1);
}

START_TEST(snapshot_walks_like_the_handler_after_the_stack_moved_on)
{
    handle_signal(SIGUSR2, on_usr2);
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    raise_usr2();
    scribble_stack();
    ck_assert(snap_taken);
    ck_assert_uint_gt(snap.len, 0);
    uintptr_t pcs[STACK_MAX_FRAMES];
    unsigned flags;
    uint64_t gen = 0;
    size_t n = unwind_snapshot_walk(&snap, pcs, STACK_MAX_FRAMES, &flags,
                                    &gen);
    ck_assert_msg(nwalked >= 3, "the handler walked only %zu frames",
                  nwalked);
    ck_assert_uint_eq(n, nwalked);
    ck_assert_uint_eq(flags, walked_flags);
    ck_assert_mem_eq(pcs, walked, n * sizeof *pcs);
    ck_assert(returns_into(pcs, n, raise_usr2));
}
END_TEST

/* A copy that runs off the top of a stack (here a fiber's, with an
 * unmapped page above it) stops there: no fault, and the walk ends at
 * the copy's end instead of reading live memory. */
static uint8_t *fiber_top;

static void on_usr2_on_fiber(void)
{
    raise(SIGUSR2);
}

START_TEST(snapshot_copy_stops_at_an_unmapped_page)
{
    handle_signal(SIGUSR2, on_usr2);
    long page = sysconf(_SC_PAGESIZE);
    uint8_t *m = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(m, MAP_FAILED);
    ck_assert_int_eq(munmap(m + 3 * page, page), 0); /* the page above */
    fiber_top = m + 3 * page;
    static ucontext_t back, on;
    getcontext(&on);
    on.uc_stack.ss_sp = m;
    on.uc_stack.ss_size = 3 * page;
    on.uc_link = &back;
    makecontext(&on, on_usr2_on_fiber, 0);
    snap_taken = false;
    ck_assert_int_eq(swapcontext(&back, &on), 0);
    ck_assert(snap_taken);
    ck_assert_uint_gt(snap.len, 0);
    ck_assert_uint_le(snap.sp + snap.len, (uintptr_t)fiber_top);
    ck_assert_uint_lt(snap.len, UNWIND_SNAPSHOT_BYTES);
    uintptr_t pcs[STACK_MAX_FRAMES];
    unsigned flags;
    uint64_t gen = 0;
    size_t n = unwind_snapshot_walk(&snap, pcs, STACK_MAX_FRAMES, &flags,
                                    &gen);
    ck_assert_uint_ge(n, 1);
    munmap(m, 3 * page);
}
END_TEST

/* ---- A fiber in a forked child ---------------------------------------- */

static ucontext_t child_main, fiber;

__attribute__((noinline)) static void fiber_walk(void)
{
    ucontext_t here;
    getcontext(&here);
    nwalked = unwind_context(&here, walked, STACK_MAX_FRAMES, &walked_flags,
                             NULL);
}

__attribute__((noinline)) static void fiber_body(void)
{
    fiber_walk();
    __asm__ volatile("");
}

START_TEST(fiber_stack_is_read_in_a_forked_child)
{
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    pid_t pid = fork();
    if (pid == 0) {
        /* The fiber's stack exists in the child only. */
        enum { SIZE = 64 << 10 };
        void *stack = malloc(SIZE);
        getcontext(&fiber);
        fiber.uc_stack = (stack_t){.ss_sp = stack, .ss_size = SIZE};
        fiber.uc_link = &child_main;
        makecontext(&fiber, fiber_body, 0);
        swapcontext(&child_main, &fiber);
        _exit(returns_into(walked, nwalked, fiber_body) ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child status %#x: fiber_body not found on its stack",
                  status);
}
END_TEST

/* ---- Generations --------------------------------------------------------- */

static ucontext_t before_unload;

/* A plugin's mapping is kept once it is dlclosed and the tables refreshed
 * (the interposed dlclose does it at once; refreshed here as well, since
 * under ASan this program's dlclose binds to ASan's, not to the copy of
 * dlinterpose.c linked into it) for the generation pinned before, found
 * by its PC with its file, place and bias; not for a later generation,
 * in which the address is not the plugin's; and freed at the last unpin.
 * A walk put off before the dlclose is not done again after it. */
START_TEST(unloaded_object_is_kept_while_its_generation_is_pinned)
{
    void *h = dlopen(PLUGIN_A, RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    uintptr_t pc = (uintptr_t)dlsym(h, "reuse_hot_a");
    Dl_info info;
    ck_assert(pc && dladdr((void *)pc, &info));
    char path[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(PLUGIN_A, path)); /* as the maps say */
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    ck_assert(!unwind_keeping_gone()); /* no pin, no stack kept for life */
    uint64_t gen = unwind_pin_generation();
    ck_assert_uint_gt(gen, 0);
    unwind_gone g;
    ck_assert_int_eq(unwind_gone_at(gen, pc, &g),
                     UNWIND_PC_CURRENT); /* still mapped */
    static struct unwind_snapshot snap;
    getcontext(&before_unload);
    ck_assert(unwind_snapshot_take(&before_unload, &snap));
    ck_assert_int_eq(dlclose(h), 0);
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    ck_assert_int_eq(unwind_gone_at(gen, pc, &g), UNWIND_PC_GONE);
    uintptr_t pcs[STACK_MAX_FRAMES] = {1};
    unsigned flags = 7;
    uint64_t walked_gen = gen;
    ck_assert_uint_eq(unwind_snapshot_walk(&snap, pcs, STACK_MAX_FRAMES,
                                           &flags, &walked_gen),
                      0);
    ck_assert(pcs[0] == 1 && flags == 7 && walked_gen == gen);
    ck_assert_str_eq(g.path, path);
    ck_assert(g.start <= pc && pc < g.limit);
    ck_assert_uint_eq(g.bias, (uintptr_t)info.dli_fbase);
    free((char *)g.path);
    uint64_t later = unwind_pin_generation();
    ck_assert_uint_gt(later, gen);
    ck_assert_int_eq(unwind_gone_at(later, pc, &g), UNWIND_PC_CURRENT);
    unwind_unpin_generation(later);
    ck_assert_int_eq(unwind_gone_at(gen, pc, &g),
                     UNWIND_PC_GONE); /* still pinned */
    free((char *)g.path);
    unwind_unpin_generation(gen);
    ck_assert_int_eq(unwind_gone_at(gen, pc, &g),
                     UNWIND_PC_CURRENT); /* freed */
}
END_TEST

/* The current generation (pinned and unpinned again at once). */
static uint64_t generation_now(void)
{
    uint64_t gen = unwind_pin_generation();
    ck_assert_uint_gt(gen, 0);
    unwind_unpin_generation(gen);
    return gen;
}

/* Loads `path`, refreshes, unloads it, refreshes: one gone mapping.
 * Returns a generation in which its function `fn` was mapped, its address
 * in *pc. */
static uint64_t load_and_unload(const char *path, const char *fn,
                                uintptr_t *pc)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    ck_assert_ptr_nonnull(h);
    *pc = (uintptr_t)dlsym(h, fn);
    ck_assert(*pc);
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    uint64_t gen = generation_now();
    ck_assert_int_eq(dlclose(h), 0);
    ck_assert_int_eq(unwind_refresh_maps(), 0);
    return gen;
}

/* Once stacks are kept for the process's life (the heap family's), a gone
 * mapping stays without a pin, and a program that reloads a plugin in a
 * loop keeps UNWIND_GONE_KEPT of them: A's, older than B's, is then
 * dropped, and a PC in it is reported as forgotten, never as whatever is
 * mapped at its address now; the newest are still known. */
START_TEST(gone_mappings_kept_for_stacks_are_bounded)
{
    unwind_keep_gone_for_stacks();
    ck_assert(unwind_keeping_gone());
    uintptr_t first_pc, pc = 0;
    uint64_t first = load_and_unload(PLUGIN_A, "reuse_hot_a", &first_pc);
    uint64_t last = 0;
    unwind_gone g;
    ck_assert_int_eq(unwind_gone_at(first, first_pc, &g), UNWIND_PC_GONE);
    free((char *)g.path);
    for (int i = 0; i < UNWIND_GONE_KEPT; i++)
        last = load_and_unload(PLUGIN_B, "reuse_hot_b", &pc);
    ck_assert_int_eq(unwind_gone_at(first, first_pc, &g),
                     UNWIND_PC_FORGOTTEN);
    ck_assert_int_eq(unwind_gone_at(last, pc, &g), UNWIND_PC_GONE);
    free((char *)g.path);
}
END_TEST

/* ---- Bad images -------------------------------------------------------- */

START_TEST(garbage_is_not_an_elf)
{
    unsigned char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 131 + 7);
    struct cfi_table *t;
    struct cfi_stats st;
    ck_assert_int_eq(cfi_build(junk, sizeof junk, &t, &st), -ENOEXEC);
    ck_assert_ptr_null(t);
}
END_TEST

/* Every prefix of a real object, and the object with its .eh_frame
 * overwritten, build without a crash and never more rows than the whole. */
START_TEST(truncated_and_corrupted_images_are_survived)
{
    int fd = open("/proc/self/exe", O_RDONLY);
    ck_assert_int_ge(fd, 0);
    struct stat sb;
    ck_assert_int_eq(fstat(fd, &sb), 0);
    size_t size = (size_t)sb.st_size;
    unsigned char *img = malloc(size);
    ck_assert_ptr_nonnull(img);
    ck_assert_int_eq(pread(fd, img, size, 0), (ssize_t)size);
    close(fd);
    struct cfi_table *t;
    struct cfi_stats st;
    ck_assert_int_eq(cfi_build(img, size, &t, &st), 0);
    ck_assert_ptr_nonnull(t);
    size_t whole = t->nrows;
    cfi_free(t);
    for (size_t len = 0; len < size; len += size / 97 + 1) {
        /* A copy of exactly len bytes, so that ASan sees any overread. */
        unsigned char *part = malloc(len ? len : 1);
        memcpy(part, img, len);
        int rc = cfi_build(part, len, &t, &st);
        ck_assert(rc == 0 || rc == -ENOEXEC);
        ck_assert(!t || t->nrows <= whole + 1);
        cfi_free(t);
        free(part);
    }
    srand(1);
    for (int round = 0; round < 20; round++) {
        unsigned char *bad = malloc(size);
        memcpy(bad, img, size);
        for (int k = 0; k < 2000; k++)
            bad[sizeof(Elf64_Ehdr) + (size_t)rand() %
                    (size - sizeof(Elf64_Ehdr))] = (unsigned char)rand();
        int rc = cfi_build(bad, size, &t, &st);
        ck_assert(rc == 0 || rc == -ENOEXEC);
        cfi_free(t);
        free(bad);
    }
    free(img);
}
END_TEST

int main(void)
{
    /* No allocation is sampled, so no stack is kept for life: the pinned
     * generation's case sees its mapping freed at the last unpin. */
    if (cpprof_set("mem_profile_rate", "0") != 0)
        return EXIT_FAILURE;
    Suite *s = suite_create("unwind");
    TCase *tc = tcase_create("unwind");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, return_address_far_below_the_cfa);
    tcase_add_test(tc, garbage_is_not_an_elf);
    tcase_add_test(tc, truncated_and_corrupted_images_are_survived);
    tcase_add_test(tc, unloaded_object_is_kept_while_its_generation_is_pinned);
    tcase_add_test(tc, gone_mappings_kept_for_stacks_are_bounded);
    suite_add_tcase(s, tc);
    /* Tagged by what they need of the system, so that a run under an
     * emulator that lacks it can leave them out (CK_EXCLUDE_TAGS;
     * test/cross/aarch64.sh: qemu-user 7.2 has no process_vm_readv, and
     * its signal trampoline is no vDSO with the kernel's CFI). */
    TCase *sigframe = tcase_create("unwind_sigframe");
    tcase_set_timeout(sigframe, 60);
    tcase_set_tags(sigframe, "vdso_sigreturn");
    tcase_add_test(sigframe, signal_frames_are_walked_through);
    suite_add_tcase(s, sigframe);
    TCase *outside = tcase_create("unwind_outside_stack");
    tcase_set_timeout(outside, 60);
    tcase_set_tags(outside, "process_vm_readv");
    tcase_add_test(outside, fiber_stack_is_read_in_a_forked_child);
    tcase_add_test(outside, snapshot_walks_like_the_handler_after_the_stack_moved_on);
    tcase_add_test(outside, snapshot_copy_stops_at_an_unmapped_page);
    suite_add_tcase(s, outside);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
