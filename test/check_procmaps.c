/*
 * check_procmaps.c -- the /proc/self/maps line parser (src/procmaps.c) on
 * the line forms the kernel writes and on lines cut short, as the crash
 * handler may hold them, and the reader on this process's own maps; the
 * listing of /proc/self/task (src/proctasks.c) into arrays of every size;
 * a status file's field read a few lines at a time (src/procfile.c).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procfile.h"
#include "procmaps.h"
#include "proctasks.h"

static bool parse(const char *text, procmaps_line *m)
{
    return procmaps_parse(text, strlen(text), m);
}

START_TEST(file_mapping)
{
    procmaps_line m;
    ck_assert(parse("7f1c2a000000-7f1c2a1c8000 r-xp 00028000 fd:01 "
                    "1054043                    /usr/lib/libc.so.6\n",
                    &m));
    ck_assert_uint_eq(m.lo, 0x7f1c2a000000);
    ck_assert_uint_eq(m.hi, 0x7f1c2a1c8000);
    ck_assert(memcmp(m.perms, "r-xp", 4) == 0);
    ck_assert_uint_eq(m.offset, 0x28000);
    ck_assert_uint_eq(m.dev_major, 0xfd);
    ck_assert_uint_eq(m.dev_minor, 1);
    ck_assert_uint_eq(m.inode, 1054043);
    ck_assert_uint_eq(m.path_len, strlen("/usr/lib/libc.so.6"));
    ck_assert(memcmp(m.path, "/usr/lib/libc.so.6", m.path_len) == 0);
}
END_TEST

START_TEST(anonymous_and_special)
{
    procmaps_line m;
    ck_assert(parse("7ffd1000-7ffd3000 rw-p 00000000 00:00 0 \n", &m));
    ck_assert_uint_eq(m.path_len, 0);
    ck_assert(parse("7ffd1000-7ffd3000 rw-p 00000000 00:00 0", &m));
    ck_assert_uint_eq(m.path_len, 0);
    ck_assert(parse("7ffd1000-7ffd3000 r-xp 00000000 00:00 0   [vdso]", &m));
    ck_assert(procmaps_path_is(&m, "[vdso]"));
    ck_assert(!procmaps_path_is(&m, "[vdso"));
    ck_assert(parse("1000-2000 r-xp 00000000 08:02 12 /tmp/a b (deleted)\n",
                    &m));
    ck_assert(procmaps_path_is(&m, "/tmp/a b (deleted)"));
}
END_TEST

START_TEST(cut_short_or_malformed)
{
    procmaps_line m;
    /* Cut in its path (the crash handler's line buffer): still a line. */
    ck_assert(parse("1000-2000 r-xp 00000000 08:02 12 /very/long/pa", &m));
    ck_assert(m.perms[2] == 'x');
    ck_assert(!parse("1000-2000 r-xp 00000000 08:02", &m));
    ck_assert(!parse("1000-2000 r-x 00000000 08:02 12 /a", &m));
    ck_assert(!parse("1000 2000 r-xp 00000000 08:02 12 /a", &m));
    ck_assert(!parse("1000-2000 r-xp 0000000g 08:02 12 /a", &m));
    ck_assert(!parse("10000000000000000-2000 r-xp 0 08:02 12 /a", &m));
    ck_assert(!parse("", &m));
    /* Only len bytes are read. */
    ck_assert(!procmaps_parse("1000-2000 r-xp 0 08:02 12", 12, &m));
}
END_TEST

/* procmaps_foreach's callback: counts lines, and finds the one holding
 * this function's code. */
struct seen {
    size_t lines;
    bool own_code, sorted;
    uintptr_t last_lo;
};

static int see(const procmaps_line *m, const char *text, size_t len,
               void *arg)
{
    struct seen *s = arg;
    uintptr_t here = (uintptr_t)&see;
    ck_assert_uint_eq(strlen(text), len);
    ck_assert_uint_eq(strlen(m->path), m->path_len);
    s->sorted = s->sorted && m->lo >= s->last_lo;
    s->last_lo = m->lo;
    s->lines++;
    if (here >= m->lo && here < m->hi)
        s->own_code = m->perms[2] == 'x' && m->path_len > 0;
    return 0;
}

static int stop_at_third(const procmaps_line *m, const char *text,
                         size_t len, void *arg)
{
    (void)m, (void)text, (void)len;
    return ++*(int *)arg == 3 ? 42 : 0;
}

START_TEST(reads_own_maps)
{
    struct seen s = {.sorted = true};
    ck_assert_int_eq(procmaps_foreach(see, &s), 0);
    ck_assert_uint_gt(s.lines, 3);
    ck_assert(s.own_code);
    ck_assert(s.sorted);
    int n = 0;
    ck_assert_int_eq(procmaps_foreach(stop_at_third, &n), 42);
    ck_assert_int_eq(n, 3);
}
END_TEST

static int parked_pipe[2];

static void *park(void *arg)
{
    char c;
    while (read(parked_pipe[0], &c, 1) < 0)
        ;
    return arg;
}

static int by_tid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

/* The threads readdir lists, sorted, into tids[cap]; how many. */
static size_t readdir_tids(pid_t *tids, size_t cap)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.' && n < cap)
            tids[n++] = atoi(e->d_name);
    closedir(d);
    qsort(tids, n, sizeof *tids, by_tid);
    return n;
}

/* With 100 threads more than a batch of any of these arrays holds: the
 * listing gives every thread once, whatever the array's size, and never
 * writes past its end (the trace snapshot's 64 slots took up to 85 tids
 * where tids are short, as in a pid namespace). */
START_TEST(tasks_listed_into_any_array)
{
    enum { PARKED = 100, MAX = 256, GUARD = 64 };
    ck_assert_int_eq(pipe(parked_pipe), 0);
    pthread_t threads[PARKED];
    for (int i = 0; i < PARKED; i++)
        ck_assert_int_eq(pthread_create(&threads[i], NULL, park, NULL), 0);
    pid_t want[MAX], got[MAX];
    size_t nwant = readdir_tids(want, MAX);
    ck_assert_uint_ge(nwant, PARKED + 1);
    ck_assert_int_eq(proctasks_next(-1, got, PROCTASKS_MIN_TIDS - 1),
                     -EINVAL);
    const size_t caps[] = {PROCTASKS_MIN_TIDS, 9, 13, 64, 100,
                           PROCTASKS_BATCH_TIDS};
    for (size_t c = 0; c < sizeof caps / sizeof *caps; c++) {
        size_t cap = caps[c];
        pid_t *array = malloc((cap + GUARD) * sizeof *array);
        ck_assert_ptr_nonnull(array);
        for (size_t i = 0; i < cap + GUARD; i++)
            array[i] = -1;
        int dirfd = proctasks_open();
        ck_assert_int_ge(dirfd, 0);
        size_t n = 0;
        int batch;
        while ((batch = proctasks_next(dirfd, array, cap)) > 0) {
            ck_assert_uint_le((size_t)batch, cap);
            for (int i = 0; i < batch && n < MAX; i++)
                got[n++] = array[i];
        }
        close(dirfd);
        ck_assert_int_eq(batch, 0);
        for (size_t i = cap; i < cap + GUARD; i++)
            ck_assert_msg(array[i] == -1,
                          "an array of %zu tids written at %zu", cap, i);
        free(array);
        qsort(got, n, sizeof *got, by_tid);
        ck_assert_msg(n == nwant && memcmp(got, want, n * sizeof *got) == 0,
                      "an array of %zu tids listed %zu threads of %zu", cap,
                      n, nwant);
    }
    close(parked_pipe[1]);
    for (int i = 0; i < PARKED; i++)
        pthread_join(threads[i], NULL);
    close(parked_pipe[0]);
}
END_TEST

/* A status file's field through procfile_status_value's small buffer:
 * after a line longer than the buffer (a Groups line of many groups), at
 * the file's last line without its newline, cut to the caller's room, a
 * field whose own line is longer than the buffer, and none. */
START_TEST(status_value_read_in_pieces)
{
    char path[] = "/tmp/check_procfile.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "Name:\tcheck\nGroups:\t");
    for (int i = 0; i < 2000; i++)
        fprintf(f, "%d ", 100000 + i);
    fprintf(f, "\nSigQ:\t3/63541\nLong:\t");
    for (int i = 0; i < 1000; i++)
        fputc('x', f);
    fprintf(f, "\nSigBlk:\t0000000000010000\nLast:\t42");
    fclose(f);
    char v[64];
    ck_assert_int_eq(procfile_status_value(AT_FDCWD, path, "Name", v,
                                           sizeof v), 5);
    ck_assert_str_eq(v, "check");
    ck_assert_int_eq(procfile_status_value(AT_FDCWD, path, "SigQ", v,
                                           sizeof v), 7);
    ck_assert_str_eq(v, "3/63541");
    ck_assert_int_eq(procfile_status_value(AT_FDCWD, path, "SigBlk", v,
                                           sizeof v), 16);
    ck_assert_str_eq(v, "0000000000010000");
    ck_assert_int_eq(procfile_status_value(AT_FDCWD, path, "Last", v,
                                           sizeof v), 2);
    ck_assert_str_eq(v, "42");
    ck_assert_int_eq(procfile_status_value(AT_FDCWD, path, "SigQ", v, 4), 3);
    ck_assert_str_eq(v, "3/6");
    ck_assert_int_eq(procfile_status_value(AT_FDCWD, path, "Long", v,
                                           sizeof v), (int)sizeof v - 1);
    ck_assert_int_eq(v[0], 'x');
    ck_assert_int_eq(procfile_status_value(AT_FDCWD, path, "Gone", v,
                                           sizeof v), -ENOENT);
    ck_assert_int_eq(procfile_status_value(AT_FDCWD, path, "Groups", v,
                                           sizeof v), (int)sizeof v - 1);
    ck_assert_int_eq(strncmp(v, "100000 100001", 13), 0);
    unlink(path);
    ck_assert_int_eq(procfile_status_value(AT_FDCWD, path, "SigQ", v,
                                           sizeof v), -ENOENT);
    ck_assert_int_gt(procfile_status_value(AT_FDCWD, "/proc/self/status",
                                           "SigQ", v, sizeof v), 2);
    ck_assert_ptr_nonnull(strchr(v, '/'));
}
END_TEST

static Suite *procmaps_suite(void)
{
    Suite *s = suite_create("procmaps");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, file_mapping);
    tcase_add_test(tc, anonymous_and_special);
    tcase_add_test(tc, cut_short_or_malformed);
    tcase_add_test(tc, reads_own_maps);
    tcase_add_test(tc, tasks_listed_into_any_array);
    tcase_add_test(tc, status_value_read_in_pieces);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(procmaps_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
