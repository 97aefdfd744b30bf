/*
 * server_entry.h -- the server's entry points that libcpprof.so's own units
 * call (zero-code mode's start, its lazy listener, the forwarders of
 * upper_api.c), declared without libmicrohttpd's or GnuTLS's types: no
 * unit of libcpprof.so sees those headers (test/layering.sh checks it).
 * Where the library is split they are reached through the upper object's
 * table (upper.h); elsewhere they are the server's own functions.
 */
#ifndef CPPROF_SERVER_ENTRY_H
#define CPPROF_SERVER_ENTRY_H

#include <stdbool.h>
#include <sys/types.h>

/* Starts the server on `addr` (NULL: the http_addr setting) unless one
 * runs (http.c); `one_thread` when the process has no other thread
 * (zero-code mode at load), so that even libmicrohttpd's descriptors can
 * be placed high.  0 or a negative code. */
int http_start(const char *addr, bool one_thread);

/* The same on the listener fd zero-code mode bound at load, which it owns
 * from the call on (closed when the start fails). */
int http_start_listening(const char *addr, int fd);

/* The first server setting whose value was refused, or -1. */
int http_refused_setting(void);

/* A worker forked while its parent's server had not loaded yet (zero-code
 * mode's listener held the address: zerolisten.c), woken: what
 * forkwake asked, with the parent and its address (http_forks.c). */
void http_forks_woken(pid_t parent, const char *addr, int what);

#endif
