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
#include "serve.h"
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
    if (serve_start("http_exit_profile", argv[2], &term) != 0)
        return 1;
    serve_announce(argv[2]);
    int sig;
    sigwait(&term, &sig);
    return 0; /* exit() with the server running */
}
