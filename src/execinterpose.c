/*
 * execinterpose.c -- execve, execv, execvp and execvpe interposed, so that
 * zero-code mode serves from the program a wrapper script execs.
 *
 * Zero-code mode takes CPPROF_HTTP and CPPROF_HTTP_TOKEN out of the
 * environment at load (zerocode.c), so that the processes a program
 * starts do not all try to serve on its port, nor learn the token.  But a
 * process that replaces itself with exec is not starting another: a wrapper
 * that ends in `exec "$@"` (a container's entrypoint, pyenv's shims) loaded
 * cpprof first, served for a moment, and handed the real program an
 * environment without the variables, so the program never served.  So an
 * exec by the very process that took them (same pid: not a fork or vfork
 * child, which have pids of their own) gets them back in the environment it
 * passes; the new image loads cpprof again and serves, the old listener
 * having been closed by the exec (close-on-exec).
 *
 * A wrapper (timeout, sh -c, setsid -f...) takes nothing and serves not:
 * the programs it runs find the variables in the environment it passes,
 * and its first exec says on stderr which pid serves.
 *
 * glibc's execv, execvp and execvpe reach execve inside libc, past this
 * one, so they are interposed too; the execl family and fexecve are not.
 */
#define _GNU_SOURCE
#include "forkwake.h"
#include "zerocode.h"
#include "interpose.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int exec_fn(const char *, char *const[], char *const[]);
static void *next_execve, *next_execvpe;

/* Looked up by the constructor: a program's exec usually comes right
 * after a fork, where dlsym must not run (another thread may have held
 * the loader's lock at the fork); a call before it (another library's
 * constructor) looks up itself. */
__attribute__((constructor)) static void find_next_execs(void)
{
    interpose_next(&next_execve, "execve");
    interpose_next(&next_execvpe, "execvpe");
}

/* Whether entry is NAME=... for one of the n variables in vars. */
static int is_one_of(const char *entry, const char *const *vars, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t name_len = (size_t)(strchr(vars[i], '=') - vars[i]) + 1;
        if (strncmp(entry, vars[i], name_len) == 0)
            return 1;
    }
    return 0;
}

/* Calls next with envp and the n variables in vars put back in it.  The
 * new array is mapped for the call and sized by envp (the exec replaces
 * the mapping with the image; a failed one unmaps it): no allocator may
 * run here (an exec after a fork of a threaded program), and the stack of
 * the calling thread may be small (16 KiB; 8 KiB here overran it).  When
 * no memory can be had, envp goes as it is, and the program does not
 * serve. */
static int exec_with(exec_fn *next, const char *what, char *const argv[],
                     char *const envp[], const char *const *vars, size_t n)
{
    size_t count = 0;
    while (envp[count] != NULL)
        count++;
    size_t bytes = (count + n + 1) * sizeof(char *);
    char **with = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (with == MAP_FAILED)
        return next(what, argv, envp);
    size_t k = 0;
    for (size_t i = 0; i < count; i++)
        if (!is_one_of(envp[i], vars, n))
            with[k++] = envp[i];
    for (size_t i = 0; i < n; i++)
        with[k++] = (char *)vars[i];
    with[k] = NULL;
    int rc = next(what, argv, with);
    int saved = errno;
    munmap(with, bytes);
    errno = saved;
    return rc;
}

/* Calls the next definition of `name` (execve or execvpe, which take the
 * same arguments) with envp, and zero-code mode's variables given back
 * when this process is the one that took them.  Async-signal-safe, as
 * execve is (mmap and munmap are plain system calls). */
static int exec_next(void **cache, const char *name, const char *what,
                     char *const argv[], char *const envp[])
{
    exec_fn *next = (exec_fn *)interpose_next(cache, name);
    if (next == NULL) {
        errno = ENOSYS;
        return -1;
    }
    http_zero_code_exec(what);
    forkwake_exec();
    const char *vars[HTTP_ZERO_CODE_VARS];
    pid_t owner;
    size_t n = http_zero_code_env(vars, &owner);
    int rc = n == 0 || owner != getpid() || envp == NULL
                 ? next(what, argv, envp)
                 : exec_with(next, what, argv, envp, vars, n);
    int saved = errno;
    forkwake_exec_failed();
    errno = saved;
    return rc;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    return exec_next(&next_execve, "execve", path, argv, envp);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    return exec_next(&next_execvpe, "execvpe", file, argv, envp);
}

EXPORT int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}
