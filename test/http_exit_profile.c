/*
 * http_exit_profile.c -- the program of test/http_exit_profile.sh: a
 * program that exits while the server runs, as most programs end, without
 * cpprof_http_stop().
 *
 *   http_exit_profile --addr HOST:PORT
 *
 * Serves, says "serving http://ADDR/debug/pprof/", and on SIGTERM (taken
 * with sigwait by main; blocked in every thread) returns from main.
 */
#include <cpprof.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: http_exit_profile --addr HOST:PORT\n");
        return 2;
    }
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, NULL);
    int rc = cpprof_http_start(argv[2]);
    if (rc != 0) {
        fprintf(stderr, "http_exit_profile: %s\n", cpprof_strerror(rc));
        return 1;
    }
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);
    int sig;
    sigwait(&term, &sig);
    return 0; /* exit() with the server running */
}
