/*
 * tick_yield.c -- the accounting tick yields its signal to a program that
 * links cpprof: against the
 * shared library, so that under ASan or TSan the program's sigaction goes
 * through the sanitizer's interceptor first, which then calls the next
 * definition, cpprof's (siginterpose.c).  check_accounting holds the same
 * case with the library's internals, but there a sanitizer's sigaction
 * is linked ahead of cpprof's and never calls it, so that case is left
 * out of the sanitizer builds; this program is not.
 *
 * Accounting is enabled with its tick on SIGRTMIN+6 at 1000 Hz; a labelled
 * scope spins so that the tick is armed; then the program installs its own
 * handler for that signal and spins in a scope again.  Its handler must
 * see none of cpprof's timer signals (SI_TIMER), and the program's own
 * sigqueue'd signal must arrive.  Exit 0 when both hold.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static atomic_int timer_signals, queued_signals;

static void program_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    if (si->si_code == SI_TIMER)
        atomic_fetch_add(&timer_signals, 1);
    else if (si->si_code == SI_QUEUE)
        atomic_fetch_add(&queued_signals, 1);
}

static int64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void spin(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    int64_t until = thread_cpu_ns() + *(int64_t *)arg;
    while (thread_cpu_ns() < until)
        ;
}

#define CHECK(ok, what)                                                   \
    do {                                                                  \
        if (!(ok)) {                                                      \
            fprintf(stderr, "FAIL: %s\n", what);                          \
            return 1;                                                     \
        }                                                                 \
    } while (0)

int main(void)
{
    int sig = SIGRTMIN + 6;
    char signo[16];
    snprintf(signo, sizeof signo, "%d", sig);
    CHECK(cpprof_set("accounting_signal", signo) == 0, "accounting_signal");
    CHECK(cpprof_set("accounting_hz", "1000") == 0, "accounting_hz");
    CHECK(cpprof_accounting_enable() == 0, "cpprof_accounting_enable");
    const char *kv[] = {"scope", "held"};
    cpprof_labelset *set;
    CHECK(cpprof_labels(&set, 2, kv) == 0, "cpprof_labels");
    int64_t ns = 100000000;
    CHECK(cpprof_do(NULL, set, spin, &ns) == 0, "cpprof_do (tick armed)");
    struct sigaction sa = {.sa_sigaction = program_handler,
                           .sa_flags = SA_SIGINFO};
    CHECK(sigaction(sig, &sa, NULL) == 0, "sigaction");
    ns = 300000000;
    CHECK(cpprof_do(NULL, set, spin, &ns) == 0, "cpprof_do (after)");
    CHECK(sigqueue(getpid(), sig, (union sigval){7}) == 0, "sigqueue");
    cpprof_labelset_release(set);
    printf("program's handler: %d of cpprof's ticks, %d of its own signals\n",
           atomic_load(&timer_signals), atomic_load(&queued_signals));
    CHECK(atomic_load(&queued_signals) == 1, "the program's signal was lost");
    CHECK(atomic_load(&timer_signals) == 0,
          "cpprof's accounting ticks reached the program's handler");
    return 0;
}
