/*
 * crash_labels.c -- a program that crashes inside a labelled scope, for
 * test/crash_labels.sh.
 *
 *   crash_labels segv|abort api|env|none
 *
 * Names its thread "crasher", installs the crash handler through the API
 * (api), leaves it to CPPROF_CRASH_HANDLER (env) or to nobody (none), then,
 * inside cpprof_do() with {"kind":"crash", "tenant":"acme"}, writes through
 * a null pointer or calls abort().  Before crashing it prints the address
 * of the crashing function, so the script can find it in the stack.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

static volatile int *volatile nowhere;

__attribute__((noinline)) static void crash_now(const char *how)
{
    if (strcmp(how, "abort") == 0)
        abort();
    *nowhere = 1;
}

static void in_scope(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    crash_now(arg);
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    prctl(PR_SET_NAME, "crasher");
    if (strcmp(argv[2], "api") == 0 && cpprof_crash_handler_install() != 0)
        return 1;
    const char *kv[] = {"tenant", "acme", "kind", "crash"};
    cpprof_labelset *labels;
    if (cpprof_labels(&labels, 4, kv) != 0)
        return 1;
    printf("crash_now %p\n", (void *)crash_now);
    fflush(stdout);
    cpprof_do(NULL, labels, in_scope, argv[1]);
    return 0; /* not reached */
}
