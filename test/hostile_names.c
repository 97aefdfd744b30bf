/*
 * hostile_names -- a program whose threads' names and labels hold quotes,
 * newlines, tabs and bytes that are not UTF-8, for test/http_names.sh:
 * every text form cpprof serves must still parse, and
 * no line of it may come from a name.
 *
 *   hostile_names HOST:PORT   serves /debug/pprof/ with accounting on,
 *                             prints "name N TID" for each named thread
 *                             and "serving", and runs until killed.
 *
 * The names are written to /proc/self/task/TID/comm, which takes any
 * bytes (pthread_setname_np might refuse some), each shaped to inject a
 * line of debug=2's form if written raw: a header's end and a fake frame,
 * a fake file line, a fake thread header, and invalid UTF-8 with a
 * backslash.  Each thread also carries one label set whose keys and
 * values do the same.
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* At most 15 bytes each: the kernel keeps no more of a name. */
static const char *const names[] = {
    "q\"]:\nfake(...)",
    "t\n\tfake:1 +0x1",
    "\r\nthread 1 \"x\"",
    "bad\xff\xfe\xc3(\\",
};
enum { NAMES = sizeof names / sizeof *names };

static cpprof_labelset *labels;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t named = PTHREAD_COND_INITIALIZER;
static int n_named;

static void set_own_name(const char *name)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)gettid());
    int fd = open(path, O_WRONLY);
    if (fd < 0 || write(fd, name, strlen(name)) != (ssize_t)strlen(name)) {
        perror(path);
        exit(1);
    }
    close(fd);
}

static void *named_thread(void *arg)
{
    int i = (int)(long)arg;
    cpprof_set_thread_labels(labels);
    set_own_name(names[i]);
    pthread_mutex_lock(&lock);
    printf("name %d %d\n", i, (int)gettid());
    n_named++;
    pthread_cond_signal(&named);
    pthread_mutex_unlock(&lock);
    for (;;) { /* allocating now and then, so accounting has a row */
        free(malloc(4096));
        usleep(10000);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hostile_names HOST:PORT\n");
        return 2;
    }
    static const char *const kv[] = {
        "k\"\n", "v\n\tfake.c:1 +0x1",
        "tab\tkey", "line\r\nthread 2 \"y\" [running]:",
        "utf", "bad\xff\xc3",
    };
    int rc = cpprof_accounting_enable();
    if (rc == 0)
        rc = cpprof_labels(&labels, sizeof kv / sizeof *kv, kv);
    for (long i = 0; rc == 0 && i < NAMES; i++) {
        pthread_t t;
        rc = -pthread_create(&t, NULL, named_thread, (void *)i);
    }
    pthread_mutex_lock(&lock);
    while (rc == 0 && n_named < NAMES)
        pthread_cond_wait(&named, &lock);
    pthread_mutex_unlock(&lock);
    if (rc == 0)
        rc = cpprof_http_start(argv[1]);
    if (rc < 0) {
        fprintf(stderr, "hostile_names: %s\n", cpprof_strerror(rc));
        return 1;
    }
    printf("serving\n");
    fflush(stdout);
    for (;;)
        pause();
}
