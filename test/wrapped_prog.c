/*
 * wrapped_prog -- the program a wrapper runs, for test/wrappers.sh: built
 * without cpprof, it sleeps SECONDS (its arguments after that only name
 * it in /debug/pprof/cmdline) and exits, so that whichever process serves
 * zero-code mode's address can be told from the wrapper by its cmdline.
 *
 * Usage: wrapped_prog SECONDS [TAG...]
 */
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    struct timespec left = {argc > 1 ? atoi(argv[1]) : 0, 0};
    while (nanosleep(&left, &left) != 0)
        continue;
    return 0;
}
