/*
 * http_zerocode.h -- zero-code mode's variables (http_zerocode.c), for
 * execinterpose.c, which gives them back to an exec of the process that
 * took them.  Apart from http.h: not a handler's business.
 */
#ifndef CPPROF_HTTP_ZEROCODE_H
#define CPPROF_HTTP_ZEROCODE_H

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

#endif
