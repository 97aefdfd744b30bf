/*
 * fork_faults -- what a fork costs a program that does not serve, for
 * test/fork_cheap.sh: built as any program is, without cpprof, and run
 * with and without libcpprof.so preloaded.
 *
 * Usage: fork_faults ROUNDS.  Forks ROUNDS children that exit(0) at once
 * and prints the children's page faults per fork (a child that does
 * nothing faults only to copy the pages its exit writes, so the count
 * measures what loaded libraries cost it, and a loaded machine does not
 * blur it), then the libraries of cpprof's upper layers mapped in this
 * process, or "none".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* As /proc/self/maps names them (Debian's libdw is libdw-0.188.so). */
static const char *const upper_libraries[] = {
    "libcpprof-upper.so", "libmicrohttpd.so", "libgnutls.so", "/libdw",
    "/libelf", "libprotobuf-c.so", "libjansson.so", "libz.so",
};

static long children_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

static void print_mapped(void)
{
    const size_t n = sizeof upper_libraries / sizeof *upper_libraries;
    int seen[sizeof upper_libraries / sizeof *upper_libraries] = {0};
    char line[4096];
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) {
        perror("fork_faults: /proc/self/maps");
        exit(2);
    }
    while (fgets(line, sizeof line, maps))
        for (size_t i = 0; i < n; i++)
            if (strstr(line, upper_libraries[i]))
                seen[i] = 1;
    fclose(maps);
    int any = 0;
    printf("mapped:");
    for (size_t i = 0; i < n; i++)
        if (seen[i]) {
            printf(" %s", upper_libraries[i]);
            any = 1;
        }
    printf("%s\n", any ? "" : " none");
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 0;
    if (rounds <= 0) {
        fprintf(stderr, "usage: fork_faults ROUNDS\n");
        return 2;
    }
    long before = children_faults();
    for (int i = 0; i < rounds; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork_faults: fork");
            return 2;
        }
        if (pid == 0)
            exit(0);
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "fork_faults: a child failed\n");
            return 2;
        }
    }
    printf("child_faults_per_fork: %ld\n",
           (children_faults() - before + rounds / 2) / rounds);
    print_mapped();
    return 0;
}
