/*
 * http_zerolisten.h -- zero-code mode's address, held from load, and the
 * server loaded at its first client (http_zerolisten.c).
 */
#ifndef CPPROF_HTTP_ZEROLISTEN_H
#define CPPROF_HTTP_ZEROLISTEN_H

#include <stdbool.h>
#include <sys/types.h>

/* Whether zero-code mode may wait for a client before it loads the
 * server: not over HTTPS. */
bool http_zero_listen_possible(void);

/* Checks the server's settings, binds addr and waits for its first client
 * on a thread of cpprof's: 0, or the code http_start would have returned
 * (CPPROF_EREFUSED, CPPROF_EREMOTE, -EADDRINUSE...). */
int http_zero_listen(const char *addr);

/* The server's, called once a client came (http.c: on the listener fd,
 * which it then owns; http_forks.c: a worker forked meanwhile, woken),
 * through libcpprof-upper.so's table where the library is split. */
int http_start_listening(const char *addr, int fd);
void http_forks_woken(pid_t parent, const char *addr, int what);

#endif
