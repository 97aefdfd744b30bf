/*
 * collector.c -- what the CPU sampler's collector thread costs while a
 * profile runs over a process of idle threads (the collector
 * used to list /proc/self/task 50 times a second).
 *
 * THREADS threads (default 100) park in pthread_cond_wait; a CPU profile
 * runs for SECONDS (default 10); just before it stops, the collector
 * thread (named "cpprof-sampler") is found in /proc/self/task and its CPU
 * clock read.  Idle threads are the case that matters: the collector's
 * work grows with the thread count, and no busy thread hides its cost.
 *
 * Usage: collector [THREADS [SECONDS]]   Prints:
 *   collector_cpu_ms N        the collector's CPU time over the window
 *   collector_cpu_percent P   of one core (goal: at most 0.05)
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int release;

static void *park(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!release)
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* The tid of the thread named `name`, or 0. */
static pid_t find_thread(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    pid_t found = 0;
    while (d && !found && (e = readdir(d))) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) &&
            strncmp(comm, name, strlen(name)) == 0)
            found = atoi(e->d_name);
        fclose(f);
    }
    if (d)
        closedir(d);
    return found;
}

/* Thread `tid`'s CPU time in ns (Linux's per-thread CPU clock id). */
static double thread_cpu_ns(pid_t tid)
{
    struct timespec t;
    clockid_t clock = (clockid_t)((~(unsigned)tid << 3) | 6);
    if (clock_gettime(clock, &t) != 0)
        return -1;
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    int nthreads = argc > 1 ? atoi(argv[1]) : 100;
    int seconds = argc > 2 ? atoi(argv[2]) : 10;
    pthread_t *threads = calloc((size_t)nthreads, sizeof *threads);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&threads[i], NULL, park, NULL) != 0) {
            fprintf(stderr, "collector: pthread_create failed\n");
            return 1;
        }
    int rc = cpprof_cpu_profile_start();
    if (rc != 0) {
        fprintf(stderr, "collector: %s\n", cpprof_strerror(rc));
        return 1;
    }
    sleep((unsigned)seconds);
    pid_t collector = find_thread("cpprof-sampler");
    double cpu = collector ? thread_cpu_ns(collector) : -1;
    unsigned char *buf;
    size_t len;
    cpprof_cpu_profile_stop(&buf, &len);
    free(buf);
    if (cpu < 0) {
        fprintf(stderr, "collector: no cpprof-sampler thread found\n");
        return 1;
    }
    printf("threads %d\nseconds %d\n", nthreads, seconds);
    printf("collector_cpu_ms %.2f\n", cpu / 1e6);
    printf("collector_cpu_percent %.4f\n", cpu / 1e7 / seconds);
    pthread_mutex_lock(&mu);
    release = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < nthreads; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    return 0;
}
