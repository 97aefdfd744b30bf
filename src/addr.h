/*
 * addr.h -- the HTTP server's listen address, "HOST:PORT", parsed
 * (addr.c).  A module of its own so that the setting's validator
 * (config.c) and the server (http.c) accept exactly the same addresses.
 */
#ifndef CPPROF_ADDR_H
#define CPPROF_ADDR_H

#include <stdbool.h>
#include <sys/socket.h>

/* Parses addr into *ss and *len: "A.B.C.D:PORT", "[IPV6]:PORT",
 * "localhost:PORT" and ":PORT", the last two meaning 127.0.0.1 (loopback,
 * never every interface).  Returns 0, or the code naming what is wrong:
 * CPPROF_EADDRFORM (not HOST:PORT), CPPROF_EADDRHOST, CPPROF_EADDRPORT. */
int addr_parse(const char *addr, struct sockaddr_storage *ss, socklen_t *len);

/* Whether ss is 127.0.0.0/8 or ::1: only this machine can connect. */
bool addr_is_loopback(const struct sockaddr_storage *ss);

/* A listening socket on ss (close-on-exec, non-blocking, SO_REUSEADDR,
 * IPv6 only for an IPv6 address), or a negative errno. */
int addr_listen(const struct sockaddr_storage *ss, socklen_t len);

/* The accepted forms, for messages (config.c's expected form). */
#define ADDR_FORM "HOST:PORT (HOST an IPv4 address, [IPv6], localhost or " \
                  "empty for loopback)"

#endif
