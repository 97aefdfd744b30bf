/*
 * addr.h -- the HTTP server's listen address, "HOST:PORT", parsed
 * (addr.c).  A module of its own so that the setting's validator
 * (config.c) and the server (http.c) accept exactly the same addresses.
 */
#ifndef CPPROF_ADDR_H
#define CPPROF_ADDR_H

#include <sys/socket.h>

/* Parses addr into *ss and *len: "A.B.C.D:PORT", "[IPV6]:PORT",
 * "localhost:PORT" and ":PORT", the last two meaning 127.0.0.1 (loopback,
 * never every interface).  Returns 0, or the code naming what is wrong:
 * CPPROF_EADDRFORM (not HOST:PORT), CPPROF_EADDRHOST, CPPROF_EADDRPORT. */
int addr_parse(const char *addr, struct sockaddr_storage *ss, socklen_t *len);

/* The accepted forms, for messages (config.c's expected form). */
#define ADDR_FORM "HOST:PORT (HOST an IPv4 address, [IPv6], localhost or " \
                  "empty for loopback)"

#endif
