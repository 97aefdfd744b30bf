/*
 * crash_labels.c -- a program that crashes inside a labelled scope, for
 * test/crash_labels.sh and test/goroutine_panicparse.sh.
 *
 *   crash_labels segv|abort api|env|none
 *   crash_labels --addr HOST:PORT segv
 *
 * Installs the crash handler through the API (api), leaves it to
 * CPPROF_CRASH_HANDLER (env) or to nobody (none), then starts a thread
 * named "crasher" (so that the report names its creator) which, inside
 * cpprof_do() with {"kind":"crash", "tenant":"acme"}, writes through a
 * null pointer or calls abort().  Before crashing it prints the address
 * of the crashing function, so the script can find it in the stack.
 *
 * With --addr it serves /debug/pprof/ there too, prints "crasher TID" and
 * "serving ...", and its crasher runs (spins, in its labelled scope)
 * until SIGUSR1, then crashes: a client can take goroutine?debug=2 of the
 * running thread first and compare its header with the report's.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile int *volatile nowhere;
static atomic_bool serving, crash_now_please, created;

__attribute__((noinline)) static void crash_now(const char *how)
{
    if (strcmp(how, "abort") == 0)
        abort();
    *nowhere = 1;
}

static void in_scope(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    if (atomic_load(&serving)) {
        printf("crasher %d\n", (int)gettid());
        fflush(stdout);
        while (!atomic_load(&crash_now_please))
            ; /* running: its header in debug=2 is "running" */
    }
    crash_now(arg);
}

static void *crasher(void *how)
{
    /* cpprof learns who created a thread once pthread_create returns. */
    while (!atomic_load(&created))
        usleep(1000);
    pthread_setname_np(pthread_self(), "crasher");
    const char *kv[] = {"tenant", "acme", "kind", "crash"};
    cpprof_labelset *labels;
    if (cpprof_labels(&labels, 4, kv) != 0)
        exit(1);
    printf("crash_now %p\n", (void *)crash_now);
    fflush(stdout);
    cpprof_do(NULL, labels, in_scope, how);
    return NULL; /* not reached */
}

/* Serves at addr until SIGUSR1, which sets the crasher off. */
static int serve(const char *addr, sigset_t *usr1)
{
    int rc = cpprof_http_start(addr);
    if (rc) {
        fprintf(stderr, "crash_labels: %s\n", cpprof_strerror(rc));
        return 1;
    }
    printf("serving http://%s/debug/pprof/\n", addr);
    fflush(stdout);
    int sig;
    sigwait(usr1, &sig);
    atomic_store(&crash_now_please, true);
    return 0;
}

int main(int argc, char **argv)
{
    bool served = argc == 4 && strcmp(argv[1], "--addr") == 0;
    if (argc != 3 && !served)
        return 2;
    const char *how = served ? argv[3] : argv[1];
    if ((served || strcmp(argv[2], "api") == 0) &&
        cpprof_crash_handler_install() != 0)
        return 1;
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, NULL);
    atomic_store(&serving, served);
    pthread_t t;
    if (pthread_create(&t, NULL, crasher, (void *)how) != 0)
        return 1;
    atomic_store(&created, true);
    if (served && serve(argv[2], &usr1) != 0)
        return 1;
    pthread_join(t, NULL);
    return 0; /* not reached */
}
