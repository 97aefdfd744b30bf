/*
 * abi.c -- test/abi.sh's consumer, built as a user's program is, against
 * include/ alone: prints the version it was compiled against
 * (CPPROF_VERSION_STRING, CPPROF_VERSION_HEX) and the one it runs with
 * (cpprof_version()), and allocates, so that abi.sh sees which malloc
 * the allocation binds to.  abi.sh links it with libcpprof.so, and with
 * libcpprof.a beside a definition of every internal name of cpprof's.
 */
#include <cpprof.h>

#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    cpprof_labelset *set = NULL;
    int rc = cpprof_labels(&set, 2, (const char *[]){"abi", "consumer"});
    if (rc != 0) {
        fprintf(stderr, "cpprof_labels: %s\n", cpprof_strerror(rc));
        return 1;
    }
    cpprof_labelset_release(set);
    /* volatile: the compiler may not drop a malloc+free pair. */
    void *volatile block = malloc(4096);
    free(block);
    printf("%s %#x %#x\n", CPPROF_VERSION_STRING, (unsigned)CPPROF_VERSION_HEX,
           cpprof_version());
    return 0;
}
