/*
 * fork_locks.c -- a forked child finds every cpprof lock it needs free.
 *
 * libcpprof.so keeps the locks held across fork on a page that fork gives
 * the child zeroed (MADV_WIPEONFORK, src/atfork.h), so the child releases
 * nothing; where that advice is answered 0 and not followed (qemu-user
 * 7.2, under which this test also runs on arm64) the child must find out
 * and release them itself, or its first label set or sampled allocation
 * waits forever.  Twenty forks, each child building label sets (the intern
 * and registry locks), setting its thread's labels and allocating enough
 * to be sampled (the heap lock), twice; a child that hangs is ended by its
 * alarm and fails the test.
 */
#include <cpprof.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define FORKS 20

static int use_locks(int round)
{
    char value[32];
    snprintf(value, sizeof value, "r%d", round);
    const char *kv[] = {"round", value};
    cpprof_labelset *set = NULL;
    if (cpprof_labels(&set, 2, kv) != 0 || cpprof_set_thread_labels(set) != 0)
        return 1;
    cpprof_labelset_release(set);
    for (int i = 0; i < 2000; i++)
        free(malloc(4096 + (size_t)i));
    return 0;
}

int main(void)
{
    for (int round = 0; round < FORKS; round++) {
        if (use_locks(round) != 0) {
            fprintf(stderr, "fork_locks: the parent's labels failed\n");
            return 1;
        }
        pid_t child = fork();
        if (child < 0) {
            perror("fork_locks: fork");
            return 1;
        }
        if (child == 0) {
            alarm(60);
            _exit(use_locks(round + 100) || use_locks(round + 200));
        }
        int status = 0;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "fork_locks: round %d: the child %s\n", round,
                    WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM
                        ? "hung on a lock"
                        : "failed");
            return 1;
        }
    }
    printf("fork_locks: %d children took cpprof's locks\n", FORKS);
    return 0;
}
