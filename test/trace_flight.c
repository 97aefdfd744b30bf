/*
 * trace_flight.c -- the flight recorder, checked against events of known
 * times: run with CPPROF_TRACE_FLIGHT_SECONDS=2, it logs a mark
 * (cpprof_trace_log) every 10 ms for 5 s from two threads, each mark's
 * message holding its own CLOCK_MONOTONIC time, switching labels between
 * marks; then writes the recorder's snapshot (cpprof_trace_flight_write)
 * to the file named by argv[1] and prints on stdout the time it asked
 * for it ("snapshot_at NS") and every mark it logged ("mark NS AFTER_NS
 * TENANT", AFTER_NS read once cpprof_trace_log returned).
 * trace_flight.sh decodes the file and compares.
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

static void mark(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    char message[64];
    long long t = now_ns();
    snprintf(message, sizeof message, "%lld", t);
    if (cpprof_trace_log("mark", message) != 0)
        abort();
    long long after = now_ns(); /* the event's time lies between the two */
    pthread_mutex_lock(&out_mu);
    printf("mark %lld %lld %s\n", t, after, (const char *)arg);
    pthread_mutex_unlock(&out_mu);
}

static void *marker(void *arg)
{
    const char *kv[] = {"tenant", arg};
    cpprof_labelset *set;
    if (cpprof_labels(&set, 2, kv) != 0)
        abort();
    for (int i = 0; i < 500; i++) {
        cpprof_do(NULL, set, mark, arg);
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    cpprof_labelset_release(set);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: trace_flight FILE\n");
        return 2;
    }
    pthread_t a, b;
    pthread_create(&a, NULL, marker, "acme");
    pthread_create(&b, NULL, marker, "globex");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    long long at = now_ns();
    int rc = cpprof_trace_flight_write(fd);
    close(fd);
    printf("snapshot_at %lld\n", at);
    if (rc != 0) {
        fprintf(stderr, "cpprof_trace_flight_write: %s\n",
                cpprof_strerror(rc));
        return 1;
    }
    return 0;
}
