/*
 * fork.c -- what having cpprof loaded costs a program's fork() when the
 * child does not serve: fork, the child's exit, the parent's waitpid.
 *
 * A pre-forking server (PostgreSQL's postmaster, Apache prefork) pays
 * this per connection.  The program is not linked with cpprof: it runs
 * itself again (exec) for each measurement, without the library, with
 * libcpprof.so in LD_PRELOAD and no server, preloaded serving
 * (CPPROF_HTTP=127.0.0.1:0: zero-code mode holds the address and loads
 * the server at its first client, each child an armed worker), the same
 * with CPPROF_HTTP_FORKS=0 ("serving-noforks": children are no workers),
 * and serving once the process asked its own server for its index
 * ("asked": the server loaded and its threads running, so what is timed
 * is what a child pays for the server's threads, libraries and mappings),
 * so that what is timed is the real binary and
 * the preload, never a libtool wrapper script.  The child does nothing
 * but exit, by exit(0) (atexit handlers and every library's destructors)
 * or by _exit(0) (neither), which separates what the child's exit costs
 * from what fork and the parent's side cost.
 *
 * Usage: fork [ROUNDS [REPEATS [LIBRARY]]]
 *   (default 2000 rounds, 7 repeats, the build's .libs/libcpprof.so)
 * Each repeat runs every (mode, exit) pair once, modes alternating, so a
 * busy machine slows them alike.  Prints, per pair, medians over the
 * repeats of: wall us per round, the parent's CPU us per round (user +
 * system: a postmaster's cost), the child's CPU us per round, and the
 * wall figure's ratio to the same exit's figure without the library,
 * the parent's and the child's page faults per round (a child that does
 * nothing faults only to copy pages it writes: the figure a loaded
 * machine does not blur), and the mappings (/proc/self/maps lines) the
 * mode's process has (fork copies each one's page tables).
 *
 * Where serving-noforks's extra cost goes, docs/benchmarks.md ("Fork"):
 * per thread of cpprof's, its malloc arena (a fault in the child and one
 * in the parent, which being threaded pays a TLB shootdown for it) and
 * its stack (a fault in the child), 2 mappings each; the upper object's
 * 22 libraries (about 110 mappings, GnuTLS's and p11-kit's fork handlers);
 * the server's child handlers.  2026-12-07, `fork 300 5`, load average 4
 * to 7: child faults at _exit 60 before, 51 since the window threads are
 * made on demand (none 17-18), parent 17 and 13 (none 2), mappings 163
 * and 147 (none 25).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef LIBCPPROF_SO
#define LIBCPPROF_SO ".libs/libcpprof.so"
#endif

enum { MODES = 5, EXITS = 2, FIGURES = 6, MAX_REPEATS = 101 };
static const char *const mode_names[MODES] = {"none", "preloaded", "serving",
                                              "serving-noforks", "asked"};
static const char *const exit_names[EXITS] = {"exit", "_exit"};

/* What one measurement reports (the runner writes them in this order). */
struct figures {
    double wall_us, parent_cpu_us, child_cpu_us, parent_faults, child_faults,
        maps;
};

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double cpu_us(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

/* Page faults: in a child that does nothing, each is a copy-on-write of
 * a page it shares with its parent, the figure that load does not blur. */
static double faults(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return ru.ru_minflt + ru.ru_majflt;
}

static int count_maps(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    int lines = 0, c;
    if (!f)
        return -1;
    while ((c = getc(f)) != EOF)
        lines += c == '\n';
    fclose(f);
    return lines;
}

static void fork_exit_wait(int by_exit)
{
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        exit(1);
    }
    if (child == 0) {
        if (by_exit)
            exit(0);
        _exit(0);
    }
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fork: a child ended with status %#x\n", status);
        exit(1);
    }
}

/* The port of this process's listening TCP socket (zero-code mode's), or
 * -1. */
static int own_listener_port(void)
{
    for (int fd = 3; fd < 1100; fd++) {
        struct sockaddr_in a;
        socklen_t len = sizeof a;
        int listening = 0;
        socklen_t olen = sizeof listening;
        if (getsockname(fd, (struct sockaddr *)&a, &len) == 0 &&
            a.sin_family == AF_INET &&
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &olen) ==
                0 &&
            listening)
            return ntohs(a.sin_port);
    }
    return -1;
}

/* Asks this process's own server for its index, so that the server has
 * loaded and started (zero-code mode loads it at the first client). */
static void ask_own_server(void)
{
    int port = own_listener_port();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static const char get[] = "GET /debug/pprof/ HTTP/1.0\r\n\r\n";
    char buf[4096];
    if (port < 0 || fd < 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        write(fd, get, sizeof get - 1) != (ssize_t)sizeof get - 1) {
        fprintf(stderr, "fork: cannot ask the server (port %d)\n", port);
        exit(1);
    }
    while (read(fd, buf, sizeof buf) > 0)
        ;
    close(fd);
}

/* The measured side, in the process the driver exec'd. */
static int run(int rounds, int by_exit)
{
    if (getenv("FORK_BENCH_ASK") != NULL)
        ask_own_server();
    for (int i = 0; i < rounds / 10; i++) /* warm: lazy binding, page cache */
        fork_exit_wait(by_exit);
    double parent0 = cpu_us(RUSAGE_SELF), child0 = cpu_us(RUSAGE_CHILDREN);
    double pfaults0 = faults(RUSAGE_SELF), cfaults0 = faults(RUSAGE_CHILDREN);
    double t0 = now_us();
    for (int i = 0; i < rounds; i++)
        fork_exit_wait(by_exit);
    struct figures f = {
        (now_us() - t0) / rounds,
        (cpu_us(RUSAGE_SELF) - parent0) / rounds,
        (cpu_us(RUSAGE_CHILDREN) - child0) / rounds,
        (faults(RUSAGE_SELF) - pfaults0) / rounds,
        (faults(RUSAGE_CHILDREN) - cfaults0) / rounds,
        count_maps(),
    };
    printf("%f %f %f %f %f %f\n", f.wall_us, f.parent_cpu_us, f.child_cpu_us,
           f.parent_faults, f.child_faults, f.maps);
    return 0;
}

/* Runs this program again as a runner in `mode`; its figures into *f. */
static int measure(const char *self, const char *lib, int mode, int by_exit,
                   int rounds, struct figures *f)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        unsetenv("LD_PRELOAD");
        unsetenv("CPPROF_HTTP");
        if (mode > 0)
            setenv("LD_PRELOAD", lib, 1);
        if (mode >= 2)
            setenv("CPPROF_HTTP", "127.0.0.1:0", 1);
        if (mode == 3)
            setenv("CPPROF_HTTP_FORKS", "0", 1);
        else
            unsetenv("CPPROF_HTTP_FORKS");
        if (mode == 4)
            setenv("FORK_BENCH_ASK", "1", 1);
        else
            unsetenv("FORK_BENCH_ASK");
        char n[24];
        snprintf(n, sizeof n, "%d", rounds);
        execl(self, self, "--run", n, exit_names[!by_exit], (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    int got = in ? fscanf(in, "%lf %lf %lf %lf %lf %lf", &f->wall_us,
                          &f->parent_cpu_us, &f->child_cpu_us,
                          &f->parent_faults, &f->child_faults, &f->maps)
                 : 0;
    if (in)
        fclose(in);
    int status = 0;
    waitpid(pid, &status, 0);
    return got == FIGURES && WIFEXITED(status) && WEXITSTATUS(status) == 0
               ? 0
               : -1;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--run") == 0)
        return run(atoi(argv[2]), strcmp(argv[3], "exit") == 0);
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    int repeats = argc > 2 ? atoi(argv[2]) : 7;
    const char *lib = argc > 3 ? argv[3] : LIBCPPROF_SO;
    if (rounds < 10 || repeats < 1 || repeats > MAX_REPEATS) {
        fprintf(stderr, "usage: fork [ROUNDS>=10 [REPEATS 1..%d [LIBRARY]]]\n",
                MAX_REPEATS);
        return 2;
    }
    if (access(lib, R_OK) != 0) {
        fprintf(stderr, "fork: %s: %s\n", lib, strerror(errno));
        return 1;
    }
    static double v[MODES][EXITS][FIGURES][MAX_REPEATS];
    for (int r = 0; r < repeats; r++)
        for (int e = 0; e < EXITS; e++)
            for (int m = 0; m < MODES; m++) {
                struct figures f;
                if (measure("/proc/self/exe", lib, m, e == 0, rounds, &f) != 0) {
                    fprintf(stderr, "fork: the %s/%s runner failed\n",
                            mode_names[m], exit_names[e]);
                    return 1;
                }
                double fig[FIGURES] = {f.wall_us,       f.parent_cpu_us,
                                       f.child_cpu_us,  f.parent_faults,
                                       f.child_faults,  f.maps};
                for (int k = 0; k < FIGURES; k++)
                    v[m][e][k][r] = fig[k];
            }
    printf("fork+exit+wait, %d rounds, median of %d repeats; library %s\n",
           rounds, repeats, lib);
    printf("%-15s %-6s %9s %9s %9s %7s %8s %8s %5s\n", "mode", "exit",
           "wall_us", "parent_us", "child_us", "ratio", "p_faults", "c_faults",
           "maps");
    for (int e = 0; e < EXITS; e++) {
        double base = 0;
        for (int m = 0; m < MODES; m++) {
            double med[FIGURES];
            for (int k = 0; k < FIGURES; k++)
                med[k] = median(v[m][e][k], repeats);
            if (m == 0)
                base = med[0];
            printf("%-15s %-6s %9.1f %9.1f %9.1f %6.2fx %8.1f %8.1f %5.0f\n",
                   mode_names[m], exit_names[e], med[0], med[1], med[2],
                   med[0] / base, med[3], med[4], med[5]);
        }
    }
    return 0;
}
