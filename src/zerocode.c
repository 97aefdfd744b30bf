/*
 * zerocode.c -- zero-code mode: `LD_PRELOAD=libcpprof.so
 * CPPROF_HTTP=HOST:PORT program` serves /debug/pprof/ from any dynamically
 * linked program that never heard of cpprof.  Its variables are taken out
 * of the environment at load, so that the processes the program starts do
 * not inherit them, and kept for an exec of this very process
 * (execinterpose.c).
 */
#define _GNU_SOURCE /* environ */
#include "zerocode.h"
#include "server_entry.h"

#include "atfork.h"
#include "zerolisten.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "cpprof.h"
#include "warn.h"

/* Zero-code mode's variables taken out of the environment, and by whom
 * (http_zero_code_env). */
static const char *zero_code_vars[HTTP_ZERO_CODE_VARS];
static size_t n_zero_code_vars;
static pid_t zero_code_owner;

size_t http_zero_code_env(const char *vars[HTTP_ZERO_CODE_VARS],
                          pid_t *owner)
{
    for (size_t i = 0; i < n_zero_code_vars; i++)
        vars[i] = zero_code_vars[i];
    *owner = zero_code_owner;
    return n_zero_code_vars;
}

/* Removes every NAME=... entry from the process's environment in place,
 * keeping the first (the one getenv saw) for an exec of this process.
 * Not unsetenv(): a program may define its own (bash does, over its shell
 * variables, which it has not even set up while constructors run), and
 * the dynamic linker gives cpprof's call to it, which then leaves the
 * variable to every child.  glibc's unsetenv also shifts the array in
 * place, so environ and main's envp (the same array) both lose it. */
static void take_from_environ(const char *name)
{
    size_t len = strlen(name);
    const char *taken = NULL;
    char **to = environ;
    for (char **from = environ; from != NULL && *from != NULL; from++) {
        if (strncmp(*from, name, len) != 0 || (*from)[len] != '=')
            *to++ = *from;
        else if (taken == NULL)
            taken = *from;
    }
    if (to != NULL)
        *to = NULL;
    if (taken != NULL && n_zero_code_vars < HTTP_ZERO_CODE_VARS) {
        zero_code_vars[n_zero_code_vars++] = taken;
        zero_code_owner = getpid();
    }
}

/* ---- Wrappers --------------------------------------------------------- */

/* Executables that run the program the user means rather than being it:
 * they fork it and wait (timeout, a shell running `a; b`), fork it and
 * exit (setsid -f, PostgreSQL's pg_ctl start), or exec it in place (env,
 * nice, chrt, taskset, ionice,
 * stdbuf, nohup, a shell's last command).  Served from, they showed
 * themselves, or nothing once they exited, while the program, whose
 * environment had lost CPPROF_HTTP, never served. */
static const char *const wrapper_names[] = {
    "timeout", "setsid", "env", "nice", "chrt", "taskset", "ionice",
    "stdbuf", "nohup", "sh", "dash", "bash", "zsh", "ksh", "mksh", "pg_ctl",
};

/* In a wrapper: its pid, the start of the line its first exec completes,
 * and a flag shared with its fork children (which exec the programs) so
 * that the line is said once whichever of them execs first. */
static pid_t wrapper_pid;
static char wrapper_name[64];
static const char *wrapper_addr;
static char exec_line[256];
static size_t exec_line_len;
static atomic_int *exec_announced;
static bool wrapper_forked;

/* A wrapper that forked may have started the program (setsid -f exits
 * before its child execs): its exit does not say that nothing served. */
ATFORK_CHILD static void fork_nothing(void) {}
static void fork_noted(void) { wrapper_forked = true; }
static const atfork_handlers wrapper_fork = {
    fork_nothing, fork_noted, fork_nothing,
};

/* The name of this process's executable (its base name), or of argv[0]
 * without /proc. */
static const char *executable_name(char *buf, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", buf, size - 1);
    if (n <= 0)
        return program_invocation_short_name;
    buf[n] = '\0';
    const char *slash = strrchr(buf, '/');
    return slash != NULL ? slash + 1 : buf;
}

static bool is_wrapper(const char *name)
{
    for (size_t i = 0; i < sizeof wrapper_names / sizeof *wrapper_names; i++)
        if (strcmp(name, wrapper_names[i]) == 0)
            return true;
    return false;
}

/* A wrapper leaves CPPROF_HTTP (and the token) in the environment, where
 * its children and its own exec find them, and does not serve: the port
 * is the program's.  Its first exec names the pid that serves
 * (http_zero_code_exec); without a shared page to say it once, it is said
 * here, without the pid. */
static void leave_to_program(const char *name, const char *addr)
{
    wrapper_pid = getpid();
    snprintf(wrapper_name, sizeof wrapper_name, "%.63s", name);
    atfork_add(ATFORK_WRAPPER, &wrapper_fork);
    wrapper_addr = addr;
    void *page = mmap(NULL, sizeof *exec_announced, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        warn_stderr("cpprof: %s (pid %d) is a wrapper: it does not serve "
                "CPPROF_HTTP=%s, the programs it runs do\n", name,
                (int)wrapper_pid, addr);
        return;
    }
    exec_announced = page;
    int n = snprintf(exec_line, sizeof exec_line, "cpprof: %s (pid %d) is "
            "a wrapper, so it leaves CPPROF_HTTP=%s to the programs it runs, "
            "which serve in its place: ", name, (int)wrapper_pid, addr);
    exec_line_len = n < 0 ? 0 : (size_t)n < sizeof exec_line
                                    ? (size_t)n : sizeof exec_line - 1;
}

/* Appends the decimal digits of v to buf at *len (bounded by size). */
static void append_uint(char *buf, size_t *len, size_t size, unsigned v)
{
    char digits[16];
    size_t n = 0;
    do
        digits[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    while (n > 0 && *len < size)
        buf[(*len)++] = digits[--n];
}

static void append_str(char *buf, size_t *len, size_t size, const char *s)
{
    size_t n = strlen(s);
    if (n > size - *len)
        n = size - *len;
    memcpy(buf + *len, s, n);
    *len += n;
}

void http_zero_code_exec(const char *path)
{
    if (exec_announced == NULL || path == NULL)
        return;
    /* A shell searching PATH tries execve on each directory in turn: only
     * the one that can run names the program. */
    int saved = errno;
    bool runnable = strchr(path, '/') == NULL || access(path, X_OK) == 0;
    errno = saved;
    if (!runnable || atomic_exchange(exec_announced, 1) != 0)
        return;
    char line[sizeof exec_line + 320];
    size_t len = exec_line_len;
    memcpy(line, exec_line, len);
    bool in_place = getpid() == wrapper_pid;
    append_str(line, &len, sizeof line - 96, in_place
            ? "the program it execs, pid " : "the first it starts, pid ");
    append_uint(line, &len, sizeof line - 96, (unsigned)getpid());
    append_str(line, &len, sizeof line - 96, " (");
    append_str(line, &len, sizeof line - 96, path);
    append_str(line, &len, sizeof line, in_place ? ")\n"
            : "; one at a time: another that starts while one serves "
              "cannot bind and says so)\n");
    warn_write(line, len);
}

/* A wrapper that ran no program (`bash -c 'echo'`): nothing served, and
 * that is said rather than left for the user to find out.  (dash ends
 * with _exit, which runs no destructor.) */
__attribute__((destructor)) static void wrapper_ran_nothing(void)
{
    if (exec_announced != NULL && getpid() == wrapper_pid &&
        !wrapper_forked && atomic_load(exec_announced) == 0)
        warn_stderr("cpprof: %s (pid %d) is a wrapper and ran no program, "
                "so nothing served CPPROF_HTTP=%s\n", wrapper_name,
                (int)wrapper_pid, wrapper_addr);
}

/* ---- Start ------------------------------------------------------------ */

/* Zero-code mode: `LD_PRELOAD=libcpprof.so CPPROF_HTTP=HOST:PORT program`
 * serves /debug/pprof/ from any dynamically linked program that never heard
 * of cpprof.  A constructor without a priority runs after every prioritised
 * one, so the settings (config_load) and the interposers are ready.  The
 * variables are removed first, while the process still has one thread, so
 * that programs it starts do not all fight for the same port, nor learn the
 * token (config_load has read it); an exec of this process gets them back
 * (execinterpose.c).  A wrapper keeps them and serves not. */
__attribute__((constructor)) static void http_serve_from_load(void)
{
    cfg_freeze(CFG_HTTP);
    const char *addr = cfg_str(CFG_HTTP);
    if (addr[0] == '\0')
        return;
    /* Once, at load, but maybe on a small thread that dlopens the
     * library: not on its stack. */
    static char exe[PATH_MAX];
    const char *name = executable_name(exe, sizeof exe);
    if (is_wrapper(name)) {
        leave_to_program(name, addr);
        return;
    }
    take_from_environ("CPPROF_HTTP");
    take_from_environ("CPPROF_HTTP_TOKEN");
    int rc = http_zero_listen_possible() ? http_zero_listen(addr)
                                        : http_start(addr, true);
    if (rc == CPPROF_EREFUSED) {
        char var[64];
        cfg_env_name((cfg_id)cfg_server_refused(), var, sizeof var);
        warn_stderr("cpprof: not serving CPPROF_HTTP=%s: %s was refused, "
                "and the server does not start without the value asked "
                "for\n", addr, var);
    } else if (rc < 0) {
        warn_stderr("cpprof: cannot serve CPPROF_HTTP=%s: %s (pid %d, %s)\n",
                addr, cpprof_strerror(rc), (int)getpid(), name);
    }
}
