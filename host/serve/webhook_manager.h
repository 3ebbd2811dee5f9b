/*
 * webhook_manager.h — luna's managed webhook certificate mode
 * (`luna run --webhook-cert-mode managed`, docs/webhooks.md
 * "Certificates"): luna makes its own CA and serving certificate, keeps
 * them in one Secret its replicas share, and keeps its
 * Validating/MutatingWebhookConfiguration and the conversion caBundle of
 * named CRDs current, as kopf and cert-controller do.
 *
 * The Secret (type kubernetes.io/tls, in the Service's namespace):
 *   tls.crt, tls.key   the serving certificate (cert_authority.h) and key
 *   ca.crt             the caBundle: the current CA first, then earlier CAs
 *                      until they expire (the rotation overlap)
 *   ca.key             the current CA's key
 *
 * A sync, at start, on luna_webhook_manager_sync (a reload) and then on a
 * timer, runs these steps one request at a time:
 *   1. GET the Secret.  404: make a CA and a serving certificate, POST it;
 *      409 AlreadyExists (another replica was first): GET again and use
 *      the winner's.  200: keep what is good; make a new CA when there is
 *      no usable one or 2/3 of its life has passed (the old one stays in
 *      ca.crt), a new serving certificate when it is missing, names other
 *      names, does not chain to ca.crt, or 2/3 of its life has passed;
 *      PUT with the resourceVersion read, 409 Conflict: start over.  So
 *      every replica ends on the one CA the Secret holds.
 *   2. For each kind of configuration: `entries` gives the webhooks (with
 *      caBundle = ca.crt); GET the configuration named configuration_name;
 *      write it (POST, or PUT with its resourceVersion) unless its
 *      annotation luna.dev/webhooks-sha256 already names the same entries.
 *      A kind with no webhook and no configuration is left alone; one with
 *      a configuration gets an empty list (so no stale entry keeps calling
 *      a path nothing serves).
 *   3. For each CRD named: GET it.  When `conversion` gives its stanza (a
 *      loaded converter serves it): JSON merge-PATCH spec.conversion with
 *      it unless the annotation luna.dev/conversion-sha256 already names
 *      it.  Otherwise, when spec.conversion.strategy is Webhook and its
 *      clientConfig.caBundle differs, merge-PATCH the caBundle.  A CRD
 *      that does not exist, or (only named) does not convert by webhook,
 *      is logged and skipped.
 *   4. Serve the pair (`serve`) when it differs from the one served, and
 *      report ready.  The bundle is written before a new pair is served,
 *      so the API server trusts a new CA before any replica serves a
 *      certificate it signed.
 * The next sync runs at the next renewal point or after `resync`,
 * whichever comes first (at least 1 s).  A step that fails (Forbidden,
 * an unreachable server, repeated conflicts) logs "managed webhook
 * certificate failed" with the request and the server's message (once
 * per distinct message, then at debug), reports not ready with that
 * reason until a sync succeeds, and retries with backoff (1 s doubling
 * to resync).  Once a managed pair is served it stays served when a later
 * sync fails, and readiness stays as the last success left it.
 *
 * Uses: kube_client, json (lookups), json_writer, cert_authority,
 * serving_cert (the key check), OpenSSL (base64, SHA-256), libev.  Runs
 * on the loop thread.
 *
 * Ownership: options' strings and names are copied; kc and the
 * callbacks' ud are borrowed until free.  `entries` returns a malloc'd
 * string the manager frees.
 */
#ifndef LUNA_WEBHOOK_MANAGER_H
#define LUNA_WEBHOOK_MANAGER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "client/kube_client.h"

#define LUNA_WEBHOOK_HASH_ANNOTATION "luna.dev/webhooks-sha256"
#define LUNA_CONVERSION_HASH_ANNOTATION "luna.dev/conversion-sha256"

struct luna_webhook_manager_options {
    struct luna_kube_client *kc;
    const char *namespace_;          /* the Secret's */
    const char *secret_name;
    const char *configuration_name;  /* both configurations' metadata.name */
    const char *const *names;        /* the serving certificate's names */
    size_t nnames;
    double cert_validity, ca_validity; /* seconds */
    double resync;                   /* seconds; 0: 60 */
    /* The JSON array of type's ("validating", "mutating") webhook entries
     * with caBundle ca_bundle_b64 (malloc'd), "[]"-free: NULL when there
     * is none of that type, or out of memory (*failed set). */
    char *(*entries)(void *ud, const char *type, const char *ca_bundle_b64, bool *failed);
    /* The JSON of CRD crd's spec.conversion when a loaded converter serves
     * it, with caBundle ca_bundle_b64 (malloc'd); NULL when none does (the
     * CRD's own stanza then only gets the caBundle), or out of memory
     * (*failed set).  NULL callback: none does. */
    char *(*conversion)(void *ud, const char *crd, const char *ca_bundle_b64, bool *failed);
    /* A new pair to serve (borrowed for the call); 0, or the serving
     * failed (the sync is then a failure). */
    int (*serve)(void *ud, const char *cert_pem, const char *key_pem, luna_error *err);
    /* Readiness: ok, or not with why (borrowed for the call). */
    void (*ready)(void *ud, bool ok, const char *why);
    void *ud;
};

struct luna_webhook_manager;

/* Starts the first sync.  0, or LUNA_EINVAL/LUNA_ENOMEM. */
int luna_webhook_manager_start(const struct luna_webhook_manager_options *o,
                               struct luna_webhook_manager **out, luna_error *err);
void luna_webhook_manager_free(struct luna_webhook_manager *m); /* NULL: no-op */

/* Syncs again now (after the one in progress, if any): the webhooks
 * changed (a reload). */
void luna_webhook_manager_sync(struct luna_webhook_manager *m);

/* The CRDs whose conversion webhook is luna's: --webhook-conversion-crds
 * and the loaded converters' (names copied), replacing
 * the earlier list; starts a sync when it changed.  0 or LUNA_ENOMEM. */
int luna_webhook_manager_set_crds(struct luna_webhook_manager *m, const char *const *names,
                                  size_t n);

#endif
