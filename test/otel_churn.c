/*
 * otel_churn -- label sets applied as fast as a thread can, for
 * test/otel_context.sh's reader: where the demo switches labels once per
 * job, each of these threads switches them millions of times a second, so
 * reads land inside apply and restore far more often.  Besides the demo's
 * six sets it applies the records' edge cases: a value longer than a record
 * entry may be (truncated, on a UTF-8 boundary) and a set carrying a W3C
 * trace context.  Runs until killed.
 *
 * Usage: otel_churn THREADS
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NSETS = 8 };
static cpprof_labelset *sets[NSETS];

static void nothing(void *arg, const cpprof_labelset *labels)
{
    (void)labels;
    ++*(volatile unsigned long *)arg;
}

static void *churn(void *arg)
{
    volatile unsigned long n = 0;
    for (unsigned i = (unsigned)(size_t)arg;; i++)
        cpprof_do(NULL, sets[i % NSETS], nothing, (void *)&n);
    return NULL;
}

static void check(int rc)
{
    if (rc) {
        fprintf(stderr, "otel_churn: %s\n", cpprof_strerror(rc));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    static const char *const tenants[] = {"acme", "globex", "initech"};
    static const char *const kinds[] = {"reindex", "export"};
    int nthreads = argc > 1 ? atoi(argv[1]) : 2, k = 0;
    for (int t = 0; t < 3; t++)
        for (int j = 0; j < 2; j++) {
            const char *kv[] = {"tenant", tenants[t], "kind", kinds[j]};
            check(cpprof_labels(&sets[k++], 4, kv));
        }
    /* 200 two-byte characters: 400 bytes, cut to 127 characters. */
    char note[401] = "";
    for (int i = 0; i < 200; i++)
        strcat(note, "\xc3\xa9");
    const char *long_kv[] = {"tenant", "acme", "note", note};
    check(cpprof_labels(&sets[k++], 4, long_kv));
    const char *parent_kv[] = {"tenant", "globex"};
    cpprof_labelset *parent;
    check(cpprof_labels(&parent, 2, parent_kv));
    const unsigned char trace[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,
                                     13, 14, 15, 16};
    const unsigned char span[8] = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
                                   0xa8};
    check(cpprof_labels_with_trace(&sets[k++], parent, trace, span, 1));
    pthread_t tid;
    for (int i = 0; i < nthreads; i++)
        check(-pthread_create(&tid, NULL, churn, (void *)(size_t)i));
    pthread_join(tid, NULL); /* forever: the churners never return */
    return 0;
}
