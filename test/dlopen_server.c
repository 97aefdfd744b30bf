/*
 * dlopen_server.c -- a program that dlopens libcpprof.so (RTLD_LOCAL, as
 * Python's ctypes and plugin hosts do) starts and stops the HTTP server
 * three times, and a CPU profile with it: every stop returns.
 *
 * Loaded so, cpprof's own definition of pthread_cond_wait (the block
 * profiler's) is outside the global scope, and an unversioned call to it
 * from cpprof's code bound to glibc's oldest version, whose wait the
 * server's stop never woke: the first stop hung for ever joining the
 * profile-window threads.  A watchdog turns a hang into a failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void hung(int sig)
{
    (void)sig;
    static const char msg[] =
        "FAIL: dlopen_server: a start or stop did not return in 60 s\n";
    write(2, msg, sizeof msg - 1);
    _exit(1);
}

static void *symbol(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (!f) {
        fprintf(stderr, "FAIL: dlopen_server: no %s: %s\n", name, dlerror());
        exit(1);
    }
    return f;
}

int main(void)
{
    signal(SIGALRM, hung);
    alarm(60);
    void *lib = dlopen(LIBCPPROF_SO, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "FAIL: dlopen_server: %s\n", dlerror());
        return 1;
    }
    int (*start)(const char *) = symbol(lib, "cpprof_http_start");
    int (*stop)(void) = symbol(lib, "cpprof_http_stop");
    int (*cpu_start)(void) = symbol(lib, "cpprof_cpu_profile_start");
    int (*cpu_stop)(unsigned char **, size_t *) =
        symbol(lib, "cpprof_cpu_profile_stop");
    const char *(*strerror_)(int) = symbol(lib, "cpprof_strerror");
    for (int round = 1; round <= 3; round++) {
        int rc = start("127.0.0.1:0");
        if (rc == 0)
            rc = cpu_start();
        unsigned char *buf = NULL;
        size_t len = 0;
        if (rc == 0)
            rc = cpu_stop(&buf, &len);
        free(buf);
        int stopped = stop();
        if (rc != 0 || stopped != 0) {
            fprintf(stderr, "FAIL: dlopen_server: round %d: %s\n", round,
                    strerror_(rc != 0 ? rc : stopped));
            return 1;
        }
        printf("round %d: started, profiled (%zu bytes), stopped\n", round,
               len);
    }
    printf("PASS: dlopen_server\n");
    return 0;
}
