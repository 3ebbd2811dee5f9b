/*
 * webhook_server.h — luna's admission webhook server: AdmissionReview v1
 * over HTTPS, answered by webhooks written in Lua (docs/webhooks.md).
 *
 *   POST /validate/NAME, /mutate/NAME   an AdmissionReview v1; the answer
 *                                       is an AdmissionReview v1 with the
 *                                       request's uid
 *   POST /convert/CRD                   a ConversionReview v1
 *                                       (apiextensions.k8s.io/v1); the
 *                                       answer has the request's uid and
 *                                       convertedObjects with result
 *                                       Success, or result Failure with
 *                                       the converter's name and reason
 *
 * A body that is not JSON, not apiVersion admission.k8s.io/v1 and kind
 * AdmissionReview, has no request.uid or a request field of the wrong type
 * (luna_webhook_review_check) gets 400 with the reason; a path
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
 * A ConversionReview is checked as an AdmissionReview is (400 for a body
 * that is not JSON, another apiVersion or kind, no request.uid, no
 * request.desiredAPIVersion, request.objects not a list); a converter
 * that errors or is stopped answers result Failure, and shadow serves
 * conversions as they are (conversion is not an admission decision).
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
#define LUNA_CONVERSION_API_VERSION "apiextensions.k8s.io/v1"

struct luna_webhook_info {
    const char *name, *type, *path;   /* type: "validating", "mutating" or
                                       * "conversion" (a converter: name is
                                       * the CRD's) */
    const char *failure_policy;       /* "Fail" or "Ignore" (a converter: "Fail") */
    double timeout_seconds;           /* 1..30 */
};

enum luna_webhook_result { LUNA_WEBHOOK_OK, LUNA_WEBHOOK_ERROR, LUNA_WEBHOOK_STOPPED };

struct luna_webhook_answer {
    bool allowed;
    int code;                /* status.code; 0: none */
    char *message, *reason;  /* NULL: none */
    char **warnings;
    size_t nwarnings;
    char *patch;             /* JSON text of the RFC 6902 operations, or NULL */
    size_t ops;              /* how many operations (a conversion: objects) */
    char *converted;         /* a conversion: JSON text of convertedObjects */
};

/* How the server reaches the webhooks of the running code (runtime.c). */
struct luna_webhook_calls {
    /* The handle (> 0) of the webhook serving path and its info (borrowed
     * until call returns), or 0. */
    int (*find)(void *ud, const char *path, struct luna_webhook_info *info);
    /* Runs webhook h on body within `seconds`; fills answer (OK; the
     * server frees it with luna_webhook_answer_free) or why. */
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

/* Answers one POST of body to path as the server would (the same checks,
 * call, failure policy, shadow, log and metrics) without a connection:
 * `luna test`'s direct calls (runtime/test_control.h, `admit`).  Returns
 * the HTTP status; the body is appended to out, its type in *ctype. */
struct luna_textbuf;
int luna_webhook_server_handle(struct luna_webhook_server *s, const char *path, const char *body,
                               size_t len, struct luna_textbuf *out, const char **ctype);

/* Registers the three families in reg, as the server does, with the
 * series of one request answered 200 on path (specs: the names table). */
int luna_webhook_server_register_metrics(struct luna_metrics *reg, const char *path,
                                         luna_error *err);

/* Checks the AdmissionReview envelope before any webhook code sees it:
 * valid JSON (nesting at most LUNA_JSON_DEFAULT_MAX_DEPTH deep), a JSON
 * object of apiVersion admission.k8s.io/v1 and kind AdmissionReview, a
 * request object with a non-empty string uid (shorter than uid_size), and
 * the request's fields a webhook reads of the types kube-apiserver sends
 * (object and oldObject objects or null, userInfo, kind and resource
 * objects, operation, name and namespace strings, dryRun a boolean or
 * null); each may be missing, none repeated (the server reads a key's
 * first value, a webhook's decoder its last).  Returns 0 with the uid in uid, or 400 with
 * the reason in why (one line naming the field and what it was). */
int luna_webhook_review_check(const char *body, size_t len, char *uid, size_t uid_size,
                              char *why, size_t why_size);

/* The same check of a ConversionReview's envelope
 * (apiextensions.k8s.io/v1): request.uid, request.desiredAPIVersion (a
 * string) and request.objects (a list) required, none repeated. */
int luna_webhook_conversion_review_check(const char *body, size_t len, char *uid,
                                         size_t uid_size, char *why, size_t why_size);

/* The budget of a call of a webhook with that timeoutSeconds. */
double luna_webhook_budget(double timeout_seconds);
void luna_webhook_answer_free(struct luna_webhook_answer *a);

#endif
