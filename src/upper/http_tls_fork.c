/*
 * http_tls_fork.c -- a forked child's exit() does not tear GnuTLS down.
 *
 * GnuTLS (linked through libmicrohttpd and http_tls.c) initialises
 * itself from its constructor and deinitialises from its destructor.  A
 * forked child that exits runs that destructor, which frees every global
 * structure GnuTLS built: each free writes a page the child shares with
 * its parent, so each costs a copy-on-write fault, about 35 of them per
 * child, a third of what loading cpprof added to fork+exit+wait
 * (bench/fork).  The destructor does the full teardown only when it
 * drops GnuTLS's last reference, so a reference held across fork, taken
 * in prepare and dropped in the parent, leaves the child's destructor a
 * decrement.  The child keeps a working GnuTLS (it is not torn down), and
 * the parent's state is what it was before the fork.
 *
 * Not when GNUTLS_NO_IMPLICIT_INIT=1: then GnuTLS holds no reference of
 * its own, and taking one would initialise it at every fork.
 */
#define _GNU_SOURCE
#include "atfork.h"

#include <gnutls/gnutls.h>
#include <stdlib.h>
#include <string.h>

static void tls_hold(void) { gnutls_global_init(); }
static void tls_release(void) { gnutls_global_deinit(); }
static void tls_nothing_in_child(void) {}

__attribute__((constructor)) static void tls_fork_from_load(void)
{
    const char *no_init = secure_getenv("GNUTLS_NO_IMPLICIT_INIT");
    if (no_init && strcmp(no_init, "1") == 0)
        return;
    static const atfork_handlers on_fork = {tls_hold, tls_release,
                                            tls_nothing_in_child};
    atfork_add(ATFORK_TLS, &on_fork);
}
