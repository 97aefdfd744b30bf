/*
 * census_blocked.c -- the census's stack of a thread blocked in a system
 * call is the thread's real chain, or is marked as a guess.
 *
 * The census walks a blocked thread from outside with only the PC and SP
 * /proc gives; a caller whose CFA is its frame pointer has its frame
 * record searched for above its SP.  The shape that fooled the old search
 * (mariadbd in fdatasync): frame-pointer callers (this file is built with
 * -fno-omit-frame-pointer) above a frameless leaf blocked in read() on a
 * pipe, 20 levels deep, where each level first calls a helper chain (hot
 * at some levels: many times; cold at others: once or never) whose frame
 * records stay behind in the next level's uninitialised locals.  The old
 * search took the first record that passed one step: a stale one.
 *
 * Each function records its own return address, so the chain is known
 * exactly.  Over CENSUSES censuses, each thread's stack must equal it in
 * at least 99% of cases, and every other stack must carry STACK_GUESSED.
 * One more thread calls its last level through a pointer, so that no
 * record can be proved that level's: its stack must be marked from there
 * on, and the debug=1 frames show the mark there.
 */
#define _GNU_SOURCE
#include <alloca.h>
#include <check.h>
#include <cpprof.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "census.h"
#include "gotext.h"
#include "symbolize.h"
#include "unwind.h"

#define THREADS 6
#define DEPTH 20
#define CENSUSES 200
/* pcs: read's PC, leaf, DEPTH levels, thread_main, start_thread (whose
 * caller, clone3, is the outermost frame). */
#define CHAIN (1 + 1 + DEPTH + 1 + 1 + 1)

struct blocked {
    bool indirect; /* the last level is called through a pointer */
    int pipe[2];
    pid_t tid;
    /* ra[j]: the return address the census must show as pcs[j]; [1] is
     * unknown (inside leaf, after its call of read). */
    uintptr_t ra[CHAIN];
    atomic_bool ready;
};

/* THREADS whose chain is checked, then the one called indirectly. */
static struct blocked threads[THREADS + 1];
static volatile uintptr_t sink;

#define NOINLINE __attribute__((noinline, noipa))

/* Leaves DEPTH frame records behind below its caller's SP. */
static NOINLINE void helper_chain(int depth)
{
    volatile uintptr_t local = (uintptr_t)depth;
    if (depth > 0)
        helper_chain(depth - 1);
    sink += local;
}

/* Frameless: its caller's CFA needs the frame pointer the walk lacks. */
static NOINLINE __attribute__((optimize("omit-frame-pointer"))) void
leaf(struct blocked *b)
{
    b->ra[2] = (uintptr_t)__builtin_return_address(0);
    atomic_store(&b->ready, true);
    char c;
    ssize_t got = read(b->pipe[0], &c, 1);
    sink += (uintptr_t)got;
}

static void level(struct blocked *b, int i, int hot);
static void (*volatile level_ptr)(struct blocked *, int, int) = level;

/* Level i of DEPTH: uninitialised locals (a size per level) over what the
 * helper chain the previous level called left. */
static NOINLINE void level(struct blocked *b, int i, int hot)
{
    b->ra[2 + DEPTH - i] = (uintptr_t)__builtin_return_address(0);
    size_t pad = 64 + 96 * (size_t)((i + hot) % 5);
    char *locals = alloca(pad);
    __asm__ volatile("" : : "r"(locals) : "memory");
    int calls = (i + hot) % 3 == 0 ? 100 : (i + hot) % 3 == 1 ? 1 : 0;
    for (int k = 0; k < calls; k++)
        helper_chain(3 + (i + hot) % 7);
    if (i + 2 == DEPTH && b->indirect)
        level_ptr(b, i + 1, hot);
    else if (i + 1 < DEPTH)
        level(b, i + 1, hot);
    else
        leaf(b);
    sink += (uintptr_t)locals[0];
}

static void *thread_main(void *arg)
{
    struct blocked *b = arg;
    b->ra[3 + DEPTH] = (uintptr_t)__builtin_return_address(0);
    b->tid = gettid();
    level(b, 0, (int)(b - threads));
    return NULL;
}

static const census_thread *find_tid(const census *c, pid_t tid)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->threads[i].tid == tid)
            return &c->threads[i];
    return NULL;
}

/* Whether t's stack is b's chain: every known return address in place,
 * pcs[1] in leaf, and the thread's two outermost frames after them. */
static bool is_chain(const census_thread *t, const struct blocked *b)
{
    if (t->missing[0] || t->depth != CHAIN)
        return false;
    if (t->pcs[1] - (uintptr_t)leaf > 256)
        return false;
    for (size_t j = 2; j <= 3 + DEPTH; j++)
        if (t->pcs[j] != b->ra[j])
            return false;
    return true;
}

/* Whether the indirect thread's stack is marked from the frame after the
 * indirectly called level on, and its debug=1 frames show the mark after
 * that level's frame. */
static bool marked_at_indirect_call(const census_thread *t)
{
    if (!(t->flags & STACK_GUESSED) || STACK_GUESS_AT(t->flags) != 3)
        return false;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return false;
    symbolize_begin();
    text_write_frames(f, t->pcs, t->depth, t->flags, 0);
    symbolize_end();
    fclose(f);
    /* read's and leaf's frames, the one level's, then the mark */
    const char *mark = strstr(text, "\n#\t0x0\t" STACK_GUESSED_FRAME "+");
    int levels = 0;
    for (const char *at = text; mark && (at = strstr(at, "\tlevel+")) &&
                                at < mark;
         at++)
        levels++;
    bool ok = mark && levels == 1 && strstr(text, "\tleaf+") < mark;
    free(text);
    return ok;
}

START_TEST(blocked_stacks_are_right_or_marked)
{
    pthread_t ids[THREADS + 1];
    threads[THREADS].indirect = true;
    for (int k = 0; k <= THREADS; k++) {
        ck_assert_int_eq(pipe(threads[k].pipe), 0);
        ck_assert_int_eq(pthread_create(&ids[k], NULL, thread_main,
                                        &threads[k]),
                         0);
    }
    for (int k = 0; k <= THREADS; k++)
        while (!atomic_load(&threads[k].ready))
            usleep(1000);
    usleep(50000); /* into read() */
    int right = 0, marked = 0, wrong = 0, indirect_marked = 0;
    char first_wrong[256] = "";
    for (int n = 0; n < CENSUSES; n++) {
        census c;
        ck_assert_int_eq(census_take_stacks(&c), 0);
        for (int k = 0; k < THREADS; k++) {
            const census_thread *t = find_tid(&c, threads[k].tid);
            ck_assert_msg(t, "census %d: thread %d missing", n, k);
            if (is_chain(t, &threads[k]))
                right++;
            else if (t->flags & STACK_GUESSED)
                marked++;
            else if (wrong++ == 0)
                snprintf(first_wrong, sizeof first_wrong,
                         "thread %d: depth %u (want %d), flags %#x%s%s", k,
                         t->depth, CHAIN, t->flags,
                         t->missing[0] ? ", missing: " : "", t->missing);
        }
        const census_thread *t = find_tid(&c, threads[THREADS].tid);
        ck_assert_msg(t, "census %d: the indirect thread missing", n);
        indirect_marked += marked_at_indirect_call(t);
        census_release(&c);
    }
    for (int k = 0; k <= THREADS; k++) {
        ck_assert_int_eq(write(threads[k].pipe[1], "x", 1), 1);
        pthread_join(ids[k], NULL);
    }
    int all = CENSUSES * THREADS;
    printf("census_blocked: %d of %d stacks are the known chain (%.1f%%), "
           "%d marked guessed, %d wrong and unmarked%s%s\n",
           right, all, 100.0 * right / all, marked, wrong,
           wrong ? "; first: " : "", first_wrong);
    printf("census_blocked: the thread called through a pointer marked at "
           "that call in %d of %d censuses\n", indirect_marked, CENSUSES);
    fflush(stdout); /* a failed check ends the process without flushing */
    ck_assert_msg(wrong == 0, "%d of %d stacks wrong and unmarked (%s)",
                  wrong, all, first_wrong);
    ck_assert_msg(right * 100 >= all * 99, "only %d of %d stacks right",
                  right, all);
    ck_assert_msg(indirect_marked == CENSUSES,
                  "the indirect call marked in %d of %d censuses",
                  indirect_marked, CENSUSES);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("census_blocked");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, blocked_stacks_are_right_or_marked);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
