/*
 * hostile_app -- a program that uses cpprof in the unusual but legal ways
 * of issue 18, for test/http_hostile.sh:
 *
 *   hostile_app HOST:PORT   serves /debug/pprof/ with accounting on while
 *                           a thread holds one label set of 40 keys, whose
 *                           keys and values carry bytes that are not valid
 *                           UTF-8 and keys that sanitise to the same
 *                           Prometheus name; prints "serving" and runs
 *                           until killed.
 *   hostile_app --json FILE exits 0 when jansson parses FILE (jansson
 *                           refuses text that is not valid UTF-8).
 *
 * The set is built from kv[] strings that are freed right after, so a
 * library keeping pointers into them would read freed memory (ASan,
 * valgrind).
 */
#define _GNU_SOURCE
#include <cpprof.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { KEYS = 40 };

/* Builds the 40-key set: k00..k35 with values "v\xffNN" (a lone byte that
 * starts no UTF-8 sequence), a key with a cut-short sequence, and three
 * keys that all sanitise to "a_b". */
static cpprof_labelset *hostile_set(void)
{
    char *kv[2 * KEYS];
    for (int i = 0; i < KEYS - 4; i++) {
        if (asprintf(&kv[2 * i], "k%02d", i) < 0 ||
            asprintf(&kv[2 * i + 1], "v\xff%02d", i) < 0)
            abort();
    }
    const char *odd[] = {"bad\xc3key", "cut\xe2\x82", "a.b", "x",
                         "a-b", "y", "a_b", "z\xed\xa0\x80"};
    for (int i = 0; i < 8; i++)
        if ((kv[2 * (KEYS - 4) + i] = strdup(odd[i])) == NULL)
            abort();
    cpprof_labelset *set;
    int rc = cpprof_labels(&set, 2 * KEYS, (const char *const *)kv);
    for (int i = 0; i < 2 * KEYS; i++) {
        memset(kv[i], 'X', strlen(kv[i]));
        free(kv[i]);
    }
    if (rc < 0) {
        fprintf(stderr, "hostile_app: %s\n", cpprof_strerror(rc));
        exit(1);
    }
    return set;
}

/* Holds the set for good, allocating now and then so that its row's
 * counters move, and otherwise asleep (the machine is shared). */
static void *holder(void *arg)
{
    cpprof_set_thread_labels(arg);
    for (;;) {
        free(malloc(4096));
        usleep(10000);
    }
    return NULL;
}

static int parse_json(const char *path)
{
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    if (doc == NULL) {
        fprintf(stderr, "%s: %s\n", path, err.text);
        return 1;
    }
    json_decref(doc);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--json") == 0)
        return parse_json(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: hostile_app HOST:PORT | --json FILE\n");
        return 2;
    }
    int rc = cpprof_accounting_enable();
    pthread_t t;
    if (rc == 0)
        rc = -pthread_create(&t, NULL, holder, hostile_set());
    if (rc == 0)
        rc = cpprof_http_start(argv[1]);
    if (rc < 0) {
        fprintf(stderr, "hostile_app: %s\n", cpprof_strerror(rc));
        return 1;
    }
    printf("serving\n");
    fflush(stdout);
    for (;;)
        pause();
}
