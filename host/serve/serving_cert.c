/* serving_cert.c — see serving_cert.h. */
#include "serve/serving_cert.h"

#include <ev.h>
#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/loop.h"

#define MAX_PEM_BYTES (1024 * 1024)
#define VALID_DAYS 365

struct luna_serving_cert {
    char *cert_path, *key_path;     /* NULL: self-signed */
    char *cert_pem, *key_pem;       /* owned, NUL-terminated */
    char *bad_cert, *bad_key;       /* the last pair refused (logged once) */
    void (*changed)(void *ud, const char *cert_pem, const char *key_pem);
    void *ud;
    ev_timer poll;
};

/* The whole file (at most MAX_PEM_BYTES), NUL-terminated, or NULL. */
static char *slurp(const char *path, luna_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        luna_error_set(err, LUNA_EIO, "%s: %m", path);
        return NULL;
    }
    char *buf = malloc(MAX_PEM_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_PEM_BYTES + 1, f) : 0;
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad || n > MAX_PEM_BYTES) {
        free(buf);
        luna_error_set(err, buf ? LUNA_EIO : LUNA_ENOMEM, "%s: %s", path,
                       !buf ? "out of memory" : bad ? "read error" : "larger than 1 MiB");
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

int luna_serving_cert_check(const char *cert_pem, const char *key_pem, luna_error *err)
{
    BIO *cb = BIO_new_mem_buf(cert_pem, -1), *kb = BIO_new_mem_buf(key_pem, -1);
    X509 *leaf = cb ? PEM_read_bio_X509(cb, NULL, NULL, NULL) : NULL;
    EVP_PKEY *key = kb ? PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL) : NULL;
    int rc = 0;
    if (!leaf)
        rc = luna_error_set(err, LUNA_EINVAL, "the certificate is not PEM X.509");
    else if (!key)
        rc = luna_error_set(err, LUNA_EINVAL, "the key is not a PEM private key");
    else if (X509_check_private_key(leaf, key) != 1)
        rc = luna_error_set(err, LUNA_EINVAL, "the key does not belong to the certificate");
    X509_free(leaf);
    EVP_PKEY_free(key);
    BIO_free(cb);
    BIO_free(kb);
    return rc;
}

static char *pem_of(int (*write)(BIO *, void *), void *obj)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL;
    if (b && write(b, obj) == 1) {
        char *data;
        long n = BIO_get_mem_data(b, &data);
        if (n > 0 && (out = malloc((size_t)n + 1))) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

static int write_cert(BIO *b, void *x) { return PEM_write_bio_X509(b, x); }
static int write_key(BIO *b, void *k)
{
    return PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL);
}

static bool add_ext(X509 *x, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = ext && X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

/* An ECDSA P-256 key and a self-signed certificate for this host. */
static int self_signed(char **cert_pem, char **key_pem, luna_error *err)
{
    char host[256] = "";
    if (gethostname(host, sizeof host) != 0)
        host[0] = '\0';
    host[sizeof host - 1] = '\0';
    char san[600];
    bool name_ok = host[0] && strcmp(host, "localhost") != 0 &&
                   strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789-.") == strlen(host);
    snprintf(san, sizeof san, "DNS:localhost%s%s,IP:127.0.0.1,IP:::1", name_ok ? ",DNS:" : "",
             name_ok ? host : "");
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *name = x ? X509_get_subject_name(x) : NULL;
    unsigned char serial[16];
    BIGNUM *bn = NULL;
    ASN1_INTEGER *sn = NULL;
    int rc = 0;
    if (!key || !x || !name || RAND_bytes(serial, sizeof serial) != 1) {
        rc = luna_error_set(err, LUNA_ENOMEM, "self-signed certificate: key generation failed");
        goto out;
    }
    serial[0] &= 0x7f; /* positive */
    bn = BN_bin2bn(serial, sizeof serial, NULL);
    sn = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
    const char *cn = name_ok ? host : "luna";
    if (!sn || X509_set_version(x, 2) != 1 || X509_set_serialNumber(x, sn) != 1 ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), (long)VALID_DAYS * 86400) ||
        X509_set_pubkey(x, key) != 1 ||
        X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"luna", -1,
                                   -1, 0) != 1 ||
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1,
                                   -1, 0) != 1 ||
        X509_set_issuer_name(x, name) != 1 ||
        !add_ext(x, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_ext(x, NID_key_usage, "critical,digitalSignature") ||
        !add_ext(x, NID_ext_key_usage, "serverAuth") ||
        !add_ext(x, NID_subject_alt_name, san) || X509_sign(x, key, EVP_sha256()) <= 0 ||
        !(*cert_pem = pem_of(write_cert, x)) || !(*key_pem = pem_of(write_key, key))) {
        free(*cert_pem);
        *cert_pem = NULL;
        rc = luna_error_set(err, LUNA_ENOMEM, "self-signed certificate: cannot make it");
    }
out:
    ASN1_INTEGER_free(sn);
    BN_free(bn);
    X509_free(x);
    EVP_PKEY_free(key);
    return rc;
}

static void replace(char **slot, char *value)
{
    if (*slot) {
        memset(*slot, 0, strlen(*slot));
        free(*slot);
    }
    *slot = value;
}

/* Reads the pair; 1 when it differs from the pair in use and is valid (it
 * is then in use), 0 when unchanged or refused, negative when unreadable. */
static int reread(struct luna_serving_cert *c, luna_error *err)
{
    char *cert = slurp(c->cert_path, err);
    char *key = cert ? slurp(c->key_path, err) : NULL;
    if (!cert || !key) {
        free(cert);
        return err->code;
    }
    if (c->cert_pem && strcmp(cert, c->cert_pem) == 0 && strcmp(key, c->key_pem) == 0) {
        replace(&key, NULL);
        free(cert);
        return 0;
    }
    if (luna_serving_cert_check(cert, key, err) < 0) {
        bool logged = c->bad_cert && strcmp(cert, c->bad_cert) == 0 && strcmp(key, c->bad_key) == 0;
        if (c->cert_pem && !logged)
            luna_error("metrics certificate not reloaded", "cert", c->cert_path, "key", c->key_path,
                       "error", err->msg);
        replace(&c->bad_cert, cert);
        replace(&c->bad_key, key);
        return c->cert_pem ? 0 : LUNA_EINVAL;
    }
    replace(&c->cert_pem, cert);
    replace(&c->key_pem, key);
    return 1;
}

static void poll_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_serving_cert *c = w->data;
    luna_error err = { 0 };
    int rc = reread(c, &err);
    if (rc < 0)
        luna_warn("metrics certificate not readable", "error", err.msg);
    else if (rc == 1) {
        luna_info("metrics certificate reloaded", "cert", c->cert_path);
        if (c->changed)
            c->changed(c->ud, c->cert_pem, c->key_pem);
    }
}

static char *join(const char *dir, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        return NULL;
    return p;
}

int luna_serving_cert_new(const struct luna_serving_cert_options *o,
                          struct luna_serving_cert **out, luna_error *err)
{
    *out = NULL;
    struct luna_serving_cert *c = calloc(1, sizeof *c);
    if (!c)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    c->changed = o->changed;
    c->ud = o->ud;
    ev_timer_init(&c->poll, poll_cb, 0., 0.);
    c->poll.data = c;
    int rc;
    if (!o->dir || !*o->dir) {
        if ((rc = self_signed(&c->cert_pem, &c->key_pem, err)) < 0) {
            luna_serving_cert_free(c);
            return rc;
        }
        *out = c;
        return 0;
    }
    if (!(c->cert_path = join(o->dir, o->cert_name ? o->cert_name : "tls.crt")) ||
        !(c->key_path = join(o->dir, o->key_name ? o->key_name : "tls.key"))) {
        luna_serving_cert_free(c);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    if ((rc = reread(c, err)) < 0) {
        luna_error_wrap(err, "metrics certificate %s, key %s", c->cert_path, c->key_path);
        luna_serving_cert_free(c);
        return rc;
    }
    double every = o->poll_interval > 0 ? o->poll_interval : 10.0;
    ev_timer_set(&c->poll, every, every);
    ev_timer_start(luna_loop(), &c->poll);
    *out = c;
    return 0;
}

void luna_serving_cert_free(struct luna_serving_cert *c)
{
    if (!c)
        return;
    ev_timer_stop(luna_loop(), &c->poll);
    replace(&c->cert_pem, NULL);
    replace(&c->key_pem, NULL);
    replace(&c->bad_cert, NULL);
    replace(&c->bad_key, NULL);
    free(c->cert_path);
    free(c->key_path);
    free(c);
}

const char *luna_serving_cert_pem(const struct luna_serving_cert *c) { return c->cert_pem; }
const char *luna_serving_cert_key_pem(const struct luna_serving_cert *c) { return c->key_pem; }
bool luna_serving_cert_self_signed(const struct luna_serving_cert *c) { return !c->cert_path; }
