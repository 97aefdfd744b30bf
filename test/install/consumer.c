/*
 * consumer.c -- a C program built against an installed cpprof, as a user
 * builds one: only <cpprof.h> and the build system's view of the package
 * (test/install_consumers.sh builds it with pkg-config, shared and static,
 * and with Meson).
 *
 *   consumer write FILE          a 1-second labelled CPU profile into FILE
 *   consumer serve ADDR STOP     serves /debug/pprof/ on ADDR and burns CPU
 *                                under labels until the file STOP exists
 *                                (at most 60 s), for a client to profile
 *
 * The labels are consumer=NAME (NAME from CONSUMER_NAME, default "c") and
 * tenant=acme, so the profile shows which build made it.
 */
#include <cpprof.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double clock_seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static volatile unsigned long sink;

/* Burns CPU for `cpu_seconds`, or until the file `stop` exists. */
struct burn {
    double cpu_seconds;
    const char *stop;
};

static void burn(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    const struct burn *b = arg;
    double start = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    double wall_end = clock_seconds(CLOCK_MONOTONIC) + 60;
    while (clock_seconds(CLOCK_THREAD_CPUTIME_ID) - start < b->cpu_seconds &&
           clock_seconds(CLOCK_MONOTONIC) < wall_end) {
        for (unsigned long i = 0; i < 100000; i++)
            sink += i * i;
        if (b->stop != NULL && access(b->stop, F_OK) == 0)
            return;
    }
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "consumer: %s: %s\n", what, cpprof_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    const char *name = getenv("CONSUMER_NAME");
    const char *kv[] = {"consumer", name != NULL ? name : "c", "tenant", "acme"};
    cpprof_labelset *labels;
    int rc;

    if (argc == 3 && strcmp(argv[1], "write") == 0) {
        unsigned char *buf;
        size_t len;
        struct burn b = {1.0, NULL};
        if ((rc = cpprof_labels(&labels, 4, kv)) < 0)
            return fail("cpprof_labels", rc);
        if ((rc = cpprof_cpu_profile_start()) < 0)
            return fail("cpprof_cpu_profile_start", rc);
        if ((rc = cpprof_do(NULL, labels, burn, &b)) < 0)
            return fail("cpprof_do", rc);
        if ((rc = cpprof_cpu_profile_stop(&buf, &len)) < 0)
            return fail("cpprof_cpu_profile_stop", rc);
        FILE *f = fopen(argv[2], "wb");
        if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
            perror(argv[2]);
            return 1;
        }
        free(buf);
        cpprof_labelset_release(labels);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "serve") == 0) {
        struct burn b = {60.0, argv[3]};
        if ((rc = cpprof_labels(&labels, 4, kv)) < 0)
            return fail("cpprof_labels", rc);
        if ((rc = cpprof_http_start(argv[2])) < 0)
            return fail(argv[2], rc);
        printf("serving\n");
        fflush(stdout);
        if ((rc = cpprof_do(NULL, labels, burn, &b)) < 0)
            return fail("cpprof_do", rc);
        cpprof_http_stop();
        cpprof_labelset_release(labels);
        return 0;
    }
    fprintf(stderr, "usage: consumer write FILE | consumer serve ADDR STOP\n");
    return 2;
}
