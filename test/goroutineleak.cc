/*
 * goroutineleak.cc -- the program of test/goroutineleak.sh: threads that
 * can never run again beside healthy ones blocked in the same calls.
 *
 *   goroutineleak --addr HOST:PORT
 *
 * Stuck for good (each a cycle of threads, each holding its own lock and
 * blocked on the next one's, formed behind a barrier so that every
 * member holds its lock before it asks for the next):
 *   abba-1, abba-2       two pthread mutexes, taken in opposite orders;
 *   ring-1..ring-3       three pthread mutexes in a ring;
 *   std-1, std-2         two std::mutex, from std::threads;
 *   rw-1, rw-2           a mutex and an rwlock held for writing;
 *   behind               blocked on abba-1's mutex, behind that cycle;
 *   orphaned             blocked on a mutex whose owner exited holding it.
 * Healthy, each blocked and woken at the end, whose calls must end as
 * they should (no EINTR, no early return):
 *   h-read, h-poll       read and poll (no timeout) on an idle pipe;
 *   h-cond               pthread_cond_wait;
 *   h-mutex              a mutex that h-holder holds while it runs
 *                        (spins a millisecond, sleeps nine), until the
 *                        end, then releases.
 *
 * Prints one line per thread once every one is in place, the lock it
 * waits on where it waits on one (its futex word), then "serving ...":
 *
 *   thread abba-1 4242 lock 0x55d0c2a0e040
 *   thread h-read 4250 lock -
 *
 * SIGTERM wakes the healthy ones; then "healthy ok" when each call ended
 * as it should, and the program exits 0 (the stuck threads stay stuck;
 * _exit, as no destructor could take their locks), else 1.
 */
#include <cpprof.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include <poll.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace {

struct named {
    const char *name;
    const void *lock; /* the futex word it waits on, or nullptr */
    std::atomic<pid_t> tid{0};
};

named threads[] = {
    {"abba-1", nullptr}, {"abba-2", nullptr}, {"ring-1", nullptr},
    {"ring-2", nullptr}, {"ring-3", nullptr}, {"std-1", nullptr},
    {"std-2", nullptr},  {"rw-1", nullptr},   {"rw-2", nullptr},
    {"behind", nullptr}, {"orphaned", nullptr}, {"h-read", nullptr},
    {"h-poll", nullptr}, {"h-cond", nullptr}, {"h-mutex", nullptr},
    {"h-holder", nullptr}};
constexpr int NTHREADS = sizeof threads / sizeof threads[0];

pthread_mutex_t abba[2] = {PTHREAD_MUTEX_INITIALIZER,
                           PTHREAD_MUTEX_INITIALIZER};
pthread_mutex_t ring[3] = {PTHREAD_MUTEX_INITIALIZER,
                           PTHREAD_MUTEX_INITIALIZER,
                           PTHREAD_MUTEX_INITIALIZER};
std::mutex std_mu[2];
pthread_mutex_t rw_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_rwlock_t rw_lock = PTHREAD_RWLOCK_INITIALIZER;
pthread_mutex_t orphan = PTHREAD_MUTEX_INITIALIZER;
pthread_barrier_t abba_in, ring_in, std_in, rw_in;

int idle[2];
pthread_mutex_t cond_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
bool woken; /* under cond_mu */
pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> stopping{false};
std::atomic<int> healthy_bad{0}, healthy_done{0};

/* Names the calling thread after threads[i] and records its tid. */
void enter(int i, const void *lock)
{
    pthread_setname_np(pthread_self(), threads[i].name);
    threads[i].lock = lock;
    threads[i].tid = (pid_t)syscall(SYS_gettid);
}

/* Holds `mine`, waits for the rest of its cycle to hold theirs, then
 * blocks on `next` for good. */
void cycle_member(int i, pthread_mutex_t *mine, pthread_mutex_t *next,
                  pthread_barrier_t *in)
{
    pthread_mutex_lock(mine);
    enter(i, next);
    pthread_barrier_wait(in);
    pthread_mutex_lock(next);
}

void std_member(int i, std::mutex *mine, std::mutex *next)
{
    std::lock_guard<std::mutex> hold(*mine);
    enter(i, next->native_handle());
    pthread_barrier_wait(&std_in);
    next->lock();
}

/* Ends a healthy thread's check: `ok` when its call ended as it should. */
void healthy_end(bool ok)
{
    if (!ok)
        healthy_bad++;
    healthy_done++;
}

void *run(void *arg)
{
    int i = (int)(intptr_t)arg;
    const char *name = threads[i].name;
    if (strncmp(name, "abba-", 5) == 0) {
        int k = name[5] - '1';
        cycle_member(i, &abba[k], &abba[1 - k], &abba_in);
    } else if (strncmp(name, "ring-", 5) == 0) {
        int k = name[5] - '1';
        cycle_member(i, &ring[k], &ring[(k + 1) % 3], &ring_in);
    } else if (strcmp(name, "rw-1") == 0) {
        pthread_mutex_lock(&rw_mu);
        enter(i, &rw_lock.__data.__writers_futex);
        pthread_barrier_wait(&rw_in);
        pthread_rwlock_wrlock(&rw_lock);
    } else if (strcmp(name, "rw-2") == 0) {
        pthread_rwlock_wrlock(&rw_lock);
        enter(i, &rw_mu);
        pthread_barrier_wait(&rw_in);
        pthread_mutex_lock(&rw_mu);
    } else if (strcmp(name, "behind") == 0) {
        enter(i, &abba[0]);
        pthread_mutex_lock(&abba[0]);
    } else if (strcmp(name, "orphaned") == 0) {
        std::thread([] { pthread_mutex_lock(&orphan); }).join();
        enter(i, &orphan);
        pthread_mutex_lock(&orphan);
    } else if (strcmp(name, "h-read") == 0) {
        enter(i, nullptr);
        char c;
        healthy_end(read(idle[0], &c, 1) == 1);
    } else if (strcmp(name, "h-poll") == 0) {
        enter(i, nullptr);
        struct pollfd p = {idle[0], POLLIN, 0};
        healthy_end(poll(&p, 1, -1) == 1);
    } else if (strcmp(name, "h-cond") == 0) {
        pthread_mutex_lock(&cond_mu);
        enter(i, nullptr);
        while (!woken)
            pthread_cond_wait(&cond, &cond_mu);
        pthread_mutex_unlock(&cond_mu);
        healthy_end(true);
    } else if (strcmp(name, "h-holder") == 0) {
        pthread_mutex_lock(&held);
        enter(i, nullptr);
        while (!stopping) {
            struct timespec t0, t, nap = {0, 9000000};
            clock_gettime(CLOCK_MONOTONIC, &t0);
            do
                clock_gettime(CLOCK_MONOTONIC, &t);
            while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec -
                       t0.tv_nsec < 1000000);
            nanosleep(&nap, nullptr);
        }
        pthread_mutex_unlock(&held);
    } else if (strcmp(name, "h-mutex") == 0) {
        while (threads[NTHREADS - 1].tid == 0) /* the holder holds it */
            usleep(1000);
        enter(i, &held);
        healthy_end(pthread_mutex_lock(&held) == 0 && stopping);
        pthread_mutex_unlock(&held);
    }
    return nullptr;
}

/* Waits until each thread is in place (named, and asleep in its call)
 * and prints the table. */
void await_all(void)
{
    for (int i = 0; i < NTHREADS; i++)
        while (threads[i].tid == 0)
            usleep(1000);
    usleep(200000); /* from enter() to the blocking call: a few calls */
    for (int i = 0; i < NTHREADS; i++) {
        if (threads[i].lock)
            printf("thread %s %d lock %p\n", threads[i].name,
                   (int)threads[i].tid, threads[i].lock);
        else
            printf("thread %s %d lock -\n", threads[i].name,
                   (int)threads[i].tid);
    }
}

/* Wakes the healthy threads and waits for their verdicts. */
bool healthy_woken(void)
{
    stopping = true;
    if (write(idle[1], "xx", 2) != 2)
        return false;
    pthread_mutex_lock(&cond_mu);
    woken = true;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&cond_mu);
    for (int tick = 0; tick < 6000 && healthy_done < 4; tick++)
        usleep(10000);
    return healthy_done == 4 && healthy_bad == 0;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc != 3 || strcmp(argv[1], "--addr") != 0) {
        fprintf(stderr, "usage: goroutineleak --addr HOST:PORT\n");
        return 2;
    }
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, nullptr);
    pthread_barrier_init(&abba_in, nullptr, 2);
    pthread_barrier_init(&ring_in, nullptr, 3);
    pthread_barrier_init(&std_in, nullptr, 2);
    pthread_barrier_init(&rw_in, nullptr, 2);
    if (pipe(idle) != 0)
        return 1;
    int rc = cpprof_http_start(argv[2]);
    if (rc) {
        fprintf(stderr, "goroutineleak: %s\n", cpprof_strerror(rc));
        return 1;
    }
    for (int i = 0; i < NTHREADS; i++) {
        if (strncmp(threads[i].name, "std-", 4) == 0) {
            int k = threads[i].name[4] - '1';
            std::thread(std_member, i, &std_mu[k], &std_mu[1 - k]).detach();
            continue;
        }
        pthread_t t;
        pthread_create(&t, nullptr, run, (void *)(intptr_t)i);
        pthread_detach(t);
    }
    await_all();
    printf("serving http://%s/debug/pprof/\n", argv[2]);
    fflush(stdout);
    int sig;
    sigwait(&term, &sig);
    bool ok = healthy_woken();
    cpprof_http_stop();
    printf(ok ? "healthy ok\n" : "healthy calls cut short\n");
    fflush(stdout);
    _exit(ok ? 0 : 1);
}
