/*
 * fork_tls_exit.c -- a forked child's exit() leaves GnuTLS's global state
 * alone, while its parent's exit still tears it down.
 *
 * GnuTLS's destructor frees every structure of its global state when it
 * drops the last reference: in a forked child each free is a
 * copy-on-write fault, the largest part of what cpprof's libraries added
 * to fork+exit (bench/fork).  cpprof holds a reference across fork
 * (src/upper/http_tls_fork.c), so a child's destructor only drops it.  The
 * teardown is seen through asn1_delete_structure, which it calls for
 * GnuTLS's ASN.1 definitions: this program defines it (exported, so
 * GnuTLS's call comes here first), and counts the calls made after an
 * atexit handler, which runs before the libraries' destructors, marked
 * the process as exiting.
 *
 * A process P (the parent role, exec'd, so that it is no forked child
 * itself) that has served once (a server started and stopped: cpprof's
 * upper part, which holds the reference, is loaded only when first needed,
 * src/upper.h) forks a child C that uses GnuTLS (a certificate object made
 * and freed: GnuTLS works in a child) and exits; then P exits.  C's exit
 * must make no such call, P's must make some: the reference is the child's
 * only.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cpprof.h"

static int exiting;
static int report_fd = -1;
static char who; /* 'c' in the child, 'p' in the parent role */

int asn1_delete_structure(void **structure);
int asn1_delete_structure(void **structure)
{
    static int (*next)(void **);
    if (!next)
        next = (int (*)(void **))dlsym(RTLD_NEXT, "asn1_delete_structure");
    if (exiting && report_fd >= 0 && write(report_fd, &who, 1) != 1)
        _exit(3);
    return next(structure);
}

static void mark_exiting(void) { exiting = 1; }

static int use_tls(void)
{
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) != GNUTLS_E_SUCCESS)
        return -1;
    gnutls_x509_crt_deinit(crt);
    return 0;
}

/* The parent role: fork a child that uses GnuTLS and exits, then exit. */
static void parent_role(int fd)
{
    report_fd = fd;
    who = 'p';
    if (cpprof_http_start("127.0.0.1:0") != 0 || cpprof_http_stop() != 0)
        _exit(6);
    pid_t c = fork();
    if (c == 0) {
        who = 'c';
        if (use_tls() != 0)
            _exit(2);
        atexit(mark_exiting);
        exit(0);
    }
    int status;
    if (c < 0 || waitpid(c, &status, 0) != c || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        _exit(4);
    atexit(mark_exiting);
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--parent-role") == 0)
        parent_role(atoi(argv[2]));
    if (use_tls() != 0) {
        fprintf(stderr, "fork_tls_exit: GnuTLS does not work here\n");
        return 1;
    }
    int fd[2];
    if (pipe(fd) != 0)
        return 1;
    pid_t p = fork();
    if (p == 0) {
        close(fd[0]);
        char n[16];
        snprintf(n, sizeof n, "%d", fd[1]);
        execl("/proc/self/exe", argv[0], "--parent-role", n, (char *)NULL);
        _exit(5);
    }
    close(fd[1]);
    int in_child = 0, in_parent = 0;
    char c;
    while (read(fd[0], &c, 1) == 1) {
        if (c == 'c')
            in_child++;
        else
            in_parent++;
    }
    int status;
    if (waitpid(p, &status, 0) != p || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fork_tls_exit: the parent role failed (%#x)\n", status);
        return 1;
    }
    printf("GnuTLS teardown calls at exit: child %d, parent %d\n", in_child,
           in_parent);
    if (in_parent == 0) {
        fprintf(stderr, "fork_tls_exit: the parent's exit did not tear GnuTLS "
                        "down: the interposition saw nothing\n");
        return 1;
    }
    if (in_child != 0) {
        fprintf(stderr, "fork_tls_exit: the child's exit tore GnuTLS down\n");
        return 1;
    }
    return 0;
}
