/* kubeconfig_tls.c — see kubeconfig_tls.h. */
#include "client/kubeconfig_tls.h"

#include <errno.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

static int no_password(char *buf, int size, int rwflag, void *u)
{
    return -1;   /* never prompt: an encrypted key is an error */
}

static BIO *open_bio(const char *file, const unsigned char *data, size_t len)
{
    return file ? BIO_new_file(file, "rb") : BIO_new_mem_buf(data, (int)len);
}

const char *luna_kubeconfig_tls_check_certs(const char *file, const unsigned char *data, size_t len)
{
    BIO *bio = open_bio(file, data, len);
    if (!bio) {
        ERR_clear_error();
        return file ? strerror(errno ? errno : EIO) : "out of memory";
    }
    int count = 0;
    X509 *x;
    while ((x = PEM_read_bio_X509(bio, NULL, no_password, NULL)) != NULL) {
        X509_free(x);
        count++;
    }
    BIO_free(bio);
    ERR_clear_error();
    return count ? NULL : "no PEM certificate found";
}

const char *luna_kubeconfig_tls_check_key_pair(const char *cert_file, const unsigned char *cert, size_t cert_len,
                                  const char *key_file, const unsigned char *key, size_t key_len,
                                  const char **which)
{
    const char *why = NULL;
    X509 *x = NULL;
    EVP_PKEY *pk = NULL;
    BIO *bio = open_bio(cert_file, cert, cert_len);
    *which = "cert";
    if (!bio) {
        why = cert_file ? strerror(errno ? errno : EIO) : "out of memory";
        goto out;
    }
    x = PEM_read_bio_X509(bio, NULL, no_password, NULL);
    BIO_free(bio);
    if (!x) {
        why = "no PEM certificate found";
        goto out;
    }
    *which = "key";
    bio = open_bio(key_file, key, key_len);
    if (!bio) {
        why = key_file ? strerror(errno ? errno : EIO) : "out of memory";
        goto out;
    }
    pk = PEM_read_bio_PrivateKey(bio, NULL, no_password, NULL);
    BIO_free(bio);
    if (!pk) {
        why = "no unencrypted PEM private key found";
        goto out;
    }
    if (X509_check_private_key(x, pk) != 1)
        why = "private key does not match the certificate's public key";
out:
    X509_free(x);
    EVP_PKEY_free(pk);
    ERR_clear_error();
    return why;
}
