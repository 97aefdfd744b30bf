/*
 * check_sampler.c -- tests of the CPU sampler through the public API
 * (cpprof_cpu_profile_start/stop), reading back the profiles it writes:
 * label sets attributed in proportion to CPU, threads created and exiting
 * during a profile, threads cpprof did not create, the profile's period and
 * window, refusing a signal the application handles, one profile at a time,
 * the dropped-sample record, no timer left behind, errno preserved, a
 * configurable signal, and hostile hosts: a program that
 * installs its own SIGPROF handler during a profile keeps it; a seccomp
 * filter refusing timer_create is an error, not an empty profile; 1,000
 * threads under a low RLIMIT_SIGPENDING leave the program its queued
 * signals; threads that block the signal are reported with their CPU;
 * idle threads cost a profile no work of their own, and one that wakes
 * mid-profile is sampled (or, blocking the signal, reported).
 *
 * Each test runs in a process of its own (Check's fork mode), so signal
 * dispositions and /proc/self/timers start clean.  CPU bounds are generous:
 * they catch a sampler that misses or misattributes threads, not noise.
 */
#define _GNU_SOURCE
#include <check.h>
#include <cpprof.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "http.h"
#include "profile.pb-c.h"
#include "sampler.h"
#include "sigq.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;

/* ---- Workloads ----------------------------------------------------------- */

static double thread_cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* Burns `seconds` of the calling thread's CPU; returns what it burned. */
__attribute__((noinline)) double burn_cpu(double seconds)
{
    double start = thread_cpu_seconds(), now;
    volatile unsigned long x = 0;
    while ((now = thread_cpu_seconds()) - start < seconds)
        for (int i = 0; i < 10000; i++)
            x += i;
    return now - start;
}

struct burner {
    pthread_t thread;
    double seconds; /* to burn */
    double burned;  /* measured by the thread itself */
};

static void *burner_main(void *arg)
{
    struct burner *b = arg;
    b->burned = burn_cpu(b->seconds);
    return NULL;
}

/* Applies `kv` (one pair) to the calling thread and starts a burner under
 * it with cpprof_thread_create, which hands the labels on. */
static void start_labelled(struct burner *b, const char *key,
                           const char *value)
{
    const char *kv[] = {key, value};
    cpprof_labelset *set;
    ck_assert_int_eq(cpprof_labels(&set, 2, kv), 0);
    ck_assert_int_eq(cpprof_set_thread_labels(set), 0);
    ck_assert_int_eq(cpprof_thread_create(&b->thread, NULL, burner_main, b),
                     0);
    ck_assert_int_eq(cpprof_set_thread_labels(NULL), 0);
    cpprof_labelset_release(set);
}

static void set_hz(int hz)
{
    char v[16];
    snprintf(v, sizeof v, "%d", hz);
    ck_assert_int_eq(cpprof_set("cpu_hz", v), 0);
}

/* ---- Reading profiles back ---------------------------------------------- */

/* google/pprof's parser (test/gocheck) must accept every profile. */
static void assert_pprof_accepts(const unsigned char *gz, size_t len)
{
    char path[] = "/tmp/check_sampler.XXXXXX", cmd[256];
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, gz, len), (ssize_t)len);
    close(fd);
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null", GOCHECK, path);
    int rc = system(cmd);
    unlink(path);
    ck_assert_msg(rc == 0, "gocheck rejected the profile (status %d)", rc);
}

static Profile *stop_and_decode(void)
{
    unsigned char *gz;
    size_t gzlen;
    ck_assert_int_eq(cpprof_cpu_profile_stop(&gz, &gzlen), 0);
    ck_assert_uint_ge(gzlen, 2);
    ck_assert(gz[0] == 0x1f && gz[1] == 0x8b);
    assert_pprof_accepts(gz, gzlen);
    size_t cap = 1 << 20;
    unsigned char *raw = malloc(cap);
    z_stream z = {.next_in = gz, .avail_in = (uInt)gzlen};
    ck_assert_int_eq(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
    int zrc;
    do {
        if (z.total_out == cap)
            raw = realloc(raw, cap *= 2);
        z.next_out = raw + z.total_out;
        z.avail_out = (uInt)(cap - z.total_out);
        zrc = inflate(&z, Z_NO_FLUSH);
    } while (zrc == Z_OK);
    ck_assert_int_eq(zrc, Z_STREAM_END);
    Profile *p = perftools__profiles__profile__unpack(NULL, z.total_out, raw);
    inflateEnd(&z);
    free(raw);
    free(gz);
    ck_assert_ptr_nonnull(p);
    return p;
}

static const char *str(const Profile *p, int64_t i)
{
    ck_assert(i >= 0 && (size_t)i < p->n_string_table);
    return p->string_table[i];
}

/* The value of label `key` on sample s, or NULL. */
static const char *label_of(const Profile *p, const Sample *s,
                            const char *key)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (strcmp(str(p, s->label[i]->key), key) == 0)
            return str(p, s->label[i]->str);
    return NULL;
}

static bool stack_has_function(const Profile *p, const Sample *s,
                               const char *name)
{
    for (size_t i = 0; i < s->n_location_id; i++)
        for (size_t l = 0; l < p->n_location; l++) {
            if (p->location[l]->id != s->location_id[i])
                continue;
            for (size_t k = 0; k < p->location[l]->n_line; k++)
                for (size_t f = 0; f < p->n_function; f++)
                    if (p->function[f]->id ==
                            p->location[l]->line[k]->function_id &&
                        strcmp(str(p, p->function[f]->name), name) == 0)
                        return true;
        }
    return false;
}

/* Sampled CPU seconds of the samples with label key=value (value NULL:
 * samples without that key). */
static double cpu_with_label(const Profile *p, const char *key,
                             const char *value)
{
    int64_t ns = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        const char *v = label_of(p, p->sample[i], key);
        if (value ? v && strcmp(v, value) == 0 : v == NULL)
            ns += p->sample[i]->value[1];
    }
    return ns / 1e9;
}

static double cpu_with_function(const Profile *p, const char *name)
{
    int64_t ns = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        if (stack_has_function(p, p->sample[i], name))
            ns += p->sample[i]->value[1];
    return ns / 1e9;
}

/* Sampled CPU seconds under a function whose name starts with `prefix`,
 * and in *name that function's whole name (the unsampled pseudo-frames
 * carry their thread count). */
static double cpu_with_function_prefix(const Profile *p, const char *prefix,
                                       const char **name)
{
    int64_t ns = 0;
    *name = NULL;
    for (size_t f = 0; f < p->n_function; f++) {
        const char *fn = str(p, p->function[f]->name);
        if (strncmp(fn, prefix, strlen(prefix)) == 0) {
            *name = fn;
            ns += (int64_t)(cpu_with_function(p, fn) * 1e9);
        }
    }
    return ns / 1e9;
}

/* ---- Process inspection ------------------------------------------------- */

/* Number of POSIX timers of this process (/proc/self/timers has one "ID:"
 * line each). */
static int timer_count(void)
{
    FILE *f = fopen("/proc/self/timers", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, "ID:", 3) == 0;
    fclose(f);
    return n;
}

static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static double monotonic_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* An exited thread's timer is retired at the collector's next listing of
 * /proc/self/task: at most SCAN_NS + TICK_NS (1.1 s, src/sampler_timers.c
 * and src/sampler.c) after the exit, plus the scheduling delay of a
 * loaded machine. */
#define TIMER_RETIRED_WITHIN 2.0

/* Polls until there is one timer per thread, for at most `limit` seconds;
 * returns whether that happened. */
static bool timers_match_threads_within(double limit)
{
    double end = monotonic_seconds() + limit;
    do {
        if (timer_count() == thread_count())
            return true;
        usleep(5000);
    } while (monotonic_seconds() < end);
    return false;
}

/* The tid of the thread named `comm`, or 0. */
static pid_t thread_named_now(const char *comm)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    pid_t found = 0;
    while (!found && (e = readdir(d))) {
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(name, sizeof name, f) &&
            strncmp(name, comm, strlen(comm)) == 0)
            found = (pid_t)atoi(e->d_name);
        fclose(f);
    }
    closedir(d);
    return found;
}

/* The same, waiting up to a second for the thread to take the name. */
static pid_t thread_named(const char *comm)
{
    pid_t tid;
    double end = monotonic_seconds() + 1.0;
    while (!(tid = thread_named_now(comm)) && monotonic_seconds() < end)
        usleep(5000);
    return tid;
}

/* The signal has the plain handler (or SIG_DFL / SIG_IGN) `handler`. */
static void assert_disposition(int sig, void (*handler)(int))
{
    struct sigaction now;
    ck_assert_int_eq(sigaction(sig, NULL, &now), 0);
    ck_assert(!(now.sa_flags & SA_SIGINFO));
    ck_assert_ptr_eq(now.sa_handler, handler);
}

/* ---- Tests ---------------------------------------------------------------- */

/* Two label sets burning 0.4 s and 0.8 s of CPU on threads created (and
 * gone) during the profile: each set is sampled near its CPU, and the
 * profile carries Go's sample types, the true period and the window. */
START_TEST(labels_sampled_in_proportion_to_cpu)
{
    set_hz(250);
    struct timespec before, after;
    clock_gettime(CLOCK_REALTIME, &before);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    struct burner a = {.seconds = 0.4}, b = {.seconds = 0.8};
    start_labelled(&a, "worker", "a");
    start_labelled(&b, "worker", "b");
    pthread_join(a.thread, NULL);
    pthread_join(b.thread, NULL);
    Profile *p = stop_and_decode();
    clock_gettime(CLOCK_REALTIME, &after);

    double cpu_a = cpu_with_label(p, "worker", "a");
    double cpu_b = cpu_with_label(p, "worker", "b");
    const char *unsampled;
    double cpu_unsampled =
        cpu_with_function_prefix(p, "cpprof.unsampled.", &unsampled);
    ck_assert_msg(cpu_a > 0.5 * a.burned && cpu_a < 1.2 * a.burned,
                  "worker a: sampled %.3f s of %.3f s (unsampled: %s, %.6f s)",
                  cpu_a, a.burned, unsampled ? unsampled : "none",
                  cpu_unsampled);
    ck_assert_msg(cpu_b > 0.5 * b.burned && cpu_b < 1.2 * b.burned,
                  "worker b: sampled %.3f s of %.3f s (unsampled: %s, %.6f s)",
                  cpu_b, b.burned, unsampled ? unsampled : "none",
                  cpu_unsampled);
    ck_assert_msg(unsampled == NULL, "%s: %.6f s of CPU unsampled",
                  unsampled, cpu_unsampled);
    ck_assert_msg(cpu_b / cpu_a > 1.4 && cpu_b / cpu_a < 2.8,
                  "b/a = %.2f, burned 2.0", cpu_b / cpu_a);
    ck_assert_double_gt(cpu_with_function(p, "burn_cpu"), 0.5 * 1.2);

    ck_assert_uint_eq(p->n_sample_type, 2);
    ck_assert_str_eq(str(p, p->sample_type[0]->type), "samples");
    ck_assert_str_eq(str(p, p->sample_type[0]->unit), "count");
    ck_assert_str_eq(str(p, p->sample_type[1]->type), "cpu");
    ck_assert_str_eq(str(p, p->sample_type[1]->unit), "nanoseconds");
    ck_assert_ptr_nonnull(p->period_type);
    ck_assert_str_eq(str(p, p->period_type->type), "cpu");
    ck_assert_str_eq(str(p, p->period_type->unit), "nanoseconds");
    ck_assert_int_eq(p->period, 4000000);
    for (size_t i = 0; i < p->n_sample; i++) {
        ck_assert_uint_eq(p->sample[i]->n_value, 2);
        ck_assert_int_eq(p->sample[i]->value[1],
                         p->sample[i]->value[0] * p->period);
    }
    int64_t before_ns = before.tv_sec * 1000000000LL + before.tv_nsec;
    int64_t after_ns = after.tv_sec * 1000000000LL + after.tv_nsec;
    ck_assert_int_ge(p->time_nanos, before_ns);
    ck_assert_int_le(p->time_nanos + p->duration_nanos, after_ns);
    ck_assert_int_gt(p->duration_nanos, 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST

/* Short-lived threads, one after another: all of them together are
 * sampled, and none leaves a timer behind. */
START_TEST(short_lived_threads_sampled_without_timer_leak)
{
    set_hz(1000);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    double burned = 0;
    for (int i = 0; i < 10; i++) {
        struct burner t = {.seconds = 0.05};
        start_labelled(&t, "phase", "short");
        pthread_join(t.thread, NULL);
        burned += t.burned;
    }
    ck_assert_msg(timers_match_threads_within(TIMER_RETIRED_WITHIN),
                  "%d timers for %d threads", timer_count(), thread_count());
    Profile *p = stop_and_decode();
    double cpu = cpu_with_label(p, "phase", "short");
    ck_assert_msg(cpu > 0.2 * burned && cpu < 1.2 * burned,
                  "sampled %.3f s of %.3f s", cpu, burned);
    ck_assert_int_eq(timer_count(), 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST

/* A timer per thread while profiling, including a thread that existed
 * before, and none after stop. */
START_TEST(one_timer_per_thread_none_after_stop)
{
    struct burner t = {.seconds = 0.3};
    ck_assert_int_eq(pthread_create(&t.thread, NULL, burner_main, &t), 0);
    ck_assert_int_eq(timer_count(), 0);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    ck_assert_int_ge(timer_count(), 2); /* main, burner: at once */
    ck_assert_msg(timers_match_threads_within(1.0),
                  "%d timers for %d threads", timer_count(), thread_count());
    pthread_join(t.thread, NULL);
    ck_assert_msg(timers_match_threads_within(TIMER_RETIRED_WITHIN),
                  "%d timers for %d threads after exit", timer_count(),
                  thread_count());
    Profile *p = stop_and_decode();
    ck_assert_int_eq(timer_count(), 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST

static void *wait_on_pipe(void *arg)
{
    char c;
    return (void *)(intptr_t)read(*(int *)arg, &c, 1);
}

/* A thread started during a profile announces itself (thread_start_run)
 * and has its timer within a few of the collector's 20 ms ticks, not at
 * its next listing of /proc/self/task, which comes a second after the
 * one at start. */
START_TEST(new_thread_gets_its_timer_at_once)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    ck_assert(timers_match_threads_within(0.3)); /* the collector's own */
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, wait_on_pipe, &fds[0]), 0);
    ck_assert_msg(timers_match_threads_within(0.3),
                  "%d timers for %d threads 0.3 s after a new thread",
                  timer_count(), thread_count());
    ck_assert_int_eq(write(fds[1], "x", 1), 1);
    pthread_join(t, NULL);
    Profile *p = stop_and_decode();
    perftools__profiles__profile__free_unpacked(p, NULL);
    close(fds[0]);
    close(fds[1]);
}
END_TEST

__attribute__((noinline)) void *plain_thread_main(void *arg)
{
    struct burner *b = arg;
    b->burned = burn_cpu(b->seconds);
    return NULL;
}

/* A thread made with plain pthread_create, which never touches cpprof, is
 * sampled (without labels). */
START_TEST(thread_cpprof_did_not_create_is_sampled)
{
    set_hz(250);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    struct burner t = {.seconds = 0.4};
    ck_assert_int_eq(pthread_create(&t.thread, NULL, plain_thread_main, &t),
                     0);
    pthread_join(t.thread, NULL);
    Profile *p = stop_and_decode();
    double cpu = cpu_with_function(p, "plain_thread_main");
    ck_assert_msg(cpu > 0.5 * t.burned && cpu < 1.2 * t.burned,
                  "sampled %.3f s of %.3f s", cpu, t.burned);
    for (size_t i = 0; i < p->n_sample; i++)
        if (stack_has_function(p, p->sample[i], "plain_thread_main"))
            ck_assert_uint_eq(p->sample[i]->n_label, 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST

static void application_handler(int sig) { (void)sig; }

START_TEST(signal_with_application_handler_is_refused)
{
    struct sigaction sa = {.sa_handler = application_handler};
    ck_assert_int_eq(sigaction(SIGPROF, &sa, NULL), 0);
    ck_assert_int_eq(cpprof_cpu_profile_start(), CPPROF_ESIGTAKEN);
    assert_disposition(SIGPROF, application_handler);
    ck_assert_int_eq(timer_count(), 0);
    unsigned char *buf;
    size_t len;
    ck_assert_int_eq(cpprof_cpu_profile_stop(&buf, &len), CPPROF_ENOTRUNNING);
}
END_TEST

/* Stopping puts back the disposition found at start: SIG_DFL, then
 * SIG_IGN. */
START_TEST(stop_restores_previous_disposition)
{
    void (*before[])(int) = {SIG_DFL, SIG_IGN};
    for (int i = 0; i < 2; i++) {
        struct sigaction sa = {.sa_handler = before[i]}, now;
        ck_assert_int_eq(sigaction(SIGPROF, &sa, NULL), 0);
        ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
        ck_assert_int_eq(sigaction(SIGPROF, NULL, &now), 0);
        ck_assert(now.sa_flags & SA_SIGINFO);
        Profile *p = stop_and_decode();
        assert_disposition(SIGPROF, before[i]);
        perftools__profiles__profile__free_unpacked(p, NULL);
    }
}
END_TEST

#define RACERS 4
static pthread_barrier_t race_barrier;

static void *race_start(void *arg)
{
    pthread_barrier_wait(&race_barrier);
    *(int *)arg = cpprof_cpu_profile_start();
    return NULL;
}

/* Concurrent starts: exactly one wins, the others get CPPROF_EBUSY; after
 * stop a new profile can start. */
START_TEST(one_profile_at_a_time)
{
    pthread_t t[RACERS];
    int rc[RACERS], wins = 0, busy = 0;
    pthread_barrier_init(&race_barrier, NULL, RACERS);
    for (int i = 0; i < RACERS; i++)
        pthread_create(&t[i], NULL, race_start, &rc[i]);
    for (int i = 0; i < RACERS; i++) {
        pthread_join(t[i], NULL);
        wins += rc[i] == 0;
        busy += rc[i] == CPPROF_EBUSY;
    }
    ck_assert_int_eq(wins, 1);
    ck_assert_int_eq(busy, RACERS - 1);
    Profile *p = stop_and_decode();
    perftools__profiles__profile__free_unpacked(p, NULL);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    p = stop_and_decode();
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST

/* The two burners of dropped_samples_are_reported, whose CPU the stalled
 * collector watches, and how far the stall has got. */
static clockid_t burner_clocks[2];
enum { STALL_NOT_YET, STALL_RUNNING, STALL_OVER };
#define STALL_CPU_SECONDS 1.0
static atomic_int stall_state;

static double clock_seconds(clockid_t c)
{
    struct timespec ts = {0, 0};
    clock_gettime(c, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs on the collector thread, sent SIGTRAP: cpprof's threads block the
 * program's signals (SIGUSR2 would stay pending there) but leave open the
 * faults a thread raises on itself, SIGTRAP among them.  It does not
 * drain until both burners have burned STALL_CPU_SECONDS more of CPU,
 * however loaded the machine is; at most 20 s.  The kernel delivers a CPU timer's expiries as few signals
 * with large overrun counts when it likes: 600 ms of CPU at 1000 Hz came
 * as anywhere from 19 to 115 signals on a loaded 2-core VM, so the stall
 * is long (about 30 signals per burner at that worst rate) and the ring
 * tiny (8 slots). */
static void stall(int sig)
{
    (void)sig;
    atomic_store(&stall_state, STALL_RUNNING);
    double start[2] = {clock_seconds(burner_clocks[0]),
                       clock_seconds(burner_clocks[1])};
    struct timespec tick = {0, 10000000};
    for (int i = 0; i < 2000; i++) {
        if (clock_seconds(burner_clocks[0]) - start[0] >= STALL_CPU_SECONDS &&
            clock_seconds(burner_clocks[1]) - start[1] >= STALL_CPU_SECONDS)
            break;
        nanosleep(&tick, NULL);
    }
    atomic_store(&stall_state, STALL_OVER);
}

/* Burns CPU until the stall is over, however late the collector takes its
 * signal (ThreadSanitizer defers signals), so the burners are alive and
 * sampled all through it; at most 20 s of CPU. */
static void *burn_through_stall(void *arg)
{
    (void)arg;
    for (int i = 0; i < 200 && atomic_load(&stall_state) != STALL_OVER; i++)
        burn_cpu(0.1);
    return NULL;
}

/* With a tiny buffer and the collector stalled while two threads burn CPU
 * at 1000 Hz, samples are dropped, and the profile says how many under the
 * pseudo-frame cpprof.lostProfileEvent. */
START_TEST(dropped_samples_are_reported)
{
    set_hz(1000);
    sampler_set_ring_slots(8);
    atomic_store(&stall_state, STALL_NOT_YET);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        pthread_create(&t[i], NULL, burn_through_stall, NULL);
        ck_assert_int_eq(pthread_getcpuclockid(t[i], &burner_clocks[i]), 0);
    }
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    struct sigaction sa = {.sa_handler = stall};
    ck_assert_int_eq(sigaction(SIGTRAP, &sa, NULL), 0);
    pid_t collector = thread_named("cpprof-sampler");
    ck_assert_int_ne(collector, 0);
    ck_assert_int_eq(syscall(SYS_tgkill, getpid(), collector, SIGTRAP), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(atomic_load(&stall_state), STALL_OVER);
    Profile *p = stop_and_decode();
    int64_t lost = 0, recorded = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        const Sample *s = p->sample[i];
        if (stack_has_function(p, s, "cpprof.lostProfileEvent")) {
            ck_assert_uint_eq(s->n_location_id, 1);
            ck_assert_int_eq(s->value[1], s->value[0] * p->period);
            lost += s->value[0];
        } else {
            recorded += s->value[0];
        }
    }
    ck_assert_int_gt(lost, 0);
    ck_assert_int_gt(recorded, 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST

static void *check_errno_while_burning(void *arg)
{
    long *clobbered = arg;
    double start = thread_cpu_seconds();
    errno = 4242;
    while (thread_cpu_seconds() - start < 0.3)
        for (int i = 0; i < 1000; i++)
            *clobbered += *(volatile int *)&errno != 4242;
    return NULL;
}

/* The handler interrupts a thread a few hundred times mid-loop; errno is
 * what the thread left in it every time it looks. */
START_TEST(errno_preserved_across_handler)
{
    set_hz(1000);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    const char *kv[] = {"test", "errno"};
    cpprof_labelset *set;
    ck_assert_int_eq(cpprof_labels(&set, 2, kv), 0);
    ck_assert_int_eq(cpprof_set_thread_labels(set), 0);
    long clobbered = 0;
    pthread_t t;
    ck_assert_int_eq(
        cpprof_thread_create(&t, NULL, check_errno_while_burning, &clobbered),
        0);
    pthread_join(t, NULL);
    cpprof_set_thread_labels(NULL);
    cpprof_labelset_release(set);
    Profile *p = stop_and_decode();
    ck_assert_int_eq(clobbered, 0);
    ck_assert_double_gt(cpu_with_label(p, "test", "errno"), 0.1);
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST

/* With cpu_signal set to a real-time signal, profiling works and leaves
 * SIGPROF alone (the application may use it). */
START_TEST(configured_signal_is_used)
{
    char v[16];
    snprintf(v, sizeof v, "%d", SIGRTMIN + 4);
    ck_assert_int_eq(cpprof_set("cpu_signal", v), 0);
    struct sigaction sa = {.sa_handler = application_handler};
    ck_assert_int_eq(sigaction(SIGPROF, &sa, NULL), 0);
    set_hz(250);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    struct burner t = {.seconds = 0.3};
    start_labelled(&t, "signal", "rt");
    pthread_join(t.thread, NULL);
    Profile *p = stop_and_decode();
    ck_assert_double_gt(cpu_with_label(p, "signal", "rt"), 0.5 * t.burned);
    assert_disposition(SIGPROF, application_handler);
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST


/* ---- Hostile hosts ------------------------------------ */

static atomic_int program_profs;
static void program_prof_handler(int sig)
{
    (void)sig;
    atomic_fetch_add(&program_profs, 1);
}

/* A program that installs its own SIGPROF handler and profiling timer while
 * a CPU profile runs keeps its handler when the profile stops (it used to
 * get SIG_DFL back and die of "Profiling timer expired"), and the profile
 * says the rest of its window went unsampled because of that. */
START_TEST(program_handler_installed_during_profile_stays)
{
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    burn_cpu(0.2);
    struct sigaction sa = {.sa_handler = program_prof_handler};
    ck_assert_int_eq(sigaction(SIGPROF, &sa, NULL), 0);
    struct itimerval every_10ms = {{0, 10000}, {0, 10000}};
    ck_assert_int_eq(setitimer(ITIMER_PROF, &every_10ms, NULL), 0);
    burn_cpu(0.3);
    Profile *p = stop_and_decode();
    int before = atomic_load(&program_profs);
    burn_cpu(0.3);
    assert_disposition(SIGPROF, program_prof_handler);
    ck_assert_int_gt(atomic_load(&program_profs), before);
    const char *frame;
    double taken = cpu_with_function_prefix(
        p, "cpprof.unsampled.signalTakenByProgram", &frame);
    ck_assert_msg(frame != NULL, "no signalTakenByProgram frame");
    ck_assert_double_gt(taken, 0.1);
    struct itimerval off = {0};
    setitimer(ITIMER_PROF, &off, NULL);
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST

/* A filter that makes timer_create fail with EPERM, as a container's
 * seccomp profile may. */
static void refuse_timer_create(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_timer_create, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof code / sizeof *code, code};
    ck_assert_int_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    ck_assert_int_eq(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
}

/* The status line and body of GET path from the in-process server. */
static int http_get(const char *path, char *body, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)http_port()),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[256];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    ck_assert_int_eq(write(fd, req, (size_t)n), n);
    size_t len = 0;
    ssize_t got;
    while (len + 1 < cap && (got = read(fd, body + len, cap - 1 - len)) > 0)
        len += (size_t)got;
    body[len] = '\0';
    close(fd);
    int status = 0;
    sscanf(body, "HTTP/1.%*d %d", &status);
    return status;
}

/* Where seccomp refuses timer_create, a CPU profile is an error naming the
 * reason, through the API and /profile alike, not an empty profile.  The
 * filter is installed in a child of the test's own: Check's runner calls
 * timer_create to time a test, and under the filter (on some kernels) it
 * reports a negative duration and fails the test itself.  So the child
 * checks without Check and says what failed through its exit status. */
#define REQUIRE(cond)                                                       \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);      \
            _exit(__LINE__ % 250 + 1);                                      \
        }                                                                   \
    } while (0)

static void profile_without_timers(void)
{
    refuse_timer_create();
    REQUIRE(cpprof_cpu_profile_start() == CPPROF_ENOTIMER);
    REQUIRE(timer_count() == 0);
    struct sigaction now;
    REQUIRE(sigaction(SIGPROF, NULL, &now) == 0);
    REQUIRE(!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL);
    REQUIRE(cpprof_http_start("127.0.0.1:0") == 0);
    char body[4096];
    int status = http_get("/debug/pprof/profile?seconds=1", body, sizeof body);
    REQUIRE(status >= 500);
    REQUIRE(strstr(body, "timer_create") != NULL);
    REQUIRE(cpprof_http_stop() == 0);
    _exit(0);
}

START_TEST(refused_timer_create_is_an_error)
{
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0)
        profile_without_timers();
    int status;
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child failed (status 0x%x): see its message above",
                  status);
}
END_TEST

#define MANY_THREADS 1000
#define PROGRAM_SIGNALS 400
static pthread_barrier_t parked;
static atomic_int program_rt_signals;

static void *park(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&parked);
    pause();
    return NULL;
}

static void count_rt_signal(int sig)
{
    (void)sig;
    atomic_fetch_add(&program_rt_signals, 1);
}

/* 1,000 threads, a queued-signal limit 1,300 above what is used: a timer
 * per thread would leave 300, so the program's 400 real-time signals could
 * not all be queued.  cpprof stays within half of what is free, the
 * program's signals all arrive, and the profile says how many threads went
 * unsampled for that reason. */
START_TEST(many_threads_leave_program_its_queued_signals)
{
    sigq_count_apart();
    int sig = SIGRTMIN + 3;
    sigset_t rt;
    sigemptyset(&rt);
    sigaddset(&rt, sig);
    ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, &rt, NULL), 0);
    struct sigaction sa = {.sa_handler = count_rt_signal};
    ck_assert_int_eq(sigaction(sig, &sa, NULL), 0);
    pthread_barrier_init(&parked, NULL, MANY_THREADS + 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (int i = 0; i < MANY_THREADS; i++) {
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, &attr, park, NULL), 0);
    }
    pthread_barrier_wait(&parked);
    struct rlimit lim = {sigq_used() + 1300, sigq_used() + 1300};
    ck_assert_int_eq(setrlimit(RLIMIT_SIGPENDING, &lim), 0);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    burn_cpu(0.1);
    for (int i = 0; i < PROGRAM_SIGNALS; i++)
        ck_assert_msg(sigqueue(getpid(), sig, (union sigval){i}) == 0,
                      "sigqueue %d of %d: %s", i, PROGRAM_SIGNALS,
                      strerror(errno));
    Profile *p = stop_and_decode();
    ck_assert_int_eq(pthread_sigmask(SIG_UNBLOCK, &rt, NULL), 0);
    ck_assert_int_eq(atomic_load(&program_rt_signals), PROGRAM_SIGNALS);
    const char *frame;
    cpu_with_function_prefix(p, "cpprof.unsampled.queuedSignalLimit", &frame);
    ck_assert_msg(frame != NULL, "no queuedSignalLimit frame");
    perftools__profiles__profile__free_unpacked(p, NULL);
}
END_TEST

/* Burns half a second, then waits until `arg`'s pipe closes: alive when
 * the profile stops, so the stop reads its last CPU (a thread that exits
 * takes its clock along, and a loaded machine can delay the collector's
 * read before that past any bound). */
static void *burn_half_second(void *arg)
{
    const int *pipe_fds = arg;
    char c;
    burn_cpu(0.5);
    while (read(pipe_fds[0], &c, 1) > 0)
        ;
    return NULL;
}

/* A worker that blocks every signal, as xz's do, burns 0.5 s: the profile
 * cannot sample it, so it says so, with the thread and its CPU time, and
 * the index page shows the same. */

/* The CPU thread t has used so far, by its own clock. */
static double thread_cpu_of(pthread_t t)
{
    clockid_t clock;
    struct timespec ts;
    ck_assert_int_eq(pthread_getcpuclockid(t, &clock), 0);
    ck_assert_int_eq(clock_gettime(clock, &ts), 0);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The profile p (freed here) reports one thread that blocks the signal,
 * with its half second of CPU (read when the profile stops): its CPU
 * clock, which holds, besides the burn, what the kernel did for it (its
 * wake-ups, its timer's expiries until the sampler deleted it), so at
 * most what that clock read after the stop (`used`): on a loaded CI
 * machine that was once 0.6002 s for the 0.5 s burn. */
static void assert_one_blocking_thread_half_second(Profile *p, double used)
{
    const char *frame;
    double blocked =
        cpu_with_function_prefix(p, "cpprof.unsampled.signalBlocked", &frame);
    ck_assert_msg(frame != NULL, "no signalBlocked frame");
    ck_assert_str_eq(frame, "cpprof.unsampled.signalBlocked (1 thread)");
    ck_assert_double_ge(blocked, 0.35);
    ck_assert_msg(blocked <= used + 0.001,
                  "%.4f s reported blocked, of a thread that used %.4f s",
                  blocked, used);
    perftools__profiles__profile__free_unpacked(p, NULL);
}

START_TEST(threads_blocking_the_signal_are_reported)
{
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t t;
    int until[2];
    ck_assert_int_eq(pipe(until), 0);
    ck_assert_int_eq(pthread_create(&t, NULL, burn_half_second, until), 0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    burn_cpu(0.1);
    /* Its half second burned: its CPU clock stops at 0.5 s. */
    struct timespec ts;
    clockid_t clock;
    ck_assert_int_eq(pthread_getcpuclockid(t, &clock), 0);
    do {
        usleep(10000);
        ck_assert_int_eq(clock_gettime(clock, &ts), 0);
    } while (ts.tv_sec + ts.tv_nsec / 1e9 < 0.5);
    Profile *p = stop_and_decode();
    assert_one_blocking_thread_half_second(p, thread_cpu_of(t));
    close(until[1]);
    pthread_join(t, NULL);
    close(until[0]);
    ck_assert_int_eq(cpprof_http_start("127.0.0.1:0"), 0);
    char body[65536];
    ck_assert_int_eq(http_get("/debug/pprof/", body, sizeof body), 200);
    ck_assert_msg(strstr(body, "could not sample 1 thread (") &&
                      strstr(body, "they block the profiling signal"),
                  "index page says nothing of the blocked thread");
    ck_assert_int_eq(cpprof_http_stop(), 0);
}
END_TEST

/* A thread of the program that exists before the profile starts, blocks
 * every signal and waits for `go` to be written; then burns `brief` s of
 * CPU still blocked, sleeps 0.3 s, and burns `seconds` more with its mask
 * back (unless `for_good`) in block_then_burn, its own frame. */
struct blocker {
    pthread_t thread;
    int go[2];
    double brief, seconds;
    bool for_good;
};

__attribute__((noinline)) static void *block_then_burn(void *arg)
{
    struct blocker *b = arg;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    char c;
    ck_assert_int_eq(read(b->go[0], &c, 1), 1);
    burn_cpu(b->brief);
    usleep(300000);
    if (!b->for_good)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    burn_cpu(b->seconds);
    return NULL;
}

static void blocker_start(struct blocker *b)
{
    ck_assert_int_eq(pipe(b->go), 0);
    ck_assert_int_eq(pthread_create(&b->thread, NULL, block_then_burn, b), 0);
}

static void blocker_go(struct blocker *b)
{
    ck_assert_int_eq(write(b->go[1], "g", 1), 1);
}

static void blocker_end(struct blocker *b)
{
    pthread_join(b->thread, NULL);
    close(b->go[0]);
    close(b->go[1]);
}

/* A thread that blocks every signal for a moment only, with less than a
 * period of CPU meanwhile, as each new thread does in glibc's start until
 * its start routine, is sampled, not reported: both threads here are
 * found by the profile's first listing (so their masks are unread), and
 * the one that blocks the signal for good leaves the process's CPU
 * unaccounted, so that the first look reads every mask, the brief one's
 * while it is still blocked (on a quiet machine; a loaded one may look
 * later, which the check allows as well). */
START_TEST(thread_blocking_the_signal_briefly_is_sampled)
{
    set_hz(250);
    struct blocker brief = {.brief = 0.001, .seconds = 0.4};
    struct blocker xz = {.brief = 0.5, .for_good = true};
    blocker_start(&brief);
    blocker_start(&xz);
    usleep(50000); /* both into their read */
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    blocker_go(&brief);
    blocker_go(&xz);
    blocker_end(&brief);
    blocker_end(&xz);
    Profile *p = stop_and_decode();
    double sampled = cpu_with_function(p, "block_then_burn");
    const char *frame;
    double blocked =
        cpu_with_function_prefix(p, "cpprof.unsampled.signalBlocked", &frame);
    ck_assert_msg(frame != NULL &&
                      strcmp(frame, "cpprof.unsampled.signalBlocked "
                                    "(1 thread)") == 0,
                  "reported: %s (%.3f s)", frame ? frame : "nothing", blocked);
    perftools__profiles__profile__free_unpacked(p, NULL);
    ck_assert_msg(sampled >= 0.25 && sampled <= 0.55,
                  "the brief blocker burned 0.4 s unblocked, sampled %.3f s",
                  sampled);
}
END_TEST

/* ---- Idle threads --------------------------------------------------------- */

#define IDLE_THREADS 200

/* Threads parked in a read of a pipe until its write end closes, as a
 * server's connection threads wait for their next request. */
struct idlers {
    pthread_t t[IDLE_THREADS];
    int pipe[2];
    atomic_int parked;
};

static void *idle_main(void *arg)
{
    struct idlers *s = arg;
    char c;
    atomic_fetch_add(&s->parked, 1);
    while (read(s->pipe[0], &c, 1) > 0)
        ;
    return NULL;
}

static void idlers_start(struct idlers *s)
{
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    ck_assert_int_eq(pipe(s->pipe), 0);
    atomic_init(&s->parked, 0);
    for (int i = 0; i < IDLE_THREADS; i++)
        ck_assert_int_eq(pthread_create(&s->t[i], &attr, idle_main, s), 0);
    pthread_attr_destroy(&attr);
    while (atomic_load(&s->parked) < IDLE_THREADS)
        usleep(1000);
    usleep(50000); /* each into its read */
}

static void idlers_stop(struct idlers *s)
{
    close(s->pipe[1]);
    for (int i = 0; i < IDLE_THREADS; i++)
        pthread_join(s->t[i], NULL);
    close(s->pipe[0]);
}

/* A thread that sleeps from before the profile until woken (a byte on
 * `wake`), burns `seconds` of CPU, and sleeps again until the pipe
 * closes. */
struct sleeper {
    pthread_t thread;
    int wake[2];
    double seconds;
    bool block_all; /* every signal blocked, as xz's workers do */
    atomic_bool burned;
};

__attribute__((noinline)) void *sleeper_main(void *arg)
{
    struct sleeper *s = arg;
    if (s->block_all) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);
    }
    char c;
    if (read(s->wake[0], &c, 1) == 1)
        burn_cpu(s->seconds);
    atomic_store(&s->burned, true);
    while (read(s->wake[0], &c, 1) > 0)
        ;
    return NULL;
}

static void sleeper_start(struct sleeper *s)
{
    ck_assert_int_eq(pipe(s->wake), 0);
    ck_assert_int_eq(pthread_create(&s->thread, NULL, sleeper_main, s), 0);
    usleep(50000); /* into its read */
}

/* Wakes the sleeper and waits until it has burned its CPU. */
static void sleeper_wake(struct sleeper *s)
{
    ck_assert_int_eq(write(s->wake[1], "x", 1), 1);
    while (!atomic_load(&s->burned))
        usleep(10000);
}

static void sleeper_end(struct sleeper *s)
{
    close(s->wake[1]);
    pthread_join(s->thread, NULL);
    close(s->wake[0]);
}

static double since(double t0)
{
    return monotonic_seconds() - t0;
}

/* Read system calls the process made so far (/proc/self/io's syscr), or
 * -1 where the kernel does not count them. */
static long long read_calls(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    long long n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "syscr: %lld", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

/* A profile over many idle threads does no work per idle thread: the
 * sampler read each one's status file twice at the start (its signal
 * mask, and the queued-signal count for its timer) and once more at its
 * first recheck, 2% of a core over a 5 s profile with 1,000 of them
 * (bench/idle_threads).  Counted in read system calls from the start to
 * just before the stop (symbolizing reads files), which the machine's
 * load does not change: a thread that never runs needs none, and the
 * mappings' table, which lists the idle threads' stacks, a few. */
START_TEST(idle_threads_cost_no_reads_of_their_own)
{
    if (read_calls() < 0)
        return; /* no I/O accounting in this kernel */
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    burn_cpu(0.05); /* the first profile's one-off loading */
    Profile *p = stop_and_decode();
    perftools__profiles__profile__free_unpacked(p, NULL);
    static struct idlers idlers;
    idlers_start(&idlers);
    long long before = read_calls();
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    usleep(1500000); /* past the first second's checks */
    long long reads = read_calls() - before;
    p = stop_and_decode();
    perftools__profiles__profile__free_unpacked(p, NULL);
    idlers_stop(&idlers);
    ck_assert_msg(reads < IDLE_THREADS / 4,
                  "%lld read calls for a profile over %d idle threads", reads,
                  IDLE_THREADS);
}
END_TEST

/* A thread that slept through the profile's start and wakes in its
 * middle is sampled from then on: its timer was set before it woke. */
START_TEST(idle_thread_woken_mid_profile_is_sampled)
{
    static struct idlers idlers;
    idlers_start(&idlers);
    struct sleeper s = {.seconds = 0.4};
    sleeper_start(&s);
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    usleep(300000);
    sleeper_wake(&s);
    usleep(100000);
    Profile *p = stop_and_decode();
    sleeper_end(&s);
    double woken = cpu_with_function(p, "sleeper_main");
    const char *frame;
    cpu_with_function_prefix(p, "cpprof.unsampled", &frame);
    perftools__profiles__profile__free_unpacked(p, NULL);
    idlers_stop(&idlers);
    ck_assert_msg(woken >= 0.25 && woken <= 0.55,
                  "the woken thread burned 0.4 s, sampled %.3f s", woken);
    ck_assert_msg(frame == NULL, "unsampled: %s", frame);
}
END_TEST

/* One that blocks the signal, asleep when the profile starts, burns 0.5 s
 * in its middle: the profile cannot sample it and says so, with its CPU,
 * though the sampler looks at its mask only once it ran, at the recheck
 * after (a second after the start). */
START_TEST(idle_thread_blocking_the_signal_is_reported)
{
    static struct idlers idlers;
    idlers_start(&idlers);
    struct sleeper s = {.seconds = 0.5, .block_all = true};
    sleeper_start(&s);
    double t0 = monotonic_seconds();
    ck_assert_int_eq(cpprof_cpu_profile_start(), 0);
    usleep(300000);
    sleeper_wake(&s);
    while (since(t0) < 1.5)
        usleep(10000);
    Profile *p = stop_and_decode();
    double used = thread_cpu_of(s.thread);
    sleeper_end(&s);
    assert_one_blocking_thread_half_second(p, used);
    idlers_stop(&idlers);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sampler");
    TCase *tc = tcase_create("sampler");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, thread_cpprof_did_not_create_is_sampled);
    tcase_add_test(tc, signal_with_application_handler_is_refused);
    tcase_add_test(tc, stop_restores_previous_disposition);
    tcase_add_test(tc, one_profile_at_a_time);
    tcase_add_test(tc, dropped_samples_are_reported);
    tcase_add_test(tc, errno_preserved_across_handler);
    tcase_add_test(tc, configured_signal_is_used);
    tcase_add_test(tc, program_handler_installed_during_profile_stays);
    suite_add_tcase(s, tc);
    /* A limit on the queued-signal count, which is the user's unless the
     * process can have a user namespace of its own (test/sigq.h). */
    TCase *sigq = tcase_create("sampler_sigq");
    tcase_set_timeout(sigq, 30);
    tcase_set_tags(sigq, "shared_sigq");
    tcase_add_test(sigq, many_threads_leave_program_its_queued_signals);
    suite_add_tcase(s, sigq);
    /* Tagged by what they need of the system, so that a run under an
     * emulator that lacks it can leave them out (CK_EXCLUDE_TAGS;
     * test/cross/aarch64.sh): these count every thread of the process,
     * or hold that none goes unsampled, and qemu-user runs one of its
     * own, which blocks every signal; the last installs a seccomp
     * filter, which qemu-user refuses. */
    TCase *all = tcase_create("sampler_every_thread");
    tcase_set_timeout(all, 30);
    tcase_set_tags(all, "every_thread_is_the_program");
    tcase_add_test(all, labels_sampled_in_proportion_to_cpu);
    tcase_add_test(all, short_lived_threads_sampled_without_timer_leak);
    tcase_add_test(all, one_timer_per_thread_none_after_stop);
    tcase_add_test(all, new_thread_gets_its_timer_at_once);
    tcase_add_test(all, threads_blocking_the_signal_are_reported);
    tcase_add_test(all, thread_blocking_the_signal_briefly_is_sampled);
    tcase_add_test(all, idle_threads_cost_no_reads_of_their_own);
    tcase_add_test(all, idle_thread_woken_mid_profile_is_sampled);
    tcase_add_test(all, idle_thread_blocking_the_signal_is_reported);
    suite_add_tcase(s, all);
    TCase *seccomp = tcase_create("sampler_seccomp");
    tcase_set_timeout(seccomp, 30);
    tcase_set_tags(seccomp, "seccomp");
    tcase_add_test(seccomp, refused_timer_create_is_an_error);
    suite_add_tcase(s, seccomp);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
