/*
 * daemon_stderr -- a daemon that has never heard of cpprof and closes every
 * descriptor, 0-2 included, then opens its three data files, which get 0,
 * 1 and 2, for test/daemon_stderr.sh.  Run with cpprof
 * preloaded serving (zero-code mode), which loses its listening socket in
 * the close: cpprof's thread that holds it until the first client
 * (cpprof-listen, zerolisten.c) notices within a second, says so on
 * stderr, and ends.  That notice (then the watch thread's) used to land
 * in the third data file.
 *
 * Once cpprof's listening thread has named itself (the address is held),
 * it writes "data file N\n" into file N, waits (at most 60 s) until no
 * thread named cpprof-listen is left, which is after the notice was
 * written, and exits 0; or, with "abort" as a fourth argument, calls
 * abort() then, for cpprof's crash handler (CPPROF_CRASH_HANDLER=1) to
 * write its traceback.  With its descriptors gone it has no stderr: a
 * failure is its exit status, 3 to 6, which the script names.
 *
 * Usage: daemon_stderr FILE0 FILE1 FILE2 [abort]
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    NO_WATCH_THREAD = 3, /* the server was not running: nothing to test */
    CLOSE_FAILED = 4,
    NOT_STD_NUMBERS = 5, /* a data file did not get its number 0-2 */
    WATCH_STAYED = 6,    /* cpprof's watch thread never ended */
};

/* Whether a thread of this process is named `name`. */
static bool has_thread(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, comm, sizeof comm - 1);
        close(fd);
        found = n > 0 && strncmp(comm, name, strlen(name)) == 0 &&
                comm[strlen(name)] == '\n';
    }
    closedir(d);
    return found;
}

/* Waits (at most 60 s) until a thread named `name` is there, or gone. */
static bool await_thread(const char *name, bool there)
{
    for (int tick = 0; tick < 6000; tick++) {
        if (has_thread(name) == there)
            return true;
        struct timespec pause = {0, 10 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    return false;
}

int main(int argc, char **argv)
{
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "abort") == 0)) {
        fprintf(stderr, "usage: daemon_stderr FILE0 FILE1 FILE2 [abort]\n");
        return 2;
    }
    if (!await_thread("cpprof-listen", true))
        return NO_WATCH_THREAD;
    if (close_range(0, ~0U, 0) != 0)
        return CLOSE_FAILED;
    for (int i = 0; i < 3; i++) {
        char data[32];
        int len = snprintf(data, sizeof data, "data file %d\n", i);
        if (open(argv[1 + i], O_WRONLY | O_CREAT | O_TRUNC, 0600) != i ||
            write(i, data, (size_t)len) != len)
            return NOT_STD_NUMBERS;
    }
    if (!await_thread("cpprof-listen", false))
        return WATCH_STAYED;
    if (argc == 5)
        abort();
    return 0;
}
