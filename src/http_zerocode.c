/*
 * http_zerocode.c -- zero-code mode: `LD_PRELOAD=libcpprof.so
 * CPPROF_HTTP=HOST:PORT program` serves /debug/pprof/ from any dynamically
 * linked program that never heard of cpprof.  Its variables are taken out
 * of the environment at load, so that the processes the program starts do
 * not inherit them, and kept for an exec of this very process
 * (execinterpose.c).
 */
#define _GNU_SOURCE /* environ */
#include "http_zerocode.h"
#include "http_server.h"

#include <string.h>
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

/* Zero-code mode: `LD_PRELOAD=libcpprof.so CPPROF_HTTP=HOST:PORT program`
 * serves /debug/pprof/ from any dynamically linked program that never heard
 * of cpprof.  A constructor without a priority runs after every prioritised
 * one, so the settings (config_load) and the interposers are ready.  The
 * variables are removed first, while the process still has one thread, so
 * that programs it starts do not all fight for the same port, nor learn the
 * token (config_load has read it); an exec of this process gets them back
 * (execinterpose.c). */
__attribute__((constructor)) static void http_serve_from_load(void)
{
    cfg_freeze(CFG_HTTP);
    const char *addr = cfg_str(CFG_HTTP);
    if (addr[0] == '\0')
        return;
    take_from_environ("CPPROF_HTTP");
    take_from_environ("CPPROF_HTTP_TOKEN");
    int rc = http_start(addr, true);
    if (rc == CPPROF_EREFUSED) {
        char var[64];
        cfg_env_name((cfg_id)http_refused_setting(), var, sizeof var);
        warn_stderr("cpprof: not serving CPPROF_HTTP=%s: %s was refused, "
                "and the server does not start without the value asked "
                "for\n", addr, var);
    } else if (rc < 0) {
        warn_stderr("cpprof: cannot serve CPPROF_HTTP=%s: %s\n", addr,
                cpprof_strerror(rc));
    }
}
