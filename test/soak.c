/*
 * soak.c -- cpprof inside a busy process for a bounded time: it
 * must never crash it, hang it, leak in it or corrupt its work.
 *
 * While the server runs in-process, activities loop side by side:
 *   churn    threads created and destroyed without pause, each inheriting
 *            its creator's labels, which change every round (new sets are
 *            built and dropped all the time); each thread checks that it
 *            holds its creator's labels and computes a known result;
 *   fork     fork+exec of /bin/sh with a known exit status;
 *   dlopen   dlopen/dlclose of a small library and a call with a known
 *            result;
 *   cpu      back-to-back 2-second CPU profiles over HTTP, every fourth
 *            one cut off after 1 s by a client that hangs up (the next one
 *            must still work);
 *   scrape   every other GET endpoint of the route table in turn (so new
 *            endpoints are soaked as they land): thread census text and
 *            proto, heap, allocs, block, mutex, threadcreate, index, ...
 * Scrapes go through curl (itself a fork+exec from this process); every
 * response must be a 200, and every profile.proto one (Content-Type
 * application/octet-stream) must be accepted by google/pprof's parser
 * (test/gocheck); the trace, Perfetto's protobuf, must unpack as a Trace
 * with packets.
 *
 * Fails (exit 1) on a wrong result, a bad status or profile, a watchdog
 * seeing an activity make no progress for 10 s (a deadlock), RSS growing
 * past a bound between the end of the warm-up and the end, or more file
 * descriptors or POSIX timers at the end than after one warm-up round of
 * every activity (/proc/self/fd, /proc/self/timers).
 *
 * Usage: soak [SECONDS]   (default 120; the SOAK_SECONDS variable too)
 *   SOAK_RSS_SLACK_KB: allowed RSS growth after warm-up (default 32768)
 *   SOAK_STALL_SECONDS: the watchdog's limit (default 10; sanitized builds,
 *   several times slower, raise it)
 */
#define _GNU_SOURCE
#include <cpprof.h>

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http.h"
#include "perfetto_trace.pb-c.h"

#define CPU_PROFILE_SECONDS 2

static atomic_bool stopping;
static int port;
static char tmpdir[] = "/tmp/cpprof-soak.XXXXXX";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("soak: FAIL: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* ---- Activities ----------------------------------------------------------- */

struct activity {
    const char *name;
    void (*step)(void);
    atomic_ulong progress;
    pthread_t thread;
};

/* The work each churned thread does: a result known in advance. */
static uint64_t work(uint64_t seed)
{
    uint64_t h = 1469598103934665603u ^ seed;
    for (int i = 0; i < 20000; i++)
        h = (h ^ (uint64_t)i) * 1099511628211u;
    return h;
}

#define NSEEDS 64
static uint64_t expected[NSEEDS];

struct churn_job {
    uint64_t seed;
    const cpprof_labelset *creator; /* what the new thread must hold */
    bool ok;
};

static void *churn_thread(void *arg)
{
    struct churn_job *j = arg;
    cpprof_labelset *mine = cpprof_thread_labels();
    j->ok = mine == j->creator && work(j->seed) == expected[j->seed];
    cpprof_labelset_release(mine);
    return NULL;
}

static void churn_in_scope(void *arg, const cpprof_labelset *labels)
{
    struct churn_job *jobs = arg;
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        jobs[i].creator = labels;
        if (cpprof_thread_create(&t[i], NULL, churn_thread, &jobs[i]) != 0)
            die("churn: cpprof_thread_create failed");
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
}

static void churn_step(void)
{
    static atomic_uint round;
    unsigned r = atomic_fetch_add(&round, 1);
    char tenant[16], job[16];
    snprintf(tenant, sizeof tenant, "t%u", r % 50);
    snprintf(job, sizeof job, "%u", r);
    const char *kv[] = {"tenant", tenant, "job", job};
    cpprof_labelset *set;
    if (cpprof_labels(&set, 4, kv) != 0)
        die("churn: cpprof_labels failed");
    struct churn_job jobs[4];
    for (int i = 0; i < 4; i++)
        jobs[i] = (struct churn_job){(r * 4 + (unsigned)i) % NSEEDS, NULL,
                                     false};
    if (cpprof_do(NULL, set, churn_in_scope, jobs) != 0)
        die("churn: cpprof_do failed");
    cpprof_labelset_release(set);
    for (int i = 0; i < 4; i++)
        if (!jobs[i].ok)
            die("churn: a thread had the wrong labels or result");
}

/* Runs argv to completion with stdout into `out` (NULL: /dev/null);
 * returns its wait status. */
static int run(char *const argv[], char *out, size_t out_len)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        /* Only async-signal-safe calls between fork and exec. */
        dup2(fds[1], 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t got = 0;
    char sink[512];
    for (;;) {
        char *to = out && got + 1 < out_len ? out + got : sink;
        size_t room = out && got + 1 < out_len ? out_len - 1 - got : sizeof sink;
        ssize_t n = read(fds[0], to, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (to != sink)
            got += (size_t)n;
    }
    close(fds[0]);
    if (out)
        out[got] = '\0';
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            die("waitpid: %s", strerror(errno));
    return status;
}

static void fork_step(void)
{
    char *const argv[] = {"/bin/sh", "-c", "exit 7", NULL};
    int status = run(argv, NULL, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 7)
        die("fork: /bin/sh exited with status %#x, want 7", status);
}

static void dlopen_step(void)
{
    void *h = dlopen(SOAK_DSO, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        die("dlopen: %s", dlerror());
    unsigned long (*fn)(unsigned long) =
        (unsigned long (*)(unsigned long))dlsym(h, "stress_dso_work");
    if (!fn)
        die("dlsym: %s", dlerror());
    unsigned long n = 10000;
    if (fn(n) != n * (n - 1) / 2)
        die("dlopen: wrong result from the library");
    dlclose(h);
}

/* GETs path into FILE (under tmpdir) with curl; returns the status and
 * puts the content type in ctype. */
static int fetch(const char *path, const char *file, double max_time,
                 char *ctype, size_t ctype_len, int *curl_status)
{
    char url[512], out[600], limit[32], answer[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/debug/pprof/%s", port,
             path);
    snprintf(out, sizeof out, "%s/%s", tmpdir, file);
    snprintf(limit, sizeof limit, "%.1f", max_time);
    char *const argv[] = {"curl", "-s", "-o", out, "--max-time", limit,
                          "-w", "%{http_code} %{content_type}", url, NULL};
    int st = run(argv, answer, sizeof answer);
    *curl_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    int code = 0;
    char type[256] = "";
    sscanf(answer, "%d %255[^;]", &code, type);
    snprintf(ctype, ctype_len, "%s", type);
    return code;
}

/* google/pprof's parser must accept the profile in FILE. */
static void gocheck(const char *file, const char *what)
{
    char path[600], answer[64];
    snprintf(path, sizeof path, "%s/%s", tmpdir, file);
    char *const argv[] = {GOCHECK, path, NULL};
    int st = run(argv, answer, sizeof answer);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        strncmp(answer, "valid\n", 6) != 0)
        die("%s: gocheck rejects the profile (status %#x)", what, st);
}

/* Counts scrapes one by one: a whole round of them takes long in a
 * sanitized build, and the watchdog must see each. */
static atomic_ulong *scrape_progress;
/* The path being scraped, for the watchdog's message. */
static const char *_Atomic scraping = "";

/* GETs path, which must answer 200; a profile.proto must parse. */
static void scrape(const char *path, const char *file, double max_time)
{
    char ctype[256];
    int curl_status;
    atomic_store(&scraping, path);
    int code = fetch(path, file, max_time, ctype, sizeof ctype, &curl_status);
    if (code != 200)
        die("GET %s: status %d (curl exit %d)", path, code, curl_status);
    if (strcmp(ctype, "application/octet-stream") == 0)
        gocheck(file, path);
    if (scrape_progress)
        atomic_fetch_add(scrape_progress, 1);
}

/* A half-second trace, which must unpack as Perfetto's Trace. */
static void scrape_trace(void)
{
    char ctype[256];
    int curl_status;
    atomic_store(&scraping, "trace");
    int code = fetch("trace?seconds=0.5", "trace.pftrace", 30, ctype,
                     sizeof ctype, &curl_status);
    if (code != 200)
        die("GET trace: status %d (curl exit %d)", code, curl_status);
    char path[600];
    snprintf(path, sizeof path, "%s/trace.pftrace", tmpdir);
    FILE *f = fopen(path, "rb");
    long len = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    uint8_t *buf = len > 0 ? malloc((size_t)len) : NULL;
    if (!buf || fseek(f, 0, SEEK_SET) != 0 ||
        fread(buf, 1, (size_t)len, f) != (size_t)len)
        die("trace: cannot read the %ld bytes received", len);
    fclose(f);
    Perfetto__Protos__Trace *t =
        perfetto__protos__trace__unpack(NULL, (size_t)len, buf);
    free(buf);
    if (!t || t->n_packet == 0)
        die("trace: %ld bytes that are no Perfetto trace", len);
    perfetto__protos__trace__free_unpacked(t, NULL);
    if (scrape_progress)
        atomic_fetch_add(scrape_progress, 1);
}

static void cpu_step(void)
{
    static unsigned n;
    char path[64];
    if (++n % 4 == 0) {
        /* Hangs up 1 s into a 10-second profile; a 500 while the server
         * has not yet seen the last hang-up (it polls) is asked again. */
        for (int attempt = 0;; attempt++) {
            char ctype[256];
            int curl_status;
            int code = fetch("profile?seconds=10", "cut.pb.gz", 1.0, ctype,
                             sizeof ctype, &curl_status);
            if (curl_status == 28)
                return;
            if (code != 500 || attempt == 20)
                die("the cut-off profile ended with curl status %d and HTTP "
                    "status %d after %d attempts, not its timeout",
                    curl_status, code, attempt + 1);
            struct timespec pause = {0, 100000000};
            nanosleep(&pause, NULL);
        }
    }
    /* The server may not have seen the last hang-up yet: it polls. */
    for (int attempt = 0;; attempt++) {
        char ctype[256];
        int curl_status;
        snprintf(path, sizeof path, "profile?seconds=%d", CPU_PROFILE_SECONDS);
        int code = fetch(path, "cpu.pb.gz", CPU_PROFILE_SECONDS + 30.0, ctype,
                         sizeof ctype, &curl_status);
        if (code == 200) {
            gocheck("cpu.pb.gz", "cpu profile");
            return;
        }
        if (code != 500 || attempt == 20)
            die("GET %s: status %d after %d attempts", path, code,
                attempt + 1);
        struct timespec pause = {0, 100000000};
        nanosleep(&pause, NULL);
    }
}

/* Every GET endpoint of the route table but the CPU profile (cpu_step's)
 * and the page files (the wall profiles for a second), plus the text
 * forms of the named profiles. */
static void scrape_step(void)
{
    size_t n;
    const http_route *routes = http_routes(&n);
    for (size_t i = 0; i < n && !atomic_load(&stopping); i++) {
        const char *name = routes[i].name;
        size_t len = strlen(name);
        if (!(routes[i].methods & HTTP_GET) || strcmp(name, "profile") == 0 ||
            (len > 0 && name[len - 1] == '/'))
            continue;
        if (strcmp(name, "trace") == 0) {
            scrape_trace();
            continue;
        }
        if (strcmp(name, "wall") == 0 || strcmp(name, "fgprof") == 0) {
            /* They wait out a window, of 30 s by default. */
            char path[128];
            snprintf(path, sizeof path, "%s?seconds=1", name);
            scrape(path, "scrape.out", 30);
            continue;
        }
        scrape(name, "scrape.out", 30);
        if (routes[i].desc != NULL && routes[i].count != NULL) {
            char path[128];
            snprintf(path, sizeof path, "%s?debug=1", name);
            scrape(path, "scrape.txt", 30);
        }
    }
    scrape("goroutine?debug=2", "scrape.txt", 30);
    scrape("www/index.js", "scrape.txt", 30);
}

static struct activity activities[] = {
    {"churn", churn_step, 0, 0}, {"churn", churn_step, 0, 0},
    {"fork", fork_step, 0, 0},   {"dlopen", dlopen_step, 0, 0},
    {"cpu", cpu_step, 0, 0},     {"scrape", scrape_step, 0, 0},
};
#define NACTIVITIES (sizeof activities / sizeof activities[0])

static void *activity_main(void *arg)
{
    struct activity *a = arg;
    while (!atomic_load(&stopping)) {
        a->step();
        atomic_fetch_add(&a->progress, 1);
    }
    return NULL;
}

/* ---- What the process holds ----------------------------------------------- */

/* What each open fd is ("fd -> target" lines), for the leak report. */
static void describe_fds(char *out, size_t len)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    size_t at = 0;
    out[0] = '\0';
    while (d && (e = readdir(d))) {
        char path[300], target[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0 && at < len)
            at += (size_t)snprintf(out + at, len - at, "%.*s\n", (int)n,
                                   target);
    }
    if (d)
        closedir(d);
}

/* How many lines of `list` are exactly `line` (with its newline). */
static int occurrences(const char *list, const char *line)
{
    int n = 0;
    size_t len = strlen(line);
    for (const char *l = list; (l = strstr(l, line)) != NULL; l += len)
        if (l == list || l[-1] == '\n')
            n++;
    return n;
}

/* How many lines of `list` start with `prefix`. */
static int count_prefix(const char *list, const char *prefix)
{
    int n = 0;
    for (const char *l = list; *l; l = strchr(l, '\n') + 1)
        n += strncmp(l, prefix, strlen(prefix)) == 0;
    return n;
}

/* The symbolizer (libdw) may hold a few generations of a library that is
 * dlclosed and dlopened again at another address: seen up to 3 in sanitized
 * builds, whose timing differs.  A leak per dlopen (hundreds of thousands
 * here) is far past this. */
#define MAX_OPENS_PER_FILE 4

/* Whether `now` holds more than `before`: more sockets, pipes and other
 * non-files, or a file open more often than MAX_OPENS_PER_FILE (a file
 * opened since, such as the debug info of a module symbolized for the first
 * time, is a cache, not a leak).  With `report`, prints each excess. */
static bool fds_grew(const char *before, const char *now, bool report)
{
    int others_before = 0, others_now = 0;
    bool grew = false;
    for (const char *l = before; *l; l = strchr(l, '\n') + 1)
        others_before += *l != '/';
    for (const char *l = now; *l; l = strchr(l, '\n') + 1) {
        char line[300];
        snprintf(line, sizeof line, "%.*s",
                 (int)(strchr(l, '\n') - l) + 1, l);
        if (*l != '/') {
            others_now++;
        } else if (occurrences(now, line) > MAX_OPENS_PER_FILE &&
                   occurrences(now, line) > occurrences(before, line)) {
            if (report)
                fprintf(stderr, "soak: open again: %s", line);
            grew = true;
        }
    }
    if (others_now > others_before) {
        if (report)
            fprintf(stderr, "soak: %d sockets, pipes and the like, %d before:\n%s",
                    others_now, others_before, now);
        grew = true;
    }
    return grew;
}

/* POSIX timers: one "ID:" line each in /proc/self/timers. */
static int count_timers(void)
{
    FILE *f = fopen("/proc/self/timers", "r");
    char line[256];
    int n = 0;
    if (!f)
        die("/proc/self/timers: %s", strerror(errno));
    while (fgets(line, sizeof line, f))
        n += strncmp(line, "ID:", 3) == 0;
    fclose(f);
    return n;
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    if (!f)
        die("/proc/self/status: %s", strerror(errno));
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* Waits (at most 10 s, for connection threads to wind down) until the
 * process holds no more fds and timers than at the start. */
static char fds_before[16384];

/* Waits (at most 10 s, for connection threads to wind down) until the
 * process holds no more fds and timers than after the warm-up. */
static void check_nothing_left(int timers0)
{
    static char now[sizeof fds_before];
    int timers = 0;
    for (int i = 0; i < 100; i++) {
        describe_fds(now, sizeof now);
        timers = count_timers();
        if (!fds_grew(fds_before, now, false) && timers <= timers0)
            return;
        struct timespec pause = {0, 100000000};
        nanosleep(&pause, NULL);
    }
    fds_grew(fds_before, now, true);
    die("leak: %d timers (%d after the warm-up), fds as above", timers,
        timers0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void remove_tmpdir(void)
{
    char *const argv[] = {"rm", "-rf", tmpdir, NULL};
    run(argv, NULL, 0);
}

int main(int argc, char **argv)
{
    const char *env = getenv("SOAK_SECONDS");
    double seconds = argc > 1 ? atof(argv[1]) : env ? atof(env) : 120;
    env = getenv("SOAK_RSS_SLACK_KB");
    long slack_kb = env ? atol(env) : 32768;
    env = getenv("SOAK_STALL_SECONDS");
    double stall_seconds = env ? atof(env) : 10;
    if (seconds < 5)
        die("usage: soak [SECONDS >= 5]");
    for (uint64_t s = 0; s < NSEEDS; s++)
        expected[s] = work(s);
    if (!mkdtemp(tmpdir))
        die("mkdtemp: %s", strerror(errno));
    atexit(remove_tmpdir);
    /* Block and mutex profiles with something in them. */
    if (cpprof_set("block_profile_rate", "10000") != 0 ||
        cpprof_set("mutex_profile_fraction", "5") != 0)
        die("cpprof_set failed");

    int rc = cpprof_http_start("127.0.0.1:0");
    if (rc != 0)
        die("cpprof_http_start: %s", cpprof_strerror(rc));
    port = http_port();
    /* One round of each activity first, so that what the process keeps for
     * good (the symbolizer's open files and its debuginfod client, which
     * libdw makes once) is in the baseline, and only growth counts. */
    for (size_t i = 0; i < NACTIVITIES; i++)
        activities[i].step();
    struct timespec settle = {1, 0};
    nanosleep(&settle, NULL);
    int timers0 = count_timers();
    describe_fds(fds_before, sizeof fds_before);

    for (size_t i = 0; i < NACTIVITIES; i++)
        if (activities[i].step == scrape_step)
            scrape_progress = &activities[i].progress;
    for (size_t i = 0; i < NACTIVITIES; i++)
        if (pthread_create(&activities[i].thread, NULL, activity_main,
                           &activities[i]) != 0)
            die("pthread_create failed");

    /* The watchdog, and RSS after a warm-up of a quarter of the run. */
    unsigned long last[NACTIVITIES] = {0};
    double moved[NACTIVITIES];
    double start = now_s(), rss_at = start + seconds / 4;
    long rss0 = -1;
    for (size_t i = 0; i < NACTIVITIES; i++)
        moved[i] = start;
    while (now_s() - start < seconds) {
        struct timespec tick = {1, 0};
        nanosleep(&tick, NULL);
        double t = now_s();
        for (size_t i = 0; i < NACTIVITIES; i++) {
            unsigned long p = atomic_load(&activities[i].progress);
            if (p != last[i])
                last[i] = p, moved[i] = t;
            /* A CPU profile takes its seconds before it moves. */
            double limit = stall_seconds +
                           (activities[i].step == cpu_step
                                ? CPU_PROFILE_SECONDS
                                : 0);
            if (t - moved[i] > limit)
                die("watchdog: %s made no progress for %.0f s (last "
                    "scrape: %s)",
                    activities[i].name, t - moved[i], atomic_load(&scraping));
        }
        if (rss0 < 0 && t >= rss_at)
            rss0 = rss_kb();
    }
    atomic_store(&stopping, true);
    for (size_t i = 0; i < NACTIVITIES; i++)
        pthread_join(activities[i].thread, NULL);
    long rss1 = rss_kb();

    printf("soak: %.0f s:", now_s() - start);
    for (size_t i = 0; i < NACTIVITIES; i++)
        printf(" %s %lu", activities[i].name,
               atomic_load(&activities[i].progress));
    printf("; RSS %ld kB after warm-up, %ld kB at the end\n", rss0, rss1);
    for (size_t i = 0; i < NACTIVITIES; i++)
        if (atomic_load(&activities[i].progress) == 0)
            die("%s never completed a round", activities[i].name);
    if (rss1 > rss0 + slack_kb)
        die("RSS grew by %ld kB (allowed %ld kB)", rss1 - rss0, slack_kb);
    check_nothing_left(timers0);
    if ((rc = cpprof_http_stop()) != 0)
        die("cpprof_http_stop: %s", cpprof_strerror(rc));
    char now[sizeof fds_before];
    describe_fds(now, sizeof now);
    if (count_prefix(now, "socket:") >= count_prefix(fds_before, "socket:"))
        die("the server's socket outlived cpprof_http_stop");
    puts("soak: ok");
    return 0;
}
