/*
 * webhook_server.h — luna's admission webhook server: AdmissionReview v1
 * over HTTPS, answered by webhooks written in Lua (docs/webhooks.md).
 *
 *   POST /validate/NAME, /mutate/NAME   an AdmissionReview v1; the answer
 *                                       is an AdmissionReview v1 with the
 *                                       request's uid
 *
 * A body that is not JSON, not apiVersion admission.k8s.io/v1 and kind
 * AdmissionReview, or has no request.uid gets 400 with the reason; a path
 * no webhook serves 404; a body past LUNA_WEBHOOK_MAX_BODY 413 (httpd.h
 * has the read deadlines and connection limits).  A webhook call gets a
 * time budget of its timeoutSeconds minus a margin (a quarter of it, at
 * most a second), so the API server hears an answer before it gives up.  A
 * call that errors or is stopped answers by failurePolicy: Fail denies
 * (code 500, the reason in the message), Ignore allows with a warning
 * naming the failure.  A mutating answer carries the JSON patch base64
 * encoded with patchType JSONPatch.  Shadow (luna run --shadow) allows
 * every request, without patch, and logs what the webhook would have
 * denied ("webhook shadow", would=deny) or patched (would=patch, ops=N).
 *
 * Metrics, controller-runtime's (pkg/webhook/internal/metrics), labelled
 * by the webhook's path:
 *   controller_runtime_webhook_requests_total{webhook,code}   HTTP status
 *   controller_runtime_webhook_latency_seconds{webhook}       histogram
 *   controller_runtime_webhook_requests_in_flight{webhook}
 * Each answer is logged with the request's uid ("webhook request": debug
 * when allowed, info when denied, error when the webhook failed).
 *
 * Uses httpd (TLS, bounds), json (the envelope), json_writer, OpenSSL
 * (base64), metrics, log.  Runs on the loop thread: a call runs to its end
 * in one go, so reconciles (which run between loop events) wait for it,
 * never the reverse.
 *
 * Ownership: the server copies the address and the certificate; the
 * registry and the callbacks' ud are borrowed until free.
 */
#ifndef LUNA_WEBHOOK_SERVER_H
#define LUNA_WEBHOOK_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "serve/metrics.h"

/* Kube-apiserver's objects are at most ~3 MiB; a review holds object and
 * oldObject. */
#define LUNA_WEBHOOK_MAX_BODY ((size_t)7 << 20)
#define LUNA_WEBHOOK_API_VERSION "admission.k8s.io/v1"

struct luna_webhook_info {
    const char *name, *type, *path;   /* type: "validating" or "mutating" */
    const char *failure_policy;       /* "Fail" or "Ignore" */
    double timeout_seconds;           /* 1..30 */
};

/* MALFORMED: the body is not JSON past the envelope the server checked
 * (the call decodes it whole; the server answers 400, as for a body whose
 * envelope is not JSON). */
enum luna_webhook_result { LUNA_WEBHOOK_OK, LUNA_WEBHOOK_ERROR, LUNA_WEBHOOK_STOPPED,
                           LUNA_WEBHOOK_MALFORMED };

struct luna_webhook_answer {
    bool allowed;
    int code;                /* status.code; 0: none */
    char *message, *reason;  /* NULL: none */
    char **warnings;
    size_t nwarnings;
    char *patch;             /* JSON text of the RFC 6902 operations, or NULL */
    size_t ops;              /* how many operations */
};

/* How the server reaches the webhooks of the running code (runtime.c). */
struct luna_webhook_calls {
    /* The handle (> 0) of the webhook serving path and its info (borrowed
     * until call returns), or 0. */
    int (*find)(void *ud, const char *path, struct luna_webhook_info *info);
    /* Runs webhook h on body within `seconds`; fills answer (OK; the
     * server frees it with luna_webhook_answer_free) or why (the decoder's
     * message for MALFORMED). */
    enum luna_webhook_result (*call)(void *ud, int h, const char *body, size_t len,
                                     double seconds, struct luna_webhook_answer *answer,
                                     char *why, size_t why_size);
    void *ud;
};

struct luna_webhook_server_options {
    const char *address;             /* "HOST:PORT" (httpd.h) */
    const char *cert_pem, *key_pem;  /* TLS, required */
    struct luna_metrics *metrics;    /* NULL: no metrics */
    struct luna_webhook_calls calls;
    bool shadow;
    double read_header_timeout, read_timeout; /* 0: httpd's defaults */
};

struct luna_webhook_server;

int luna_webhook_server_start(const struct luna_webhook_server_options *o,
                              struct luna_webhook_server **out, luna_error *err);
void luna_webhook_server_free(struct luna_webhook_server *s); /* NULL: no-op */
/* The address bound ("127.0.0.1:9443"), borrowed until free. */
const char *luna_webhook_server_address(const struct luna_webhook_server *s);
/* Serves a new certificate (httpd.h luna_httpd_set_certificate). */
int luna_webhook_server_set_certificate(struct luna_webhook_server *s, const char *cert_pem,
                                        const char *key_pem, luna_error *err);

/* Registers the three families in reg, as the server does, with the
 * series of one request answered 200 on path (specs: the names table). */
int luna_webhook_server_register_metrics(struct luna_metrics *reg, const char *path,
                                         luna_error *err);

/* The budget of a call of a webhook with that timeoutSeconds. */
double luna_webhook_budget(double timeout_seconds);
void luna_webhook_answer_free(struct luna_webhook_answer *a);

#endif
