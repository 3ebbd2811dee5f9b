/*
 * serving_cert.h — the certificate luna's metrics server serves TLS with,
 * as controller-runtime's secure metrics server gets it:
 *
 *   - from a directory (--metrics-cert-path): DIR/tls.crt (the certificate,
 *     then its chain) and DIR/tls.key, as a kubernetes.io/tls Secret volume
 *     or cert-manager provides them.  Both are read at start (a missing,
 *     unreadable or mismatched pair is an error then) and read again every
 *     poll interval (10 s, as controller-runtime's certwatcher polls); a
 *     new valid pair is handed to `changed`, an invalid one is logged once
 *     and the pair in use stays;
 *   - else a self-signed certificate made at start (ECDSA P-256, valid one
 *     year, for localhost, the host name, 127.0.0.1 and ::1), as
 *     controller-runtime makes one when no certificate is given: scrapers
 *     then skip verification (Prometheus: tls_config.insecure_skip_verify).
 *
 * Uses OpenSSL, libev (luna_loop()), log.  Runs on the loop thread.
 *
 * Ownership: luna_serving_cert_new copies the options' strings; the PEM
 * strings returned are owned by the serving cert and valid until the next
 * change (a `changed` callback gets the new ones, borrowed for the call)
 * or luna_serving_cert_free.
 */
#ifndef LUNA_SERVING_CERT_H
#define LUNA_SERVING_CERT_H

#include <stdbool.h>

#include "base/error.h"

struct luna_serving_cert;

struct luna_serving_cert_options {
    const char *dir;        /* NULL or "": self-signed */
    const char *cert_name;  /* NULL: "tls.crt" */
    const char *key_name;   /* NULL: "tls.key" */
    double poll_interval;   /* seconds; 0: 10 */
    /* A new valid pair was read (never for a self-signed certificate). */
    void (*changed)(void *ud, const char *cert_pem, const char *key_pem);
    void *ud;
};

int luna_serving_cert_new(const struct luna_serving_cert_options *o,
                          struct luna_serving_cert **out, luna_error *err);
void luna_serving_cert_free(struct luna_serving_cert *c); /* NULL: no-op */

const char *luna_serving_cert_pem(const struct luna_serving_cert *c);
const char *luna_serving_cert_key_pem(const struct luna_serving_cert *c);
bool luna_serving_cert_self_signed(const struct luna_serving_cert *c);

/* Checks a PEM certificate (chain) and private key: both parse and the key
 * is the certificate's.  0 or LUNA_EINVAL with the reason. */
int luna_serving_cert_check(const char *cert_pem, const char *key_pem, luna_error *err);

#endif
