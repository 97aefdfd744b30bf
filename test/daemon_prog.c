/*
 * daemon_prog -- a daemon-style program that has never heard of cpprof,
 * for test/zero_code.sh: as many daemons do at start, it closes every
 * descriptor it inherited above stderr, then opens its own database file
 * and appends and reads back a record 1,000 times.  A descriptor still in
 * use by someone else in the process (a preloaded server polling a number
 * the file now has) would move the file's offset and lose read-backs.
 *
 * Usage: daemon_prog FILE.  Prints "lost N of 1000" and then waits to be
 * killed, so that the test can see what the server said meanwhile; exits
 * 1 at once when it cannot run its loop.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { RECORDS = 1000 };

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: daemon_prog FILE\n");
        return 2;
    }
    if (close_range(3, ~0U, 0) != 0) {
        perror("close_range");
        return 1;
    }
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    int lost = 0;
    for (int i = 0; i < RECORDS; i++) {
        char rec[32], back[32] = "";
        int len = snprintf(rec, sizeof rec, "record %04d\n", i);
        off_t at = lseek(fd, 0, SEEK_END);
        if (write(fd, rec, (size_t)len) != len)
            return perror("write"), 1;
        /* Give anything else polling this number a chance to act. */
        usleep(200);
        if (lseek(fd, at, SEEK_SET) != at ||
            read(fd, back, (size_t)len) != len || memcmp(rec, back, (size_t)len))
            lost++;
    }
    printf("lost %d of %d\n", lost, RECORDS);
    fflush(stdout);
    for (;;)
        pause();
}
