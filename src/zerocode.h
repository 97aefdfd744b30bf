/*
 * zerocode.h -- zero-code mode's variables (zerocode.c), for
 * execinterpose.c, which gives them back to an exec of the process that
 * took them, and in a wrapper names the program that serves instead.  Apart from http.h: not a handler's business.
 */
#ifndef CPPROF_ZEROCODE_H
#define CPPROF_ZEROCODE_H

#include <stddef.h>
#include <sys/types.h>

/* Zero-code mode's variables as the NAME=VALUE strings the process was
 * started with (CPPROF_HTTP, and CPPROF_HTTP_TOKEN when set), which are
 * taken out of the environment at load so that the processes the program
 * starts do not inherit them, and in *owner the pid of the process that
 * took them: execinterpose.c gives them back to an exec of that process.
 * Returns how many there are in vars (0: not zero-code mode). */
enum { HTTP_ZERO_CODE_VARS = 2 };
size_t http_zero_code_env(const char *vars[HTTP_ZERO_CODE_VARS],
                          pid_t *owner);

/* Called by execinterpose.c just before an exec with the path (or, for
 * execvp, the name) it runs.  In a wrapper, which leaves zero-code mode's
 * variables to the program it runs rather than serve (zerocode.c),
 * the first exec of it or of any of its fork children says on stderr, once,
 * which pid and program serve.  Elsewhere it does nothing.
 * Async-signal-safe, as exec is: it runs in fork children. */
void http_zero_code_exec(const char *path);

#endif
