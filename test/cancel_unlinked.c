/*
 * cancel_unlinked.c -- cpprof_do restores the labels when pthread_cancel
 * unwinds through it, in a C program that does not link libgcc_s.
 *
 * libcpprof.so does not link libgcc_s (src/upper_gcc.c): cpprof_do's
 * personality routine and _Unwind_Resume are libgcc_s's, found when an
 * unwind first needs them.  In a C program built without -fexceptions
 * nothing links libgcc_s; glibc loads it for itself (not into the global
 * scope) when a thread is cancelled.  The cancelled thread's cleanup
 * handler, pushed outside cpprof_do, must find the labels it had before
 * cpprof_do, put back by cpprof_do's cleanup on the way out.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char after[64]; /* the tenant the cleanup handler found */

static int mapped(const char *name)
{
    char line[512];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, name) != NULL;
    if (f)
        fclose(f);
    return found;
}

static void note_labels(void *arg)
{
    (void)arg;
    cpprof_labelset *now = cpprof_thread_labels();
    const char *v = NULL;
    bool found = false;
    if (now && cpprof_label(now, "tenant", &v, &found) == 0 && found)
        snprintf(after, sizeof after, "%s", v);
    else
        snprintf(after, sizeof after, "(none)");
    cpprof_labelset_release(now);
}

static void wait_for_cancel(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    *(volatile int *)arg = 1;
    for (;;)
        pause(); /* a cancellation point */
}

static void *worker(void *arg)
{
    const char *outer_kv[] = {"tenant", "outer"};
    const char *inner_kv[] = {"tenant", "inner"};
    cpprof_labelset *outer, *inner;
    if (cpprof_labels(&outer, 2, outer_kv) || cpprof_labels(&inner, 2, inner_kv))
        return NULL;
    cpprof_set_thread_labels(outer);
    pthread_cleanup_push(note_labels, NULL);
    cpprof_do(NULL, inner, wait_for_cancel, arg);
    pthread_cleanup_pop(0);
    return NULL;
}

int main(void)
{
    if (mapped("libgcc_s")) {
        printf("SKIP: libgcc_s is mapped before any unwind\n");
        return 77;
    }
    volatile int inside = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, worker, (void *)&inside) != 0)
        return 1;
    while (!inside)
        usleep(1000);
    pthread_cancel(t);
    void *result;
    pthread_join(t, &result);
    printf("cancelled %d, labels in the cleanup handler: tenant=%s\n",
           result == PTHREAD_CANCELED, after);
    if (result != PTHREAD_CANCELED || strcmp(after, "outer") != 0) {
        printf("FAIL: cpprof_do did not restore tenant=outer\n");
        return 1;
    }
    return 0;
}
