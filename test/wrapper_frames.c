/*
 * wrapper_frames.c -- a program that spends its time in functions cpprof
 * interposes, for wrapper_frames.sh: two threads take and release a
 * mutex of their own, allocate and free, and hand a token to each other
 * through a condition variable under a shared mutex, until killed.  The
 * loop's mutex is each thread's own so that their time stays in the lock
 * calls and malloc rather than in the kernel's futex: on a loaded machine
 * a shared one left malloc under 0.5% of the profile.  It never calls cpprof: the library is
 * linked and serves from CPPROF_HTTP, as in zero-code mode.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t own_mu[2] = {PTHREAD_MUTEX_INITIALIZER,
                                    PTHREAD_MUTEX_INITIALIZER};
static pthread_cond_t turn_changed = PTHREAD_COND_INITIALIZER;
static int turn;
static volatile unsigned long sink;

__attribute__((noinline)) static void churn(int self)
{
    for (int i = 0; i < 64; i++) {
        pthread_mutex_lock(&own_mu[self]);
        sink++;
        pthread_mutex_unlock(&own_mu[self]);
        char *p = malloc(64 + (size_t)i);
        if (p)
            p[0] = (char)i;
        sink += (unsigned long)p[0];
        free(p);
    }
    pthread_mutex_lock(&mu);
    while (turn != self)
        pthread_cond_wait(&turn_changed, &mu);
    turn = !self;
    pthread_cond_broadcast(&turn_changed);
    pthread_mutex_unlock(&mu);
}

static void *player(void *arg)
{
    int self = (int)(long)arg;
    for (;;)
        churn(self);
    return NULL;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, player, (void *)1L) != 0)
        return 1;
    printf("serving\n");
    fflush(stdout);
    player((void *)0L);
    return 0;
}
