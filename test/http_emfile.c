/*
 * http_emfile.c -- at the descriptor limit the server waits, it does not
 * spin.
 *
 * The program holds every descriptor up to its RLIMIT_NOFILE (a soft
 * limit of 256 here), as a busy server at its limit does, while one client
 * waits in the listen queue: accept() fails with EMFILE and the client
 * stays queued.  A child process (forked before the table is full, so it
 * can open /proc files) reads the CPU time of the server's threads
 * (libmicrohttpd's "MHD-*" and cpprof's "cpprof-*") from
 * /proc/PID/task/TID/stat over a window and judges their share of one
 * CPU: it must be within noise of idle (under IDLE_SHARE).  Then the
 * descriptors are given back and the queued client must be answered: the
 * server waited for it, it did not drop it.  stderr must say once why it
 * could not accept.
 *
 * Before the fix libmicrohttpd's pool threads spun on poll + accept
 * (daemon.c of 0.9.75 "tries busy waiting" with no connection yet).
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

enum { NOFILE = 256, WINDOW_MS = 3000, ANSWER_MS = 20000 };
#define IDLE_SHARE 0.05 /* of one CPU: a watch thread waking every 100 ms
                           uses well under 1% */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU ticks (user + system) of pid's threads named MHD-* or cpprof-*;
 * *n counts them. */
static long long server_ticks(pid_t pid, int *n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    long long ticks = 0;
    *n = 0;
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        char stat[1024], name[64], file[300];
        if (e->d_name[0] == '.')
            continue;
        snprintf(file, sizeof file, "/proc/%d/task/%s/stat", (int)pid,
                 e->d_name);
        FILE *f = fopen(file, "r");
        if (f == NULL)
            continue;
        size_t len = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[len] = '\0';
        char *open = strchr(stat, '('), *close = strrchr(stat, ')');
        if (open == NULL || close == NULL)
            continue;
        snprintf(name, sizeof name, "%.*s", (int)(close - open - 1), open + 1);
        if (strncmp(name, "MHD-", 4) != 0 && strncmp(name, "cpprof-", 7) != 0)
            continue;
        unsigned long long ut, st;
        /* After ")": state is field 3, utime 14 and stime 15. */
        if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                   "%llu %llu", &ut, &st) == 2) {
            ticks += (long long)(ut + st);
            ++*n;
        }
    }
    if (d != NULL)
        closedir(d);
    return ticks;
}

/* The child: waits for the parent's word, measures, exits 0 if idle. */
static void measure(pid_t parent, int go)
{
    char c;
    if (read(go, &c, 1) != 1)
        _exit(2);
    int n;
    double t0 = now_s();
    long long before = server_ticks(parent, &n);
    usleep(WINDOW_MS * 1000);
    long long after = server_ticks(parent, &n);
    double share = (after - before) / (double)sysconf(_SC_CLK_TCK) /
                   (now_s() - t0);
    printf("http_emfile: at the descriptor limit with a client queued, the "
           "server's %d threads used %.1f%% of one CPU over %.1f s (idle "
           "is under %.0f%%)\n", n, 100 * share, now_s() - t0,
           100 * IDLE_SHARE);
    fflush(stdout);
    _exit(n > 0 && share < IDLE_SHARE ? 0 : 1);
}

static int connect_server(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        return -1;
    return fd;
}

/* The status of the answer on fd, within ANSWER_MS; 0 if none. */
static int answer_status(int fd)
{
    char buf[256];
    size_t got = 0;
    double end = now_s() + ANSWER_MS / 1000.0;
    while (got < sizeof buf - 1 && memchr(buf, '\n', got) == NULL) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)((end - now_s()) * 1000);
        if (left <= 0 || poll(&p, 1, left) != 1)
            break;
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    int status = 0;
    sscanf(buf, "HTTP/1.%*d %d", &status);
    return status;
}

/* How many lines of the file at fd (from its start) contain `what`. */
static int count_lines(int fd, const char *what)
{
    char line[1024];
    int n = 0;
    FILE *f = fdopen(dup(fd), "r");
    if (f == NULL)
        return -1;
    rewind(f);
    while (fgets(line, sizeof line, f) != NULL)
        n += strstr(line, what) != NULL;
    fclose(f);
    return n;
}

/* cpprof's lines go to a file, to be counted; ours to the real stderr,
 * kept at the descriptor HTTP_EMFILE_ERR names.  cpprof writes only to the
 * file descriptor 2 was when it loaded (warn.c), so the file must be
 * descriptor 2 before the program starts: it runs itself again so.  Returns
 * the real stderr, or NULL. */
static FILE *stderr_apart(char **argv)
{
    const char *kept = getenv("HTTP_EMFILE_ERR");
    if (kept != NULL)
        return fdopen(atoi(kept), "w");
    FILE *log = tmpfile();
    int real = dup(2);
    char num[16];
    if (log == NULL || real < 0 || dup2(fileno(log), 2) < 0)
        return NULL;
    snprintf(num, sizeof num, "%d", real);
    setenv("HTTP_EMFILE_ERR", num, 1);
    execv("/proc/self/exe", argv);
    return NULL;
}

int main(int argc, char **argv)
{
    (void)argc;
    FILE *err = stderr_apart(argv);
    if (err == NULL)
        return 1;
    setvbuf(err, NULL, _IONBF, 0);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max < NOFILE)
        return 77;
    rl.rlim_cur = NOFILE;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 77;
    int rc = cpprof_http_start("127.0.0.1:0");
    if (rc != 0) {
        fprintf(err, "http_emfile: start: %s\n", cpprof_strerror(rc));
        return 1;
    }
    int port = http_port();
    int go[2];
    if (pipe(go) != 0)
        return 1;
    pid_t child = fork();
    if (child == 0) {
        close(go[1]);
        measure(getppid(), go[0]);
    }
    close(go[0]);

    /* Every descriptor taken, one given to a client queued meanwhile. */
    static int held[NOFILE];
    int n_held = 0;
    for (int fd; n_held < NOFILE && (fd = open("/dev/null", O_RDONLY)) >= 0;)
        held[n_held++] = fd;
    if (n_held == 0)
        return 1;
    close(held[--n_held]);
    int client = connect_server(port);
    static const char req[] = "GET /debug/pprof/cmdline HTTP/1.1\r\n"
                              "Host: 127.0.0.1\r\nConnection: close\r\n\r\n";
    bool at_limit = dup(0) < 0 && errno == EMFILE;
    if (client < 0 || send(client, req, sizeof req - 1, 0) < 0 || !at_limit) {
        fprintf(err, "http_emfile: cannot queue a client at the limit\n");
        kill(child, SIGKILL);
        return 1;
    }
    if (write(go[1], "g", 1) != 1)
        return 1;
    int wstatus;
    waitpid(child, &wstatus, 0);
    bool idle = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;

    for (int i = 0; i < n_held; i++)
        close(held[i]);
    int status = answer_status(client);
    close(client);
    int said = count_lines(2, "cannot accept");
    cpprof_http_stop();
    fprintf(err, "http_emfile: once descriptors were free the queued client "
            "was answered %d (200 expected); stderr said it could not "
            "accept %d times (once expected)\n", status, said);
    bool ok = idle && status == 200 && said == 1;
    fprintf(err, "http_emfile: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
