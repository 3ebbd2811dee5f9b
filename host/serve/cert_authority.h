/*
 * cert_authority.h — the certificates of luna's managed webhook mode
 * (webhook_manager.h): a CA of its own and the serving certificates it
 * signs, as cert-controller and kopf make them, and the questions the
 * manager asks of the ones it reads back from the Secret.
 *
 *   - a CA: ECDSA P-256, self-signed, CA:TRUE (pathlen 0), keyCertSign;
 *   - a serving certificate: ECDSA P-256, CA:FALSE, serverAuth, the names
 *     given as subjectAltName (an IPv4/IPv6 literal as an IP entry, the
 *     rest as DNS), signed by the CA, never valid past the CA's notAfter;
 *   - a bundle: PEM certificates one after the other (a caBundle).
 *
 * Every certificate starts up to an hour in the past (a tenth of its
 * life at most): clock skew between the replica that made it and the API
 * server that checks it.
 *
 * Pure functions over PEM text; OpenSSL.  Ownership: returned PEM strings
 * are malloc'd, NUL-terminated, the caller's (free()).
 */
#ifndef LUNA_CERT_AUTHORITY_H
#define LUNA_CERT_AUTHORITY_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

/* A new CA named cn, valid `seconds` from now. */
int luna_ca_make(const char *cn, double seconds, char **cert_pem, char **key_pem,
                 luna_error *err);

/* A serving certificate for names[0..n) signed by the CA (its first
 * certificate and key), valid `seconds` from now or until the CA's end if
 * that comes first.  LUNA_EINVAL when the CA does not parse. */
int luna_ca_sign_serving(const char *ca_cert_pem, const char *ca_key_pem,
                         const char *const *names, size_t n, double seconds, char **cert_pem,
                         char **key_pem, luna_error *err);

/* The first certificate's notBefore and notAfter (Unix seconds): 0, or
 * LUNA_EINVAL when pem holds no certificate. */
int luna_cert_validity(const char *pem, double *not_before, double *not_after);

/* Whether the first certificate of pem names each of names[0..n) in its
 * subjectAltName (X509_check_host / X509_check_ip_asc). */
bool luna_cert_names_all(const char *pem, const char *const *names, size_t n);

/* Whether the first certificate of cert_pem chains to a certificate of
 * bundle_pem and is valid now (OpenSSL's verification, purpose sslserver). */
bool luna_cert_verifies(const char *cert_pem, const char *bundle_pem);

/* A bundle of first_pem's first certificate followed by the certificates
 * of old_bundle (may be NULL) still valid at `now` and not equal to it,
 * at most `max` certificates in all; NULL when out of memory or first_pem
 * holds no certificate. */
char *luna_ca_bundle(const char *first_pem, const char *old_bundle, double now, size_t max);

/* How many certificates pem holds. */
size_t luna_cert_count(const char *pem);

#endif
