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
 * is still a 403 before anything else is looked at (http_dispatch.c).
 *
 * A renewed certificate is served without a restart: libmicrohttpd asks
 * http_tls_certificate for the certificate at every handshake
 * (MHD_OPTION_HTTPS_CERT_CALLBACK), and at most once a second that looks
 * at the two files (device, inode, size, modification time).  When either
 * changed, both are read and checked again; a pair that checks out is
 * served from the next handshake on, and stderr says so; one that does
 * not (a half-written renewal, a key for another certificate) is not
 * used, stderr says why once per change, and the previous pair goes on
 * being served.  Replaced pairs stay allocated until the server stops,
 * because a handshake under way may still be using one; renewals are
 * rare, so that is a few kilobytes.  The CA is read once, at start.
 */
#define _GNU_SOURCE
#include "config.h"
#include "cpprof.h"
#include "http_server.h"
#include "util.h"
#include "warn.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* A PEM file is small: anything larger is not one. */
#define TLS_FILE_MAX (1 << 20)
#define CHAIN_MAX 16           /* certificates in the served chain */
#define RECHECK_NS 1000000000LL /* the files are looked at this often */

/* A certificate chain and its key as GnuTLS serves them. */
struct keypair {
    gnutls_pcert_st chain[CHAIN_MAX];
    unsigned nchain;
    gnutls_privkey_t key;
    struct keypair *older; /* replaced before this one */
};

/* What tells a changed file: a renewal replaces it (new inode) or
 * rewrites it (new size or time). */
struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

/* The pair being served, the files it came from, and when they were last
 * looked at; all under reload_lock. */
static pthread_mutex_t reload_lock = PTHREAD_MUTEX_INITIALIZER;
static struct keypair *serving;
static char *cert_path, *key_path;
static struct file_id cert_seen, key_seen;
static int64_t checked_ns;

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
    warn_stderr("cpprof: the HTTP server does not start: %s=\"%s\": "
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

static void keypair_free(struct keypair *p)
{
    while (p != NULL) {
        struct keypair *older = p->older;
        for (unsigned i = 0; i < p->nchain; i++)
            gnutls_pcert_deinit(&p->chain[i]);
        if (p->key != NULL)
            gnutls_privkey_deinit(p->key);
        free(p);
        p = older;
    }
}

/* The pair in the PEM texts (already checked to match), or NULL. */
static struct keypair *keypair_from_pem(const char *cert, const char *key)
{
    struct keypair *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    gnutls_datum_t c = {(unsigned char *)cert, (unsigned)strlen(cert)},
                   k = {(unsigned char *)key, (unsigned)strlen(key)};
    p->nchain = CHAIN_MAX;
    if (gnutls_pcert_list_import_x509_raw(p->chain, &p->nchain, &c,
                                          GNUTLS_X509_FMT_PEM, 0) < 0) {
        p->nchain = 0;
        keypair_free(p);
        return NULL;
    }
    if (gnutls_privkey_init(&p->key) < 0 ||
        gnutls_privkey_import_x509_raw(p->key, &k, GNUTLS_X509_FMT_PEM,
                                       NULL, 0) < 0) {
        keypair_free(p);
        return NULL;
    }
    return p;
}

static bool file_id_of(const char *path, struct file_id *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return false;
    *id = (struct file_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim};
    return true;
}

static bool same_file(const struct file_id *a, const struct file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec &&
           a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* Reads and checks the changed files; the new pair in *out, or the
 * reason it cannot be used in *why. */
static int load_renewal(struct keypair **out, const char **why)
{
    http_tls t = {NULL, NULL, NULL};
    cfg_id bad;
    int rc = read_text(cert_path, &t.cert, why);
    if (rc == 0)
        rc = read_text(key_path, &t.key, why);
    if (rc == 0)
        rc = check_with_gnutls(&t, why, &bad);
    if (rc == 0 && (*out = keypair_from_pem(t.cert, t.key)) == NULL) {
        *why = "GnuTLS cannot import it";
        rc = CPPROF_ETLS;
    }
    free(t.cert); /* texts only: http_tls_free would stop serving */
    free(t.key);
    return rc;
}

/* Serves the files' new pair if they changed since the last look and the
 * pair checks out (under reload_lock). */
static void reload_if_renewed(void)
{
    int64_t now = clock_mono_ns();
    if (now - checked_ns < RECHECK_NS)
        return;
    checked_ns = now;
    struct file_id cert_now, key_now;
    if (!file_id_of(cert_path, &cert_now) || !file_id_of(key_path, &key_now))
        return; /* mid-rename: looked at again in a second */
    if (same_file(&cert_now, &cert_seen) && same_file(&key_now, &key_seen))
        return;
    cert_seen = cert_now;
    key_seen = key_now;
    struct keypair *renewed = NULL;
    const char *why = NULL;
    if (load_renewal(&renewed, &why) < 0) {
        warn_stderr("cpprof: the changed TLS certificate \"%s\" and key "
                "\"%s\" are not used: %s; the HTTP server goes on serving "
                "the previous ones\n", cert_path, key_path,
                why != NULL ? why : "out of memory");
        return;
    }
    renewed->older = serving;
    serving = renewed;
    warn_stderr("cpprof: the HTTP server now serves the renewed TLS "
            "certificate \"%s\"\n", cert_path);
}

int http_tls_certificate(gnutls_session_t session,
                         const gnutls_datum_t *req_ca_dn, int nreqs,
                         const gnutls_pk_algorithm_t *pk_algos,
                         int pk_algos_length, gnutls_pcert_st **chain,
                         unsigned *nchain, gnutls_privkey_t *key)
{
    (void)session;
    (void)req_ca_dn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    pthread_mutex_lock(&reload_lock);
    reload_if_renewed();
    int rc = serving != NULL ? 0 : -1;
    if (serving != NULL) {
        *chain = serving->chain;
        *nchain = serving->nchain;
        *key = serving->key;
    }
    pthread_mutex_unlock(&reload_lock);
    return rc;
}

/* Takes the checked texts' pair as the one served, and the files' paths
 * and identities for the renewal checks. */
static int start_serving(const http_tls *t)
{
    struct keypair *p = keypair_from_pem(t->cert, t->key);
    char *cp = strdup(cfg_str(CFG_HTTP_TLS_CERT)),
         *kp = strdup(cfg_str(CFG_HTTP_TLS_KEY));
    if (p == NULL || cp == NULL || kp == NULL) {
        keypair_free(p);
        free(cp);
        free(kp);
        return -ENOMEM;
    }
    pthread_mutex_lock(&reload_lock);
    serving = p;
    cert_path = cp;
    key_path = kp;
    file_id_of(cert_path, &cert_seen);
    file_id_of(key_path, &key_seen);
    checked_ns = clock_mono_ns();
    pthread_mutex_unlock(&reload_lock);
    return 0;
}

static void stop_serving(void)
{
    pthread_mutex_lock(&reload_lock);
    keypair_free(serving);
    serving = NULL;
    free(cert_path);
    free(key_path);
    cert_path = key_path = NULL;
    pthread_mutex_unlock(&reload_lock);
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
    if (rc < 0)
        say(bad, cfg_str(bad), why);
    else
        rc = start_serving(t);
    if (rc < 0)
        http_tls_free(t);
    return rc;
}

void http_tls_free(http_tls *t)
{
    if (t->cert != NULL)
        stop_serving();
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
