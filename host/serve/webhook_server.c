/* webhook_server.c — see webhook_server.h. */
#include "serve/webhook_server.h"

#include <ev.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/json.h"
#include "base/json_writer.h"
#include "base/log.h"
#include "base/textbuf.h"
#include "serve/httpd.h"

#define JSON_TYPE "application/json"

struct luna_webhook_server {
    struct luna_httpd *httpd;
    struct luna_webhook_calls calls;
    bool shadow;
    struct luna_metric_family *requests, *latency, *in_flight; /* NULL: no metrics */
};

void luna_webhook_answer_free(struct luna_webhook_answer *a)
{
    free(a->message);
    free(a->reason);
    for (size_t i = 0; i < a->nwarnings; i++)
        free(a->warnings[i]);
    free(a->warnings);
    free(a->patch);
    memset(a, 0, sizeof *a);
}

double luna_webhook_budget(double timeout_seconds)
{
    double margin = timeout_seconds / 4;
    return timeout_seconds - (margin > 1 ? 1 : margin);
}

static int no_events(void *ud, const luna_json_event *ev, luna_error *err) { return 0; }

static int bad_request(struct luna_textbuf *out, const char **ctype, const char *fmt, const char *a)
{
    *ctype = "text/plain; charset=utf-8";
    luna_textbuf_printf(out, fmt, a);
    luna_textbuf_putc(out, '\n');
    return 400;
}

/* The string at path of the review into buf; false if missing or not a
 * string. */
static bool lookup_string(const char *body, size_t len, const char *path, char *buf, size_t cap)
{
    luna_json_value v;
    luna_error err = { 0 };
    return luna_json_lookup(body, len, path, &v, buf, cap, &err) == 0 &&
           v.type == LUNA_JSON_STRING;
}

static void count(struct luna_webhook_server *s, const char *path, int status, double seconds)
{
    if (!s->requests)
        return;
    char code[8];
    snprintf(code, sizeof code, "%d", status);
    struct luna_metric_child *c;
    luna_error err = { 0 };
    if (luna_metric_child(s->requests, (const char *const[]){ path, code, NULL }, &c, &err) == 0)
        luna_metric_inc(c);
    if (seconds >= 0 &&
        luna_metric_child(s->latency, (const char *const[]){ path, NULL }, &c, &err) == 0)
        luna_metric_observe(c, seconds);
}

static void in_flight(struct luna_webhook_server *s, const char *path, double delta)
{
    struct luna_metric_child *c;
    luna_error err = { 0 };
    if (s->in_flight &&
        luna_metric_child(s->in_flight, (const char *const[]){ path, NULL }, &c, &err) == 0)
        luna_metric_set(c, luna_metric_value(c) + delta);
}

static void write_str(luna_json_writer *w, const char *k, const char *v)
{
    luna_json_write_key(w, k, strlen(k));
    luna_json_write_string(w, v, strlen(v));
}

/* The AdmissionReview answering uid with a. */
static int write_review(struct luna_textbuf *out, const char *uid,
                        const struct luna_webhook_answer *a)
{
    luna_json_writer w;
    luna_json_writer_init(&w);
    luna_json_write_object_start(&w);
    write_str(&w, "apiVersion", LUNA_WEBHOOK_API_VERSION);
    write_str(&w, "kind", "AdmissionReview");
    luna_json_write_key(&w, "response", 8);
    luna_json_write_object_start(&w);
    write_str(&w, "uid", uid);
    luna_json_write_key(&w, "allowed", 7);
    luna_json_write_bool(&w, a->allowed);
    if (a->code || a->message || a->reason) {
        luna_json_write_key(&w, "status", 6);
        luna_json_write_object_start(&w);
        if (a->code) {
            luna_json_write_key(&w, "code", 4);
            luna_json_write_int(&w, a->code);
        }
        if (a->message)
            write_str(&w, "message", a->message);
        if (a->reason)
            write_str(&w, "reason", a->reason);
        luna_json_write_object_end(&w);
    }
    if (a->nwarnings) {
        luna_json_write_key(&w, "warnings", 8);
        luna_json_write_array_start(&w);
        for (size_t i = 0; i < a->nwarnings; i++)
            luna_json_write_string(&w, a->warnings[i], strlen(a->warnings[i]));
        luna_json_write_array_end(&w);
    }
    if (a->patch) {
        size_t n = strlen(a->patch);
        unsigned char *b64 = malloc(4 * ((n + 2) / 3) + 1);
        if (!b64) {
            luna_json_writer_free(&w);
            return -1;
        }
        int len = EVP_EncodeBlock(b64, (const unsigned char *)a->patch, (int)n);
        write_str(&w, "patchType", "JSONPatch");
        luna_json_write_key(&w, "patch", 5);
        luna_json_write_string(&w, (const char *)b64, (size_t)len);
        free(b64);
    }
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    luna_error err = { 0 };
    int rc = luna_json_writer_finish(&w, &err);
    if (rc == 0) {
        size_t len = 0;
        const char *data = luna_json_writer_data(&w, &len);
        luna_textbuf_append(out, data, len);
    }
    luna_json_writer_free(&w);
    return rc;
}

static char *dup_printf(const char *fmt, const char *a, const char *b)
{
    int n = snprintf(NULL, 0, fmt, a, b);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s)
        snprintf(s, (size_t)n + 1, fmt, a, b);
    return s;
}

static int serve(void *ud, const char *path, const char *body, size_t len,
                 struct luna_textbuf *out, const char **ctype)
{
    struct luna_webhook_server *s = ud;
    struct luna_webhook_info info;
    int h = s->calls.find(s->calls.ud, path, &info);
    if (h <= 0) {
        *ctype = "text/plain; charset=utf-8";
        luna_textbuf_printf(out, "no webhook serves %s\n", path);
        return 404;
    }
    double start = luna_clock_now(luna_clock_monotonic());
    luna_error err = { 0 };
    char apiv[128], kind[64], uid[256], op[32];
    int status = 0;
    /* The envelope's fields are looked up where they are (the lookups stop
     * there); the whole body is parsed once, by the call's decode, which
     * answers MALFORMED below.  Only a refused envelope is parsed here, so
     * a body that is not JSON is called malformed rather than missing a
     * field. */
    bool envelope = lookup_string(body, len, "apiVersion", apiv, sizeof apiv) &&
                    strcmp(apiv, LUNA_WEBHOOK_API_VERSION) == 0 &&
                    lookup_string(body, len, "kind", kind, sizeof kind) &&
                    strcmp(kind, "AdmissionReview") == 0 &&
                    lookup_string(body, len, "request.uid", uid, sizeof uid) && uid[0];
    if (envelope)
        ;
    else if (luna_json_parse(body, len, NULL, no_events, NULL, &err) < 0)
        status = bad_request(out, ctype, "malformed AdmissionReview: %s", err.msg);
    else if (!lookup_string(body, len, "apiVersion", apiv, sizeof apiv) ||
             strcmp(apiv, LUNA_WEBHOOK_API_VERSION) != 0)
        status = bad_request(out, ctype, "AdmissionReview apiVersion must be "
                             LUNA_WEBHOOK_API_VERSION ", got %s",
                             lookup_string(body, len, "apiVersion", apiv, sizeof apiv) ? apiv
                                                                                       : "none");
    else if (!lookup_string(body, len, "kind", kind, sizeof kind) ||
             strcmp(kind, "AdmissionReview") != 0)
        status = bad_request(out, ctype, "kind must be AdmissionReview, got %s",
                             lookup_string(body, len, "kind", kind, sizeof kind) ? kind : "none");
    else if (!lookup_string(body, len, "request.uid", uid, sizeof uid) || !uid[0])
        status = bad_request(out, ctype, "AdmissionReview has no request.uid%s", "");
    if (status) {
        luna_info("webhook request refused", "webhook", info.name, "path", path,
                  LUNA_LOG_NUM("status"), "400", "error", err.msg[0] ? err.msg : NULL);
        count(s, path, status, luna_clock_now(luna_clock_monotonic()) - start);
        return status;
    }
    if (!lookup_string(body, len, "request.operation", op, sizeof op))
        snprintf(op, sizeof op, "?");

    in_flight(s, path, 1);
    struct luna_webhook_answer a;
    char why[512] = "";
    enum luna_webhook_result r = s->calls.call(s->calls.ud, h, body, len,
                                               luna_webhook_budget(info.timeout_seconds), &a,
                                               why, sizeof why);
    double took = luna_clock_now(luna_clock_monotonic()) - start;
    if (r == LUNA_WEBHOOK_MALFORMED) {
        status = bad_request(out, ctype, "malformed AdmissionReview: %s", why);
        luna_info("webhook request refused", "webhook", info.name, "path", path,
                  LUNA_LOG_NUM("status"), "400", "error", why);
        in_flight(s, path, -1);
        count(s, path, status, took);
        return status;
    }
    char took_s[32];
    snprintf(took_s, sizeof took_s, "%.6f", took);
    if (r != LUNA_WEBHOOK_OK) {
        bool ignore = strcmp(info.failure_policy, "Ignore") == 0;
        memset(&a, 0, sizeof a);
        a.allowed = ignore;
        if (ignore) {
            a.warnings = calloc(1, sizeof *a.warnings);
            if (a.warnings && (a.warnings[0] = dup_printf("webhook %s failed, ignored "
                                                          "(failurePolicy Ignore): %s",
                                                          info.name, why)))
                a.nwarnings = 1;
        } else {
            a.code = 500;
            a.message = dup_printf("webhook %s failed (failurePolicy Fail): %s", info.name, why);
        }
        luna_error("webhook failed", "webhook", info.name, "uid", uid, "operation", op,
                   "failure_policy", info.failure_policy,
                   "stopped", r == LUNA_WEBHOOK_STOPPED ? "true" : NULL, "error", why);
    }
    char code[8], ops[16];
    snprintf(code, sizeof code, "%d", a.code);
    snprintf(ops, sizeof ops, "%zu", a.ops);
    if (s->shadow && (!a.allowed || a.patch)) {
        /* what it would have done, then allowed as it is */
        luna_info("webhook shadow", "webhook", info.name, "uid", uid, "operation", op, "would",
                  a.allowed ? "patch" : "deny", LUNA_LOG_NUM("code"), code, LUNA_LOG_NUM("ops"),
                  ops, "message", a.message ? a.message : "", "patch", a.patch ? a.patch : "");
        luna_webhook_answer_free(&a);
        a.allowed = true;
    } else if (r == LUNA_WEBHOOK_OK) {
        luna_log(a.allowed ? LUNA_LOG_DEBUG : LUNA_LOG_INFO, "webhook request", "webhook",
                 info.name, "uid", uid, "operation", op, LUNA_LOG_BOOL("allowed"),
                 a.allowed ? "true" : "false", LUNA_LOG_NUM("code"), code, LUNA_LOG_NUM("ops"),
                 ops, "duration", took_s, "message", a.message, NULL);
    }
    status = 200;
    if (write_review(out, uid, &a) < 0) {
        /* a message or warning that is not UTF-8 (JSON cannot carry it):
         * a failure of the webhook, answered by its failure policy */
        bool allow = s->shadow || strcmp(info.failure_policy, "Ignore") == 0;
        char msg[512];
        snprintf(msg, sizeof msg, "webhook %s failed (failurePolicy %s): its answer cannot be "
                 "encoded as JSON (a message or warning that is not UTF-8)", info.name,
                 info.failure_policy);
        luna_error("webhook failed", "webhook", info.name, "uid", uid, "error", msg);
        struct luna_webhook_answer f = { .allowed = allow, .code = allow ? 0 : 500,
                                         .message = allow ? NULL : msg };
        luna_textbuf_reset(out);
        if (write_review(out, uid, &f) < 0)
            status = 500;
    }
    luna_webhook_answer_free(&a);
    *ctype = JSON_TYPE;
    in_flight(s, path, -1);
    count(s, path, status, took);
    return status;
}

static int register_metrics(struct luna_webhook_server *s, struct luna_metrics *reg,
                            luna_error *err)
{
    static const char *const by_code[] = { "webhook", "code", NULL };
    static const char *const by_path[] = { "webhook", NULL };
    const struct luna_metric_desc requests = {
        .name = "controller_runtime_webhook_requests_total",
        .help = "Total number of admission requests by HTTP status code.",
        .type = LUNA_METRIC_COUNTER, .labels = by_code,
    };
    const struct luna_metric_desc latency = {
        .name = "controller_runtime_webhook_latency_seconds",
        .help = "Histogram of the latency of processing admission requests",
        .type = LUNA_METRIC_HISTOGRAM, .labels = by_path,
    };
    const struct luna_metric_desc flight = {
        .name = "controller_runtime_webhook_requests_in_flight",
        .help = "Current number of admission requests being served.",
        .type = LUNA_METRIC_GAUGE, .labels = by_path,
    };
    int rc;
    if ((rc = luna_metrics_register(reg, &requests, &s->requests, err)) < 0 ||
        (rc = luna_metrics_register(reg, &latency, &s->latency, err)) < 0 ||
        (rc = luna_metrics_register(reg, &flight, &s->in_flight, err)) < 0)
        return rc;
    return 0;
}

int luna_webhook_server_register_metrics(struct luna_metrics *reg, const char *path,
                                         luna_error *err)
{
    struct luna_webhook_server s = { 0 };
    int rc = register_metrics(&s, reg, err);
    if (rc < 0)
        return rc;
    in_flight(&s, path, 0);
    count(&s, path, 200, 0.001);
    return 0;
}

int luna_webhook_server_start(const struct luna_webhook_server_options *o,
                              struct luna_webhook_server **out, luna_error *err)
{
    *out = NULL;
    if (!o->cert_pem || !o->key_pem)
        return luna_error_set(err, LUNA_EINVAL, "webhook server %s: needs a TLS certificate",
                              o->address);
    struct luna_webhook_server *s = calloc(1, sizeof *s);
    if (!s)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    s->calls = o->calls;
    s->shadow = o->shadow;
    int rc;
    if (o->metrics && (rc = register_metrics(s, o->metrics, err)) < 0) {
        free(s);
        return rc;
    }
    struct luna_httpd_options ho = {
        .address = o->address,
        .tls_cert_pem = o->cert_pem,
        .tls_key_pem = o->key_pem,
        .post = serve,
        .post_ud = s,
        .post_max_body = LUNA_WEBHOOK_MAX_BODY,
        /* ahead of everything else the loop has to do in an iteration:
         * reconciles resumed by API answers, the dispatchers' starts */
        .priority = EV_MAXPRI,
        .read_header_timeout = o->read_header_timeout,
        .read_timeout = o->read_timeout,
    };
    if ((rc = luna_httpd_start(&ho, &s->httpd, err)) < 0) {
        free(s);
        return luna_error_wrap(err, "webhook server");
    }
    *out = s;
    return 0;
}

void luna_webhook_server_free(struct luna_webhook_server *s)
{
    if (!s)
        return;
    luna_httpd_free(s->httpd);
    free(s);
}

const char *luna_webhook_server_address(const struct luna_webhook_server *s)
{
    return luna_httpd_address(s->httpd);
}

int luna_webhook_server_set_certificate(struct luna_webhook_server *s, const char *cert_pem,
                                        const char *key_pem, luna_error *err)
{
    return luna_httpd_set_certificate(s->httpd, cert_pem, key_pem, err);
}
