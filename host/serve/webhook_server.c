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
    free(a->converted);
    memset(a, 0, sizeof *a);
}

double luna_webhook_budget(double timeout_seconds)
{
    double margin = timeout_seconds / 4;
    return timeout_seconds - (margin > 1 ? 1 : margin);
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

/* A value quoted in a reason stays on one line: control bytes become
 * '?' (the reason is a text/plain body and a log value). */
static const char *one_line(char *text)
{
    for (unsigned char *p = (unsigned char *)text; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            *p = '?';
    return text;
}

static int refuse(char *why, size_t why_size, const char *fmt, const char *a, const char *b)
{
    snprintf(why, why_size, fmt, a, b);
    return 400;
}

/* A request field the function reads, with the type kube-apiserver sends:
 * a field may be missing unless required, or null where Go's type is a
 * pointer or a RawExtension. */
struct review_field {
    const char *path, *want;
    bool null_ok, required;
};

/* What a review of one kind must look like. */
struct review_shape {
    const char *kind, *api_version;
    const struct review_field *fields;
    size_t nfields;
};

/* k8s.io/api/admission/v1 AdmissionRequest */
static const struct review_field ADMISSION_FIELDS[] = {
    { "request.object", "an object", true, false },
    { "request.oldObject", "an object", true, false },
    { "request.userInfo", "an object", false, false },
    { "request.kind", "an object", false, false },
    { "request.resource", "an object", false, false },
    { "request.options", "an object", true, false },
    { "request.operation", "a string", false, false },
    { "request.name", "a string", false, false },
    { "request.namespace", "a string", false, false },
    { "request.subResource", "a string", false, false },
    { "request.dryRun", "a boolean", true, false },
};

/* k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1 ConversionRequest */
static const struct review_field CONVERSION_FIELDS[] = {
    { "request.desiredAPIVersion", "a string", false, true },
    { "request.objects", "an array", false, true },
};

static const struct review_shape ADMISSION_REVIEW = {
    "AdmissionReview", LUNA_WEBHOOK_API_VERSION, ADMISSION_FIELDS,
    sizeof ADMISSION_FIELDS / sizeof ADMISSION_FIELDS[0],
};
static const struct review_shape CONVERSION_REVIEW = {
    "ConversionReview", LUNA_CONVERSION_API_VERSION, CONVERSION_FIELDS,
    sizeof CONVERSION_FIELDS / sizeof CONVERSION_FIELDS[0],
};

/* What one pass over a review collects: each key the check reads must
 * appear once (the server reads a key's first value and the function's
 * decoder its last, so a repeated one would show the function what was
 * not checked), with the type of its value and, for the strings the
 * check compares, their text. */
#define MAX_FIELDS 16
struct scan {
    const struct review_shape *shape;
    unsigned seen;          /* bit i: TOP_KEYS[i], then the shape's fields, then uid */
    bool in_request;        /* the top-level key being read is "request" */
    const char *repeated;   /* the first key seen twice, or NULL */
    int pending;            /* the key whose value comes next (a bit index), or -1 */
    int top_type;           /* the document's own type (0: none yet) */
    int types[3 + MAX_FIELDS + 1];       /* by bit index: the value's event type, 0: missing */
    char api_version[128], kind[64];     /* "" when not a string, or too long ... */
    bool api_version_long, kind_long;    /* ... which these say */
    char *uid;              /* the caller's buffer */
    size_t uid_size;
    bool uid_long;
};

static const char *const TOP_KEYS[] = { "apiVersion", "kind", "request" };
enum { TOP_API_VERSION, TOP_KIND, TOP_REQUEST, NTOP };

static bool key_is(const luna_json_event *ev, const char *name)
{
    return ev->len == strlen(name) && memcmp(ev->str, name, ev->len) == 0;
}

static void take_string(const luna_json_event *ev, char *buf, size_t cap, bool *too_long)
{
    *too_long = ev->len >= cap;
    size_t n = *too_long ? 0 : ev->len;
    memcpy(buf, ev->str, n);
    buf[n] = '\0';
}

static void seen_key(struct scan *r, int bit, const char *name)
{
    if (r->seen & 1u << bit)
        r->repeated = r->repeated ? r->repeated : name;
    r->seen |= 1u << bit;
    r->pending = bit;
}

static int scan_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct scan *r = ud;
    (void)err;
    if (ev->type == LUNA_JSON_OBJECT_END || ev->type == LUNA_JSON_ARRAY_END)
        return 0;
    if (ev->depth == 0) {
        r->top_type = ev->type;
        return 0;
    }
    size_t nfields = r->shape->nfields;
    if (ev->type == LUNA_JSON_KEY) {
        r->pending = -1;
        if (ev->depth == 1) {
            r->in_request = key_is(ev, "request");
            for (int i = 0; i < NTOP; i++)
                if (key_is(ev, TOP_KEYS[i]))
                    seen_key(r, i, TOP_KEYS[i]);
        } else if (ev->depth == 2 && r->in_request) {
            for (size_t i = 0; i <= nfields; i++) {
                const char *path = i < nfields ? r->shape->fields[i].path : "request.uid";
                if (key_is(ev, path + sizeof "request." - 1))
                    seen_key(r, NTOP + (int)i, path);
            }
        }
        return 0;
    }
    /* a value: the pending key's, when it is at the key's depth */
    if (r->pending < 0 || ev->depth > 2)
        return 0;
    int bit = r->pending;
    r->pending = -1;
    if (r->types[bit])
        return 0; /* a repeated key: the first value is the one checked */
    r->types[bit] = ev->type;
    if (ev->type != LUNA_JSON_STRING)
        return 0;
    if (bit == TOP_API_VERSION)
        take_string(ev, r->api_version, sizeof r->api_version, &r->api_version_long);
    else if (bit == TOP_KIND)
        take_string(ev, r->kind, sizeof r->kind, &r->kind_long);
    else if (bit == NTOP + (int)nfields)
        take_string(ev, r->uid, r->uid_size, &r->uid_long);
    return 0;
}

static const char *type_name(int type)
{
    switch (type) {
    case 0: return "none";
    case LUNA_JSON_NULL: return "null";
    case LUNA_JSON_TRUE:
    case LUNA_JSON_FALSE: return "a boolean";
    case LUNA_JSON_NUMBER: return "a number";
    case LUNA_JSON_STRING: return "a string";
    case LUNA_JSON_ARRAY_START: return "an array";
    case LUNA_JSON_OBJECT_START: return "an object";
    default: return "unreadable";
    }
}

/* A string field's text for a reason: the text (one line), or what it is. */
static const char *shown(int type, char *text, bool too_long)
{
    if (type != LUNA_JSON_STRING)
        return type_name(type);
    return too_long ? "a long string" : one_line(text);
}

/* The one check of a review's envelope, for either kind, in one pass over
 * the body (webhooks answer at a steady rate: the check is no second
 * parse of the whole review into a tree): 0, or 400 with why (one line,
 * naming the field).  uid: the request's, when read. */
static int review_check(const struct review_shape *rs, const char *body, size_t len, char *uid,
                        size_t uid_size, char *why, size_t why_size)
{
    luna_error err = { 0 };
    uid[0] = '\0';
    struct scan sc = { .shape = rs, .pending = -1, .uid = uid, .uid_size = uid_size };
    if (rs->nfields > MAX_FIELDS)
        return refuse(why, why_size, "%s%s: too many fields to check", rs->kind, "");
    if (luna_json_parse(body, len, NULL, scan_event, &sc, &err) < 0) {
        uid[0] = '\0';
        return refuse(why, why_size, "malformed %s: %s", rs->kind, one_line(err.msg));
    }
    if (sc.repeated) {
        uid[0] = '\0';
        return refuse(why, why_size, "%s repeats the key %s", rs->kind, sc.repeated);
    }
    if (sc.top_type != LUNA_JSON_OBJECT_START) {
        uid[0] = '\0';
        snprintf(why, why_size, "%s %s is a JSON object, got %s",
                 strchr("AEIOU", rs->kind[0]) ? "an" : "a", rs->kind,
                 sc.top_type == LUNA_JSON_ARRAY_START ? "an array" : "a scalar");
        return 400;
    }
    int uid_bit = NTOP + (int)rs->nfields;
    bool have_uid = sc.types[uid_bit] == LUNA_JSON_STRING && !sc.uid_long && uid[0];
    if (!have_uid)
        uid[0] = '\0'; /* named in the answer and the log only when good */
    if (sc.types[TOP_API_VERSION] != LUNA_JSON_STRING || sc.api_version_long ||
        strcmp(sc.api_version, rs->api_version) != 0) {
        snprintf(why, why_size, "%s apiVersion must be %s, got %s", rs->kind, rs->api_version,
                 shown(sc.types[TOP_API_VERSION], sc.api_version, sc.api_version_long));
        return 400;
    }
    if (sc.types[TOP_KIND] != LUNA_JSON_STRING || sc.kind_long || strcmp(sc.kind, rs->kind) != 0) {
        snprintf(why, why_size, "kind must be %s, got %s", rs->kind,
                 shown(sc.types[TOP_KIND], sc.kind, sc.kind_long));
        return 400;
    }
    if (sc.types[TOP_REQUEST] != LUNA_JSON_OBJECT_START)
        return refuse(why, why_size, "%s request must be an object, got %s", rs->kind,
                      type_name(sc.types[TOP_REQUEST]));
    if (!have_uid) {
        if (sc.types[uid_bit] == LUNA_JSON_STRING && sc.uid_long) {
            snprintf(why, why_size, "%s request.uid is longer than %zu bytes", rs->kind,
                     uid_size - 1);
            return 400;
        }
        snprintf(why, why_size, "%s has no request.uid (got %s)", rs->kind,
                 sc.types[uid_bit] == LUNA_JSON_STRING ? "an empty string"
                                                       : type_name(sc.types[uid_bit]));
        return 400;
    }
    for (size_t i = 0; i < rs->nfields; i++) {
        const struct review_field *f = &rs->fields[i];
        const char *t = type_name(sc.types[NTOP + i]);
        if (strcmp(t, "none") == 0 && f->required) {
            snprintf(why, why_size, "%s has no %s", rs->kind, f->path);
            return 400;
        }
        if (strcmp(t, "none") == 0 || strcmp(t, f->want) == 0 ||
            (f->null_ok && strcmp(t, "null") == 0))
            continue;
        snprintf(why, why_size, "%s %s must be %s, got %s", rs->kind, f->path, f->want, t);
        return 400;
    }
    return 0;
}

int luna_webhook_review_check(const char *body, size_t len, char *uid, size_t uid_size,
                              char *why, size_t why_size)
{
    return review_check(&ADMISSION_REVIEW, body, len, uid, uid_size, why, why_size);
}

int luna_webhook_conversion_review_check(const char *body, size_t len, char *uid,
                                         size_t uid_size, char *why, size_t why_size)
{
    return review_check(&CONVERSION_REVIEW, body, len, uid, uid_size, why, why_size);
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

/* Finishes the review answer in w into out, and frees w.  0 or the
 * writer's error (out of memory). */
static int finish_answer(luna_json_writer *w, struct luna_textbuf *out)
{
    luna_error err = { 0 };
    int rc = luna_json_writer_finish(w, &err);
    if (rc == 0) {
        size_t len = 0;
        const char *data = luna_json_writer_data(w, &len);
        luna_textbuf_append(out, data, len);
    }
    luna_json_writer_free(w);
    return rc;
}

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
    return finish_answer(&w, out);
}

static char *dup_printf(const char *fmt, const char *a, const char *b)
{
    int n = snprintf(NULL, 0, fmt, a, b);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s)
        snprintf(s, (size_t)n + 1, fmt, a, b);
    return s;
}

/* The ConversionReview answering uid: Success with the converted objects
 * (converted: JSON text webhook.lua encoded, spliced as it is), or Failure
 * with message (convertedObjects then empty, as the field is required). */
static int write_conversion(struct luna_textbuf *out, const char *uid, const char *converted,
                            const char *message)
{
    luna_json_writer w;
    luna_json_writer_init(&w);
    luna_json_write_object_start(&w);
    write_str(&w, "apiVersion", LUNA_CONVERSION_API_VERSION);
    write_str(&w, "kind", "ConversionReview");
    luna_json_write_key(&w, "response", 8);
    luna_json_write_object_start(&w);
    write_str(&w, "uid", uid);
    luna_json_write_key(&w, "convertedObjects", 16);
    if (converted) {
        luna_json_write_raw(&w, converted, strlen(converted));
    } else {
        luna_json_write_array_start(&w);
        luna_json_write_array_end(&w);
    }
    luna_json_write_key(&w, "result", 6);
    luna_json_write_object_start(&w);
    write_str(&w, "status", converted ? "Success" : "Failure");
    if (!converted)
        write_str(&w, "message", message);
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    return finish_answer(&w, out);
}

/* Replaces, in place, each byte of s that is not part of valid UTF-8 with
 * '?': a reason from error() may carry any bytes, JSON cannot, and the
 * rest of the reason is worth keeping. */
static void make_utf8(char *s)
{
    size_t len = strlen(s);
    for (size_t i = 0; i < len;) {
        i += luna_json_utf8_valid_prefix(s + i, len - i);
        if (i < len)
            s[i++] = '?';
    }
}

/* POST /convert/NAME: a ConversionReview through converter h.  The
 * envelope is checked as an AdmissionReview's, by the same check (400
 * with the reason, logged); the
 * converter's error or stop answers Failure naming it and the reason.
 * Conversion is not an admission decision, so --shadow does not touch it:
 * a conversion the API server does not get fails its reads and writes of
 * stored objects. */
static int serve_conversion(struct luna_webhook_server *s, int h,
                            const struct luna_webhook_info *info, const char *path,
                            const char *body, size_t len, struct luna_textbuf *out,
                            const char **ctype)
{
    double start = luna_clock_now(luna_clock_monotonic());
    char uid[256], desired[256], why_refused[512];
    int status = luna_webhook_conversion_review_check(body, len, uid, sizeof uid, why_refused,
                                                      sizeof why_refused);
    if (status) {
        *ctype = "text/plain; charset=utf-8";
        luna_textbuf_printf(out, "%s\n", why_refused);
        luna_info("webhook request refused", "webhook", info->name, "path", path,
                  LUNA_LOG_NUM("status"), "400", "uid", uid[0] ? uid : NULL, "error",
                  why_refused);
        count(s, path, status, luna_clock_now(luna_clock_monotonic()) - start);
        return status;
    }
    if (!lookup_string(body, len, "request.desiredAPIVersion", desired, sizeof desired))
        snprintf(desired, sizeof desired, "?"); /* a long one: checked a string */

    in_flight(s, path, 1);
    struct luna_webhook_answer a;
    char why[512] = "";
    enum luna_webhook_result r = s->calls.call(s->calls.ud, h, body, len,
                                               luna_webhook_budget(info->timeout_seconds), &a,
                                               why, sizeof why);
    double took = luna_clock_now(luna_clock_monotonic()) - start;
    char took_s[32], objects[16];
    snprintf(took_s, sizeof took_s, "%.6f", took);
    char *message = NULL;
    if (r != LUNA_WEBHOOK_OK || !a.converted) {
        /* a failed call leaves the answer unset (the runtime's call may
         * not touch it); only an OK one holds anything to free */
        if (r == LUNA_WEBHOOK_OK) {
            snprintf(why, sizeof why, "no converted objects");
            luna_webhook_answer_free(&a);
        } else {
            memset(&a, 0, sizeof a);
        }
        message = dup_printf(r == LUNA_WEBHOOK_STOPPED ? "converter %s stopped: %s"
                                                       : "converter %s failed: %s",
                             info->name, why);
        make_utf8(message ? message : why);
        luna_error("conversion failed", "converter", info->name, "uid", uid, "desired",
                   desired, "stopped", r == LUNA_WEBHOOK_STOPPED ? "true" : NULL, "error",
                   message ? message : why, "duration", took_s);
    } else {
        snprintf(objects, sizeof objects, "%zu", a.ops);
        luna_debug("conversion request", "converter", info->name, "uid", uid, "desired",
                   desired, LUNA_LOG_NUM("objects"), objects, "duration", took_s);
    }
    status = 200;
    if (write_conversion(out, uid, a.converted, message ? message : why) < 0) {
        /* cannot happen with a UTF-8 message and encoded objects; if it
         * does, Failure all the same, with a message JSON can carry */
        char msg[512];
        snprintf(msg, sizeof msg, "converter %s failed: its answer cannot be encoded as JSON",
                 info->name);
        luna_error("conversion failed", "converter", info->name, "uid", uid, "error", msg);
        luna_textbuf_reset(out);
        if (write_conversion(out, uid, NULL, msg) < 0)
            status = 500;
    }
    free(message);
    luna_webhook_answer_free(&a);
    *ctype = JSON_TYPE;
    in_flight(s, path, -1);
    count(s, path, status, took);
    return status;
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
    if (strcmp(info.type, "conversion") == 0)
        return serve_conversion(s, h, &info, path, body, len, out, ctype);
    double start = luna_clock_now(luna_clock_monotonic());
    char uid[256], op[32], why_refused[512];
    int status = luna_webhook_review_check(body, len, uid, sizeof uid, why_refused,
                                           sizeof why_refused);
    if (status) {
        *ctype = "text/plain; charset=utf-8";
        luna_textbuf_printf(out, "%s\n", why_refused);
        luna_info("webhook request refused", "webhook", info.name, "path", path,
                  LUNA_LOG_NUM("status"), "400", "uid", uid[0] ? uid : NULL, "error",
                  why_refused);
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

int luna_webhook_server_handle(struct luna_webhook_server *s, const char *path, const char *body,
                               size_t len, struct luna_textbuf *out, const char **ctype)
{
    return serve(s, path, body, len, out, ctype);
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
