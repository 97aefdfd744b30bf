/*
 * http_tls.c -- HTTPS for the server: the settings http_tls_cert,
 * http_tls_key and http_tls_ca read and checked when the server starts,
 * and mutual TLS's check of a client's certificate.
 *
 * libmicrohttpd does TLS with GnuTLS but says only "could not start" when
 * a file is wrong.  So every file is read and checked here first, with
 * GnuTLS itself, and a problem is named on stderr with the file and the
 * reason (missing, unreadable, no certificate in it, key not matching the
 * certificate) while the start call returns CPPROF_ETLS: the program runs
 * on.  The texts then go to libmicrohttpd, which keeps pointers to them
 * for the server's life.
 *
 * With a CA, libmicrohttpd asks every client for a certificate but lets
 * the handshake finish without one.  Its connection-start notification
 * comes after it has set up the connection's GnuTLS session and before the
 * first byte is read, so http_tls_require_client_cert turns the request
 * into a requirement there: a client without a certificate fails the
 * handshake.  GnuTLS does not check the certificate against the CA then,
 * so a request whose connection has no certificate that the CA verifies
 * is still a 403 before anything else is looked at (http.c).  A renewed certificate
 * is taken by stopping and starting the server (cpprof_http_stop, then
 * cpprof_http_start): not on the fly.
 */
#define _GNU_SOURCE
#include "config.h"
#include "cpprof.h"
#include "http.h"

#include <microhttpd.h>

#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A PEM file is small: anything larger is not one. */
#define TLS_FILE_MAX (1 << 20)

/* The text of `path` (NUL-terminated, malloc'd) in *out, or a message in
 * why. */
static int read_text(const char *path, char **out, const char **why)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        *why = strerror(errno);
        return CPPROF_ETLS;
    }
    char *text = malloc(TLS_FILE_MAX + 1);
    size_t n = text != NULL ? fread(text, 1, TLS_FILE_MAX + 1, f) : 0;
    bool failed = text == NULL || ferror(f);
    fclose(f);
    if (failed || n > TLS_FILE_MAX || n == 0) {
        free(text);
        *why = text == NULL ? "out of memory"
               : n == 0     ? "the file is empty"
                            : "the file cannot be read whole";
        return text == NULL ? -ENOMEM : CPPROF_ETLS;
    }
    text[n] = '\0';
    *out = text;
    return 0;
}

/* Names the setting, its file and what is wrong with it on stderr. */
static void say(cfg_id id, const char *path, const char *why)
{
    char var[64];
    cfg_env_name(id, var, sizeof var);
    fprintf(stderr, "cpprof: the HTTP server does not start: %s=\"%s\": "
            "%s\n", var, path, why);
}

/* Checks the certificate, key and CA texts with GnuTLS; the reason in
 * *why and the setting at fault in *bad when they cannot be used. */
static int check_with_gnutls(const http_tls *t, const char **why,
                             cfg_id *bad)
{
    gnutls_certificate_credentials_t cred;
    if (gnutls_certificate_allocate_credentials(&cred) != GNUTLS_E_SUCCESS) {
        *why = "out of memory";
        return -ENOMEM;
    }
    gnutls_datum_t cert = {(unsigned char *)t->cert, (unsigned)strlen(t->cert)},
                   key = {(unsigned char *)t->key, (unsigned)strlen(t->key)};
    int rc = gnutls_certificate_set_x509_key_mem(cred, &cert, &key,
                                                 GNUTLS_X509_FMT_PEM);
    if (rc < 0) {
        *why = gnutls_strerror(rc);
        *bad = rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH ? CFG_HTTP_TLS_KEY
                                                       : CFG_HTTP_TLS_CERT;
    } else if (t->ca != NULL) {
        gnutls_datum_t ca = {(unsigned char *)t->ca, (unsigned)strlen(t->ca)};
        int n = gnutls_certificate_set_x509_trust_mem(cred, &ca,
                                                      GNUTLS_X509_FMT_PEM);
        if (n <= 0) {
            *why = n < 0 ? gnutls_strerror(n) : "no certificate in it";
            *bad = CFG_HTTP_TLS_CA;
            rc = -1;
        }
    }
    gnutls_certificate_free_credentials(cred);
    return rc < 0 ? CPPROF_ETLS : 0;
}

int http_tls_load(http_tls *t)
{
    static const cfg_id files[] = {CFG_HTTP_TLS_CERT, CFG_HTTP_TLS_KEY,
                                   CFG_HTTP_TLS_CA};
    char **texts[] = {&t->cert, &t->key, &t->ca};
    const char *why = NULL;
    memset(t, 0, sizeof *t);
    bool want_cert = cfg_str(CFG_HTTP_TLS_CERT)[0] != '\0',
         want_key = cfg_str(CFG_HTTP_TLS_KEY)[0] != '\0',
         want_ca = cfg_str(CFG_HTTP_TLS_CA)[0] != '\0';
    if (!want_cert && !want_key && !want_ca)
        return 0;
    if (!want_cert || !want_key) {
        say(want_cert ? CFG_HTTP_TLS_KEY : CFG_HTTP_TLS_CERT, "",
            "TLS needs both a certificate and its key");
        return CPPROF_ETLS;
    }
    for (size_t i = 0; i < 3; i++) {
        const char *path = cfg_str(files[i]);
        if (path[0] == '\0')
            continue;
        int rc = read_text(path, texts[i], &why);
        if (rc < 0) {
            say(files[i], path, why);
            http_tls_free(t);
            return rc;
        }
    }
    cfg_id bad = CFG_HTTP_TLS_CERT;
    int rc = check_with_gnutls(t, &why, &bad);
    if (rc < 0) {
        say(bad, cfg_str(bad), why);
        http_tls_free(t);
    }
    return rc;
}

void http_tls_free(http_tls *t)
{
    free(t->cert);
    free(t->key);
    free(t->ca);
    memset(t, 0, sizeof *t);
}

void http_tls_require_client_cert(void *cls, struct MHD_Connection *conn,
                                  void **socket_context,
                                  enum MHD_ConnectionNotificationCode toe)
{
    (void)cls;
    (void)socket_context;
    if (toe != MHD_CONNECTION_NOTIFY_STARTED)
        return;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(
        conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (info != NULL && info->tls_session != NULL)
        gnutls_certificate_server_set_request(info->tls_session,
                                              GNUTLS_CERT_REQUIRE);
}

bool http_tls_client_verified(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(
        conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (info == NULL || info->tls_session == NULL)
        return false;
    gnutls_session_t session = info->tls_session;
    unsigned status, n = 0;
    return gnutls_certificate_get_peers(session, &n) != NULL && n > 0 &&
           gnutls_certificate_verify_peers2(session, &status) ==
               GNUTLS_E_SUCCESS &&
           status == 0;
}
