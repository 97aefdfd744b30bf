/*
 * zerolisten.h -- zero-code mode's address, held from load, and the
 * server loaded at its first client (zerolisten.c).
 */
#ifndef CPPROF_ZEROLISTEN_H
#define CPPROF_ZEROLISTEN_H

#include <stdbool.h>
#include <sys/types.h>

/* Whether zero-code mode may wait for a client before it loads the
 * server: not over HTTPS. */
bool http_zero_listen_possible(void);

/* Checks the server's settings, binds addr and waits for its first client
 * on a thread of cpprof's: 0, or the code http_start would have returned
 * (CPPROF_EREFUSED, CPPROF_EREMOTE, -EADDRINUSE...). */
int http_zero_listen(const char *addr);

#endif
