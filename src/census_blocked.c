/*
 * census_blocked.c -- a thread blocked in the kernel, its stack read from
 * outside without stopping or signalling it (census.c says why): its
 * place from /proc/self/task/TID/syscall, the walk from there
 * (unwind_blocked_thread), and its CPU clock before and after, which
 * proves that the stack held still.  Apart from census.c because it is
 * the one way a census reads a stack without the thread's help, with its
 * own failures (vfork, a process that is not dumpable, a thread on its
 * way out).
 */
#define _GNU_SOURCE
#include "census_int.h"
#include "thread.h"
#include "unwind.h"
#include "warn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A blocked thread's place, from /proc/self/task/TID/syscall: "NR arg1 ..
 * arg6 SP PC" in a system call, "-1 SP PC" blocked outside one (a page
 * fault), "running" otherwise. */
struct blocked_at {
    char text[160];
    long nr;
    unsigned long long arg1;
    uintptr_t sp, pc;
};

/* Reads the thread's syscall file, open on `fd`: pread from 0 makes the
 * kernel write it afresh, so one open serves every try.  Returns BLOCKED (with *at filled), NOT_BLOCKED
 * when the thread runs, or -errno (-ESRCH: gone). */
static int read_blocked_at(int fd, struct blocked_at *at)
{
    ssize_t n = pread(fd, at->text, sizeof at->text - 1, 0);
    if (n < 0)
        return -errno;
    at->text[n] = '\0';
    if (n == 0)
        return -ESRCH;
    if (strncmp(at->text, "running", 7) == 0)
        return NOT_BLOCKED;
    char *end;
    at->nr = strtol(at->text, &end, 10);
    /* SP and PC are the last two fields, whatever came between. */
    unsigned long long v[8];
    int k = 0;
    while (k < 8 && *end && *end != '\n') {
        char *next;
        v[k] = strtoull(end, &next, 16);
        if (next == end)
            break;
        end = next;
        k++;
    }
    if (k < 2)
        return -EPROTO;
    at->arg1 = v[0];
    at->sp = (uintptr_t)v[k - 2];
    at->pc = (uintptr_t)v[k - 1];
    return BLOCKED;
}

/* Whether the thread waits in vfork.  arm64 has no vfork system call:
 * glibc's vfork there is clone with CLONE_VFORK in its first argument
 * (the flags), as a program's own clone may be on x86-64. */
static bool in_vfork(const struct blocked_at *at)
{
#ifdef SYS_vfork
    if (at->nr == SYS_vfork)
        return true;
#endif
    return at->nr == SYS_clone && (at->arg1 & CLONE_VFORK);
}

/* A blocked thread whose syscall file cannot be opened for want of
 * permission: a process that made itself non-dumpable (setuid to another
 * user, or PR_SET_DUMPABLE 0) has its /proc files owned by root, and that
 * file is its owner's alone.  Its stack cannot be had without a signal,
 * which would cut its blocking call short, so it stays in the census with
 * the reason instead, said once on stderr too.  (It was left out as if it
 * had exited: a census after setuid listed only its own thread.) */
static bool stack_unreadable(census_thread *t, int rc)
{
    static atomic_bool said;
    if (rc != -EACCES && rc != -EPERM)
        return false;
    snprintf(t->missing, sizeof t->missing,
             "stack unreadable: the process is not dumpable");
    if (!atomic_exchange(&said, true))
        warn_stderr("cpprof: census: the stacks of threads blocked in the "
                    "kernel cannot be read: the process is not dumpable "
                    "(setuid to another user, or PR_SET_DUMPABLE 0), so "
                    "only root may read /proc/self/task/TID/syscall; they "
                    "are listed without a stack, not signalled\n");
    return true;
}

/* Walks a thread that is blocked in the kernel without stopping it: the
 * thread does not run, so the stack above its SP holds still while the
 * walker reads it (through the fault-proof path).  Its CPU clock, read
 * before the syscall file and after the walk, proves that it did not run
 * meanwhile; otherwise the walk is discarded and tried again.  The first
 * try takes the clock the listing read (t->cpu_ns, before the stat and
 * wchan files, if any), one system call less per thread; when the clock
 * still reads that after the walk, all of it is one still moment
 * (t->still).  A thread that ran since fails that try: it gets one more.
 * Returns BLOCKED (stack in t, or the reason in t->missing), NOT_BLOCKED
 * (it runs now: signal it), -EAGAIN (it kept running), -ENOENT/-ESRCH
 * (gone). */
int census_walk_blocked(const struct task_dir *td, census_thread *t)
{
    char path[24];
    snprintf(path, sizeof path, "%d/syscall", (int)t->tid);
    int fd = openat(td->fd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = -errno;
        return stack_unreadable(t, err) ? BLOCKED : err;
    }
    int rc = -EAGAIN;
    for (int try = 0; try <= WALK_TRIES && rc == -EAGAIN; try++) {
        int64_t cpu_before = try == 0 ? t->cpu_ns : tid_cpu_ns(t->tid);
        struct blocked_at at;
        rc = cpu_before < 0 ? -ESRCH : read_blocked_at(fd, &at);
        if (rc != BLOCKED)
            break;
        /* In vfork the child runs on this thread's stack: it cannot be
         * read, and a signal waits for the child's exec or exit. */
        if (in_vfork(&at)) {
            strcpy(t->missing, "in vfork: the child has its stack");
            break;
        }
        /* A thread without a kernel stack has exited: the file reads
         * "-1 0x0 0x0".  A zombie leader stays listed, with the reason (a
         * census with details knew it from its state already); any other
         * thread is on its way out and is left out, like one already
         * gone (counting it made a goroutine delta's ends differ). */
        if (at.sp == 0) {
            if (t->tid != getpid()) {
                rc = -ESRCH;
                break;
            }
            strcpy(t->missing, "thread exited");
            break;
        }
        t->depth = unwind_blocked_thread(td->pid, at.pc, at.sp, t->pcs,
                                         STACK_MAX_FRAMES, &t->flags);
        int64_t cpu_after = tid_cpu_ns(t->tid);
        if (cpu_after < 0)
            rc = -ESRCH;
        else if (cpu_after != cpu_before)
            rc = -EAGAIN;
        else
            t->still = cpu_before == t->cpu_ns;
        t->syscall = at.nr;
    }
    close(fd);
    if (rc != BLOCKED) {
        t->depth = 0;
        t->syscall = CENSUS_UNREAD;
    }
    return rc;
}
