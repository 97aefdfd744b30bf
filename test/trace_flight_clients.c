/*
 * trace_flight_clients.c -- the program of test/trace_flight_clients.sh:
 * it fills the flight recorder (CPPROF_TRACE_FLIGHT_SECONDS, trace_kb)
 * and serves it, so that each snapshot of it is a large reply.
 *
 *   trace_flight_clients --addr HOST:PORT SWITCHES
 *
 * Two threads switch labels SWITCHES times each (cpprof_do between four
 * tenants, a region and a log line every 64th job), which writes the
 * recorder's region round more than once when SWITCHES is large enough
 * for trace_kb; then they stop, so that the process's memory stands still
 * while the script measures it.  On stdout: "serving URL" once the server
 * answers, "filled" when the switching is done.  SIGTERM ends the run.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include "serve.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long switches;
static cpprof_labelset *tenants[4];

static void job(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    long n = *(long *)arg;
    if (n % 64 == 0) {
        cpprof_trace_region_begin("batch");
        cpprof_trace_log("progress", "a batch of 64 jobs");
        cpprof_trace_region_end("batch");
    }
}

static void *switcher(void *arg)
{
    (void)arg;
    for (long n = 0; n < switches; n++)
        cpprof_do(NULL, tenants[n % 4], job, &n);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 || strcmp(argv[1], "--addr") != 0 ||
        (switches = atol(argv[3])) <= 0) {
        fprintf(stderr, "usage: trace_flight_clients --addr HOST:PORT "
                        "SWITCHES\n");
        return 2;
    }
    static const char *const names[] = {"acme", "globex", "initech",
                                        "umbrella"};
    for (int i = 0; i < 4; i++) {
        const char *kv[] = {"tenant", names[i]};
        if (cpprof_labels(&tenants[i], 2, kv) != 0)
            abort();
    }
    sigset_t term;
    if (serve_start("trace_flight_clients", argv[2], &term) != 0)
        return 1;
    serve_announce(argv[2]);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, switcher, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    printf("filled\n");
    fflush(stdout);
    int sig;
    sigwait(&term, &sig);
    return 0;
}
