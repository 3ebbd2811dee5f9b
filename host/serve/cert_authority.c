/* cert_authority.c — see cert_authority.h. */
#include "serve/cert_authority.h"

#include <arpa/inet.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Certificates start this far in the past (clock skew), at most a tenth
 * of their life (a spec's 3-second certificate starts now). */
static long backdate(double seconds)
{
    double b = seconds / 10;
    return b > 3600 ? 3600 : (long)b;
}

static char *pem_of_cert(X509 *x)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *data;
    if (b && PEM_write_bio_X509(b, x) == 1) {
        long n = BIO_get_mem_data(b, &data);
        if (n > 0 && (out = malloc((size_t)n + 1))) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

static char *pem_of_key(EVP_PKEY *k)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *data;
    if (b && PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) == 1) {
        long n = BIO_get_mem_data(b, &data);
        if (n > 0 && (out = malloc((size_t)n + 1))) {
            memcpy(out, data, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

static X509 *read_cert(const char *pem)
{
    BIO *b = pem ? BIO_new_mem_buf(pem, -1) : NULL;
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return x;
}

static EVP_PKEY *read_key(const char *pem)
{
    BIO *b = pem ? BIO_new_mem_buf(pem, -1) : NULL;
    EVP_PKEY *k = b ? PEM_read_bio_PrivateKey(b, NULL, NULL, NULL) : NULL;
    BIO_free(b);
    return k;
}

static bool add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    bool ok = ext && X509_add_ext(x, ext, -1) == 1;
    X509_EXTENSION_free(ext);
    return ok;
}

static bool set_serial(X509 *x)
{
    unsigned char serial[16];
    if (RAND_bytes(serial, sizeof serial) != 1)
        return false;
    serial[0] &= 0x7f; /* positive */
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    ASN1_INTEGER *sn = bn ? BN_to_ASN1_INTEGER(bn, NULL) : NULL;
    bool ok = sn && X509_set_serialNumber(x, sn) == 1;
    ASN1_INTEGER_free(sn);
    BN_free(bn);
    return ok;
}

/* A commonName is at most 64 characters (RFC 5280 ub-common-name): a
 * longer first name is only in the subjectAltName. */
static bool set_name(X509_NAME *name, const char *cn)
{
    if (strlen(cn) > 64)
        cn = "luna-webhook";
    return X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"luna",
                                      -1, -1, 0) == 1 &&
           X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
                                      -1, 0) == 1;
}

static double asn1_seconds(const ASN1_TIME *t)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (double)timegm(&tm);
}

int luna_ca_make(const char *cn, double seconds, char **cert_pem, char **key_pem,
                 luna_error *err)
{
    *cert_pem = *key_pem = NULL;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *name = x ? X509_get_subject_name(x) : NULL;
    int rc = 0;
    if (!key || !x || !name || !set_serial(x) || X509_set_version(x, 2) != 1 ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -backdate(seconds)) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), (long)seconds) ||
        X509_set_pubkey(x, key) != 1 || !set_name(name, cn) ||
        X509_set_issuer_name(x, name) != 1 ||
        !add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") ||
        !add_ext(x, x, NID_subject_key_identifier, "hash") ||
        X509_sign(x, key, EVP_sha256()) <= 0 || !(*cert_pem = pem_of_cert(x)) ||
        !(*key_pem = pem_of_key(key))) {
        free(*cert_pem);
        *cert_pem = NULL;
        rc = luna_error_set(err, LUNA_ENOMEM, "webhook CA: cannot make it");
    }
    X509_free(x);
    EVP_PKEY_free(key);
    return rc;
}

static bool is_ip(const char *s)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* "DNS:a,DNS:b,IP:1.2.3.4" for names, or NULL. */
static char *san_of(const char *const *names, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += strlen(names[i]) + 5;
    char *s = malloc(len), *p = s;
    if (!s)
        return NULL;
    *p = '\0';
    for (size_t i = 0; i < n; i++)
        p += sprintf(p, "%s%s:%s", i ? "," : "", is_ip(names[i]) ? "IP" : "DNS", names[i]);
    return s;
}

int luna_ca_sign_serving(const char *ca_cert_pem, const char *ca_key_pem,
                         const char *const *names, size_t n, double seconds, char **cert_pem,
                         char **key_pem, luna_error *err)
{
    *cert_pem = *key_pem = NULL;
    if (n == 0)
        return luna_error_set(err, LUNA_EINVAL, "webhook serving certificate: no name");
    X509 *ca = read_cert(ca_cert_pem);
    EVP_PKEY *ca_key = read_key(ca_key_pem);
    if (!ca || !ca_key || X509_check_private_key(ca, ca_key) != 1) {
        X509_free(ca);
        EVP_PKEY_free(ca_key);
        return luna_error_set(err, LUNA_EINVAL, "webhook CA: the certificate or key does not "
                                                "parse, or they do not match");
    }
    double ca_end = asn1_seconds(X509_get0_notAfter(ca));
    double now = (double)time(NULL);
    if (ca_end > 0 && now + seconds > ca_end)
        seconds = ca_end - now;
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    X509_NAME *name = x ? X509_get_subject_name(x) : NULL;
    char *san = san_of(names, n);
    int rc = 0;
    if (!key || !x || !name || !san || !set_serial(x) || X509_set_version(x, 2) != 1 ||
        !X509_gmtime_adj(X509_getm_notBefore(x), -backdate(seconds)) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), (long)seconds) ||
        X509_set_pubkey(x, key) != 1 || !set_name(name, names[0]) ||
        X509_set_issuer_name(x, X509_get_subject_name(ca)) != 1 ||
        !add_ext(x, ca, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_ext(x, ca, NID_key_usage, "critical,digitalSignature") ||
        !add_ext(x, ca, NID_ext_key_usage, "serverAuth") ||
        !add_ext(x, ca, NID_authority_key_identifier, "keyid:always") ||
        !add_ext(x, ca, NID_subject_alt_name, san) ||
        X509_sign(x, ca_key, EVP_sha256()) <= 0 || !(*cert_pem = pem_of_cert(x)) ||
        !(*key_pem = pem_of_key(key))) {
        free(*cert_pem);
        *cert_pem = NULL;
        rc = luna_error_set(err, LUNA_ENOMEM, "webhook serving certificate: cannot make it");
    }
    free(san);
    X509_free(x);
    X509_free(ca);
    EVP_PKEY_free(key);
    EVP_PKEY_free(ca_key);
    return rc;
}

int luna_cert_validity(const char *pem, double *not_before, double *not_after)
{
    X509 *x = read_cert(pem);
    if (!x)
        return LUNA_EINVAL;
    *not_before = asn1_seconds(X509_get0_notBefore(x));
    *not_after = asn1_seconds(X509_get0_notAfter(x));
    X509_free(x);
    return 0;
}

bool luna_cert_names_all(const char *pem, const char *const *names, size_t n)
{
    X509 *x = read_cert(pem);
    bool ok = x != NULL;
    for (size_t i = 0; ok && i < n; i++)
        ok = is_ip(names[i]) ? X509_check_ip_asc(x, names[i], 0) == 1
                             : X509_check_host(x, names[i], 0, X509_CHECK_FLAG_NO_WILDCARDS,
                                               NULL) == 1;
    X509_free(x);
    return ok;
}

/* The certificates of pem, in order (a stack the caller frees with
 * sk_X509_pop_free(s, X509_free)), or NULL. */
static STACK_OF(X509) *read_all(const char *pem)
{
    STACK_OF(X509) *s = sk_X509_new_null();
    BIO *b = pem ? BIO_new_mem_buf(pem, -1) : NULL;
    X509 *x;
    while (s && b && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
        if (!sk_X509_push(s, x))
            X509_free(x);
    ERR_clear_error(); /* the read that ends the loop leaves "no start line" */
    BIO_free(b);
    return s;
}

size_t luna_cert_count(const char *pem)
{
    STACK_OF(X509) *s = read_all(pem);
    size_t n = s ? (size_t)sk_X509_num(s) : 0;
    sk_X509_pop_free(s, X509_free);
    return n;
}

bool luna_cert_verifies(const char *cert_pem, const char *bundle_pem)
{
    X509 *leaf = read_cert(cert_pem);
    STACK_OF(X509) *cas = read_all(bundle_pem);
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    bool ok = false;
    if (leaf && cas && store && ctx) {
        for (int i = 0; i < sk_X509_num(cas); i++)
            X509_STORE_add_cert(store, sk_X509_value(cas, i));
        if (X509_STORE_CTX_init(ctx, store, leaf, NULL) == 1) {
            X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
            ok = X509_verify_cert(ctx) == 1;
        }
    }
    ERR_clear_error();
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    sk_X509_pop_free(cas, X509_free);
    X509_free(leaf);
    return ok;
}

char *luna_ca_bundle(const char *first_pem, const char *old_bundle, double now, size_t max)
{
    X509 *first = read_cert(first_pem);
    STACK_OF(X509) *old = read_all(old_bundle);
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *data;
    bool ok = first && old && b && PEM_write_bio_X509(b, first) == 1;
    size_t count = 1;
    for (int i = 0; ok && i < sk_X509_num(old) && count < max; i++) {
        X509 *x = sk_X509_value(old, i);
        if (X509_cmp(x, first) == 0 || asn1_seconds(X509_get0_notAfter(x)) <= now)
            continue;
        ok = PEM_write_bio_X509(b, x) == 1;
        count++;
    }
    long n = ok ? BIO_get_mem_data(b, &data) : 0;
    if (n > 0 && (out = malloc((size_t)n + 1))) {
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
    }
    BIO_free(b);
    sk_X509_pop_free(old, X509_free);
    X509_free(first);
    return out;
}
