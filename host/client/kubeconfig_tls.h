/*
 * kubeconfig_tls.h — the certificate checks client-go's TLS setup makes at
 * start-up, so that a bad CA, client certificate or key fails the load with
 * a message naming the field instead of failing every request later.
 *
 * A source is a file path or PEM bytes (exactly one is non-NULL).  The
 * checks return NULL when the source is good, else a static or strerror()
 * string saying why not (never the key material).  Encrypted keys are
 * refused (nothing prompts for a password).  Uses libcrypto; clears its
 * error queue.  Runs on any thread.
 */
#ifndef LUNA_KUBECONFIG_TLS_H
#define LUNA_KUBECONFIG_TLS_H

#include <stddef.h>

/* NULL if the source holds at least one PEM certificate, else why not. */
const char *luna_kubeconfig_tls_check_certs(const char *file, const unsigned char *data,
                                            size_t len);

/* NULL if the certificate and the key are PEM and belong together, else
 * why not; *which says which of the two is at fault ("cert" or "key"). */
const char *luna_kubeconfig_tls_check_key_pair(const char *cert_file, const unsigned char *cert,
                                               size_t cert_len, const char *key_file,
                                               const unsigned char *key, size_t key_len,
                                               const char **which);

#endif
