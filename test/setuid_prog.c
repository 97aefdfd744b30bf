/*
 * setuid_prog -- a program linked with cpprof that never calls it, for
 * test/setuid_env.sh, which runs a setuid-root (or file-capability) copy
 * of it as another user with CPPROF_HTTP set.
 *
 * It prints "ready at_secure=N ruid=R euid=E" once the library's
 * constructors have run (a server started from the environment would be
 * listening by then) and exits when its standard input closes.  With
 * "--serve ADDR" it then starts the server itself through the API, which
 * an AT_SECURE process may still do, and prints "serving ADDR".
 */
#include "cpprof.h"

#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    printf("ready at_secure=%lu ruid=%u euid=%u\n", getauxval(AT_SECURE),
           (unsigned)getuid(), (unsigned)geteuid());
    fflush(stdout);
    if (argc == 3 && strcmp(argv[1], "--serve") == 0) {
        int rc = cpprof_http_start(argv[2]);
        if (rc < 0) {
            fprintf(stderr, "cpprof_http_start: %s\n", cpprof_strerror(rc));
            return 1;
        }
        printf("serving %s\n", argv[2]);
        fflush(stdout);
    }
    char c;
    while (read(STDIN_FILENO, &c, 1) > 0)
        ;
    return 0;
}
