/*
 * profile_stop.c -- what stopping a CPU profile costs the caller, and
 * whether the process survives many stops while its threads spin.
 *
 * Stopping deletes the timers, sets the profiling signal to SIG_IGN
 * (which discards ticks still pending) and restores the disposition from
 * before; when that is SIG_DFL it first holds SIG_IGN 25 ms, because
 * qemu-user acts on a tick it had queued by the disposition of the moment
 * it delivers it (src/sampler_signal.c, sampler_restore_handler).  A
 * death here is that race: run it under qemu-aarch64 against an arm64
 * build, at 1000 Hz (CPPROF_CPU_HZ=1000), to see it; natively the kernel
 * sends nothing after timer_delete returns.
 *
 * Usage: profile_stop [ROUNDS [THREADS]]   (default 300 rounds, 2 threads)
 * Each round: start, 30 ms of THREADS spinning threads, stop.  Prints:
 *   stops N            rounds done (so: N stops survived)
 *   stop_ms_median X   wall ms per cpprof_cpu_profile_stop
 *   stop_ms_max X
 */
#include <cpprof.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static atomic_bool stop_spinning;

static void *spin(void *arg)
{
    (void)arg;
    volatile unsigned long n = 0;
    while (!atomic_load(&stop_spinning))
        n++;
    return NULL;
}

static double wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void check(int rc, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "profile_stop: %s: %s\n", what, cpprof_strerror(rc));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    int nthreads = argc > 2 ? atoi(argv[2]) : 2;
    if (rounds < 1 || nthreads < 0 || nthreads > 64) {
        fprintf(stderr, "usage: profile_stop [ROUNDS (1..) [THREADS (0..64)]]\n");
        return 2;
    }
    pthread_t threads[64];
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&threads[i], NULL, spin, NULL) != 0) {
            perror("profile_stop: pthread_create");
            return 1;
        }
    double *ms = malloc(sizeof *ms * (size_t)rounds);
    if (!ms)
        return 1;
    for (int r = 0; r < rounds; r++) {
        check(cpprof_cpu_profile_start(), "start");
        struct timespec window = {0, 30000000};
        nanosleep(&window, NULL);
        unsigned char *buf;
        size_t len;
        double t0 = wall_ms();
        check(cpprof_cpu_profile_stop(&buf, &len), "stop");
        ms[r] = wall_ms() - t0;
        free(buf);
    }
    atomic_store(&stop_spinning, true);
    for (int i = 0; i < nthreads; i++)
        pthread_join(threads[i], NULL);
    qsort(ms, (size_t)rounds, sizeof *ms, by_value);
    printf("stops %d\nstop_ms_median %.2f\nstop_ms_max %.2f\n", rounds,
           ms[rounds / 2], ms[rounds - 1]);
    free(ms);
    return 0;
}
