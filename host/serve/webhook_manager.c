/* webhook_manager.c — see webhook_manager.h. */
#include "serve/webhook_manager.h"

#include <ev.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/json.h"
#include "base/json_writer.h"
#include "base/log.h"
#include "base/loop.h"
#include "serve/cert_authority.h"
#include "serve/serving_cert.h"

#define DEFAULT_RESYNC_S 60.0
#define MIN_DELAY_S 1.0
#define MAX_CONFLICTS 8
#define MAX_BODY ((size_t)4 << 20)
#define MAX_FIELD ((size_t)256 << 10)
#define MAX_BUNDLE 4            /* CAs kept in ca.crt at most */
#define REQUEST_TIMEOUT_S 30.0
#define ADMISSION "/apis/admissionregistration.k8s.io/v1/"
#define CRDS "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"

enum step {
    STEP_NONE,
    STEP_GET_SECRET, STEP_CREATE_SECRET, STEP_UPDATE_SECRET,
    STEP_GET_CONFIG, STEP_WRITE_CONFIG,
    STEP_GET_CRD, STEP_PATCH_CRD,
};

static const char *const config_types[2] = { "validating", "mutating" };
static const char *const config_kinds[2] = { "ValidatingWebhookConfiguration",
                                             "MutatingWebhookConfiguration" };

struct luna_webhook_manager {
    struct luna_webhook_manager_options o; /* strings below are owned copies */
    char *ns, *secret, *config;
    char **names;
    char **crds;
    size_t ncrds;
    /* A new CRD list handed over while a sync runs (it may be reading
     * crds): installed when the sync ends.  Owned. */
    char **next_crds;
    size_t nnext_crds;
    bool crds_parked;
    bool bundle_reread;             /* this sync read the Secret again for a newer CA */
    struct luna_kube_request *req;  /* the step in flight, or NULL */
    enum step step;
    bool again;                     /* sync again once this one ends */
    int conflicts;                  /* in this sync */
    int config_i;                   /* STEP_*_CONFIG: config_types index */
    size_t crd_i;                   /* STEP_*_CRD: crds index */
    char *body;                     /* STEP_WRITE_CONFIG: what is written */
    /* What the sync adopted from the Secret (owned). */
    char *tls_crt, *tls_key, *bundle, *bundle_b64;
    /* The pair served (owned), NULL until the first. */
    char *served_crt;
    bool ever_ready;
    char last_error[1200];           /* the last failure logged at error */
    char last_skip[320];             /* the last CRD skip logged at warn */
    double backoff;
    ev_timer timer;
};

static void start_sync(struct luna_webhook_manager *m);

static void replace(char **slot, char *value)
{
    if (*slot) {
        memset(*slot, 0, strlen(*slot)); /* keys */
        free(*slot);
    }
    *slot = value;
}

static char *b64_encode(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    return out;
}

/* The decoded text, NUL-terminated, or NULL when s is not base64 or holds a NUL. */
static char *b64_decode(const char *s)
{
    size_t n = strlen(s);
    if (n % 4 != 0)
        return NULL;
    char *out = malloc(n / 4 * 3 + 1);
    if (!out)
        return NULL;
    int len = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    if (len < 0) {
        free(out);
        return NULL;
    }
    for (size_t i = n; i > 0 && s[i - 1] == '='; i--)
        len--;
    out[len] = '\0';
    if (strlen(out) != (size_t)len) {
        free(out);
        return NULL;
    }
    return out;
}

static void sha256_hex(const char *s, char out[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(s, strlen(s), md, &n, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* The string at segs in json (malloc'd), or NULL when absent or not a string. */
static char *lookup_string(const char *json, size_t len, const char *const *segs, size_t n)
{
    char *buf = malloc(MAX_FIELD);
    luna_json_value v;
    luna_error err = { 0 };
    if (!buf)
        return NULL;
    if (luna_json_lookupv(json, len, segs, n, &v, buf, MAX_FIELD, &err) < 0 ||
        v.type != LUNA_JSON_STRING) {
        free(buf);
        return NULL;
    }
    char *out = strdup(buf);
    free(buf);
    return out;
}

/* ---- failures and scheduling ------------------------------------------ */

static void schedule(struct luna_webhook_manager *m, double after)
{
    if (after < MIN_DELAY_S)
        after = MIN_DELAY_S;
    ev_timer_stop(luna_loop(), &m->timer);
    ev_timer_set(&m->timer, after, 0.);
    ev_timer_start(luna_loop(), &m->timer);
}

static double resync(const struct luna_webhook_manager *m)
{
    return m->o.resync > 0 ? m->o.resync : DEFAULT_RESYNC_S;
}

static void install_parked_crds(struct luna_webhook_manager *m);

static void end_sync(struct luna_webhook_manager *m, double next)
{
    m->step = STEP_NONE;
    replace(&m->body, NULL);
    install_parked_crds(m);
    if (m->again) {
        m->again = false;
        start_sync(m);
        return;
    }
    schedule(m, next);
}

/* A CRD left alone: warned once, then at debug (it is looked at every sync). */
static void skip_crd(struct luna_webhook_manager *m, const char *why)
{
    const char *name = m->crds[m->crd_i];
    char key[320];
    snprintf(key, sizeof key, "%s %s", name, why);
    if (strcmp(key, m->last_skip) != 0) {
        luna_warn("managed webhook certificate: CRD skipped", "crd", name, "why", why);
        snprintf(m->last_skip, sizeof m->last_skip, "%s", key);
    } else {
        luna_debug("managed webhook certificate: CRD skipped", "crd", name, "why", why);
    }
}

static void fail(struct luna_webhook_manager *m, const char *what)
{
    if (strcmp(what, m->last_error) != 0) {
        luna_error("managed webhook certificate failed", "error", what, "secret", m->secret,
                   "namespace", m->ns);
        snprintf(m->last_error, sizeof m->last_error, "%s", what);
    } else {
        luna_debug("managed webhook certificate failed", "error", what);
    }
    if (!m->ever_ready && m->o.ready) {
        char why[1300];
        snprintf(why, sizeof why, "managed certificate not served yet: %s", what);
        m->o.ready(m->o.ud, false, why);
    }
    m->backoff = m->backoff > 0 ? m->backoff * 2 : 1.0;
    if (m->backoff > resync(m))
        m->backoff = resync(m);
    m->again = false;
    end_sync(m, m->backoff);
}

/* "GET Secret luna/x: HTTP 403 Forbidden: <the Status message>" */
/* "WHAT: HTTP 403 Forbidden: <the Status message>", or the failure. */
static void describe_response(char *msg, size_t size, const char *what,
                              const luna_http_response *resp, const luna_http_failure *f)
{
    if (f) {
        snprintf(msg, size, "%s: %s", what, f->err.msg);
    } else {
        char *reason = resp->body ? lookup_string(resp->body, resp->body_len,
                                                  (const char *const[]){ "reason" }, 1)
                                  : NULL;
        char *text = resp->body ? lookup_string(resp->body, resp->body_len,
                                                (const char *const[]){ "message" }, 1)
                                : NULL;
        snprintf(msg, size, "%s: HTTP %ld%s%s%s%s", what, resp->status, reason ? " " : "",
                 reason ? reason : "", text ? ": " : "", text ? text : "");
        free(reason);
        free(text);
    }
}

static void fail_response(struct luna_webhook_manager *m, const char *what,
                          const luna_http_response *resp, const luna_http_failure *f)
{
    char msg[1200];
    describe_response(msg, sizeof msg, what, resp, f);
    fail(m, msg);
}

/* ---- requests ----------------------------------------------------------- */

static void on_done(void *ud, const luna_http_response *resp, const luna_http_failure *f);

static void request(struct luna_webhook_manager *m, enum step step, const char *method,
                    const char *path, const char *body, const char *content_type)
{
    struct luna_kube_request_options ro = {
        .method = method, .path = path, .body = body, .body_len = body ? strlen(body) : 0,
        .content_type = content_type, .timeout = REQUEST_TIMEOUT_S,
        .max_response_bytes = MAX_BODY, .on_done = on_done, .ud = m,
    };
    luna_error err = { 0 };
    m->step = step;
    m->req = luna_kube_request_start(m->o.kc, &ro, &err);
    if (!m->req) {
        char msg[1200];
        snprintf(msg, sizeof msg, "%s %s: %s", method, path, err.msg);
        fail(m, msg);
    }
}

static char *secret_path(const struct luna_webhook_manager *m, bool named)
{
    char *p = NULL;
    if (asprintf(&p, "/api/v1/namespaces/%s/secrets%s%s", m->ns, named ? "/" : "",
                 named ? m->secret : "") < 0)
        return NULL;
    return p;
}

static char *config_path(const struct luna_webhook_manager *m, bool named)
{
    char *p = NULL;
    if (asprintf(&p, ADMISSION "%swebhookconfigurations%s%s", config_types[m->config_i],
                 named ? "/" : "", named ? m->config : "") < 0)
        return NULL;
    return p;
}

static void get_secret(struct luna_webhook_manager *m)
{
    char *p = secret_path(m, true);
    if (!p)
        return fail(m, "out of memory");
    request(m, STEP_GET_SECRET, "GET", p, NULL, NULL);
    free(p);
}

static void get_config(struct luna_webhook_manager *m);
static void get_crd(struct luna_webhook_manager *m);

/* Whether the base64 PEM bundle live holds a certificate this sync's
 * bundle does not. */
static bool bundle_newer(const struct luna_webhook_manager *m, const char *live_b64)
{
    static const char begin[] = "-----BEGIN CERTIFICATE-----";
    static const char end[] = "-----END CERTIFICATE-----";
    char *live = b64_decode(live_b64);
    if (!live)
        return false;
    bool newer = false;
    for (const char *p = strstr(live, begin); p && !newer; p = strstr(p, begin)) {
        const char *e = strstr(p, end);
        if (!e)
            break;
        e += sizeof end - 1;
        size_t n = (size_t)(e - p);
        bool found = false;
        for (const char *q = m->bundle ? strstr(m->bundle, begin) : NULL; q && !found;
             q = strstr(q + 1, begin))
            found = strncmp(q, p, n) == 0;
        newer = !found;
        p = e;
    }
    free(live);
    return newer;
}

/* A configuration or CRD registers a CA this sync's bundle lacks: another
 * replica rotated the CA after this sync read the Secret.  Reads the
 * Secret again (once a sync) rather than write the older bundle over the
 * newer one, which would leave the API server unable to verify what that
 * replica serves.  True when it did (the sync goes on from there). */
static bool reread_for_newer(struct luna_webhook_manager *m, const char *live_b64)
{
    if (m->bundle_reread || !live_b64 || !bundle_newer(m, live_b64))
        return false;
    m->bundle_reread = true;
    luna_info("managed webhook certificate: a newer CA is registered, reading the Secret again",
              "secret", m->secret, "namespace", m->ns);
    get_secret(m);
    return true;
}

static void start_sync(struct luna_webhook_manager *m)
{
    if (m->step != STEP_NONE) {
        m->again = true;
        return;
    }
    ev_timer_stop(luna_loop(), &m->timer);
    m->conflicts = 0;
    m->bundle_reread = false;
    get_secret(m);
}

static void timer_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    start_sync(w->data);
}

/* A conflict: start the step over from its GET, or give up. */
static void conflict(struct luna_webhook_manager *m, const char *what,
                     const luna_http_response *resp)
{
    if (++m->conflicts > MAX_CONFLICTS)
        return fail_response(m, what, resp, NULL);
    luna_info("managed webhook certificate: conflict, reading again", "step", what);
    if (m->step == STEP_WRITE_CONFIG)
        get_config(m);
    else
        get_secret(m);
}

/* ---- step 1: the Secret -------------------------------------------------- */

/* When 2/3 of the certificate's life has passed (Unix seconds), or 0. */
static double renewal_point(const char *pem)
{
    double nb, na;
    if (!pem || luna_cert_validity(pem, &nb, &na) < 0)
        return 0;
    return nb + (na - nb) * 2.0 / 3.0;
}

static void write_secret(struct luna_webhook_manager *m, const char *rv, const char *tls_crt,
                         const char *tls_key, const char *ca_crt, const char *ca_key)
{
    luna_json_writer w;
    luna_json_writer_init(&w);
    const char *keys[4] = { "tls.crt", "tls.key", "ca.crt", "ca.key" };
    const char *vals[4] = { tls_crt, tls_key, ca_crt, ca_key };
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "apiVersion", 10);
    luna_json_write_string(&w, "v1", 2);
    luna_json_write_key(&w, "kind", 4);
    luna_json_write_string(&w, "Secret", 6);
    luna_json_write_key(&w, "metadata", 8);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "name", 4);
    luna_json_write_string(&w, m->secret, strlen(m->secret));
    luna_json_write_key(&w, "namespace", 9);
    luna_json_write_string(&w, m->ns, strlen(m->ns));
    if (rv) {
        luna_json_write_key(&w, "resourceVersion", 15);
        luna_json_write_string(&w, rv, strlen(rv));
    }
    luna_json_write_key(&w, "labels", 6);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "app.kubernetes.io/managed-by", 28);
    luna_json_write_string(&w, "luna", 4);
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    luna_json_write_key(&w, "type", 4);
    luna_json_write_string(&w, "kubernetes.io/tls", 17);
    luna_json_write_key(&w, "data", 4);
    luna_json_write_object_start(&w);
    bool ok = true;
    for (int i = 0; i < 4; i++) {
        char *b = b64_encode(vals[i]);
        ok = ok && b;
        luna_json_write_key(&w, keys[i], strlen(keys[i]));
        luna_json_write_string(&w, b ? b : "", b ? strlen(b) : 0);
        replace(&b, NULL);
    }
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    luna_error err = { 0 };
    if (!ok || luna_json_writer_finish(&w, &err) < 0) {
        luna_json_writer_free(&w);
        return fail(m, "writing the Secret: out of memory");
    }
    char *body = luna_json_writer_steal(&w, NULL);
    luna_json_writer_free(&w);
    char *p = secret_path(m, rv != NULL);
    if (!body || !p) {
        replace(&body, NULL);
        free(p);
        return fail(m, "out of memory");
    }
    request(m, rv ? STEP_UPDATE_SECRET : STEP_CREATE_SECRET, rv ? "PUT" : "POST", p, body, NULL);
    replace(&body, NULL);
    free(p);
}

/* Keeps the Secret's data (decoded PEM, any may be NULL) as far as it is
 * good and writes what changed; adopts it as is when nothing did. */
static void evaluate(struct luna_webhook_manager *m, const char *rv, char *tls_crt,
                     char *tls_key, char *ca_crt, char *ca_key)
{
    double now = (double)time(NULL);
    bool changed = false;
    luna_error err = { 0 };
    char *new_ca = NULL, *new_ca_key = NULL;
    bool ca_usable = ca_crt && ca_key && luna_serving_cert_check(ca_crt, ca_key, &err) == 0;
    double ca_due = ca_usable ? renewal_point(ca_crt) : 0;
    if (!ca_usable || now >= ca_due) {
        if (luna_ca_make("luna-webhook-ca", m->o.ca_validity, &new_ca, &new_ca_key, &err) < 0)
            goto oom;
        luna_info("managed webhook certificate: new CA", "why",
                  !ca_crt ? "none yet" : !ca_usable ? "the CA in the Secret is not usable"
                                                    : "2/3 of its life passed",
                  "secret", m->secret);
        char *bundle = luna_ca_bundle(new_ca, ca_crt, now, MAX_BUNDLE);
        if (!bundle)
            goto oom;
        replace(&ca_crt, bundle);
        replace(&ca_key, new_ca_key);
        new_ca_key = NULL;
        changed = true;
    } else {
        /* drop the CAs that expired */
        char *bundle = luna_ca_bundle(ca_crt, ca_crt, now, MAX_BUNDLE);
        if (!bundle)
            goto oom;
        if (strcmp(bundle, ca_crt) != 0) {
            changed = true;
            replace(&ca_crt, bundle);
        } else {
            free(bundle);
        }
    }
    const char *const *names = (const char *const *)m->names;
    bool serving_ok = tls_crt && tls_key && luna_serving_cert_check(tls_crt, tls_key, &err) == 0 &&
                      luna_cert_verifies(tls_crt, ca_crt) &&
                      luna_cert_names_all(tls_crt, names, m->o.nnames) &&
                      now < renewal_point(tls_crt);
    if (!serving_ok) {
        char *crt = NULL, *key = NULL;
        if (luna_ca_sign_serving(ca_crt, ca_key, names, m->o.nnames, m->o.cert_validity, &crt,
                                 &key, &err) < 0) {
            free(new_ca);
            replace(&new_ca_key, NULL);
            replace(&tls_crt, NULL);
            replace(&tls_key, NULL);
            replace(&ca_crt, NULL);
            replace(&ca_key, NULL);
            return fail(m, err.msg);
        }
        luna_info("managed webhook certificate: new serving certificate", "why",
                  !tls_crt ? "none yet" : "expiring, or for other names or another CA",
                  "secret", m->secret);
        replace(&tls_crt, crt);
        replace(&tls_key, key);
        changed = true;
    }
    free(new_ca);
    if (changed) {
        write_secret(m, rv, tls_crt, tls_key, ca_crt, ca_key);
        /* adopted once written: the write's answer brings us back */
        replace(&m->tls_crt, tls_crt);
        replace(&m->tls_key, tls_key);
        replace(&m->bundle, ca_crt);
        replace(&m->bundle_b64, NULL);
    } else {
        replace(&m->tls_crt, tls_crt);
        replace(&m->tls_key, tls_key);
        replace(&m->bundle, ca_crt);
        replace(&m->bundle_b64, NULL);
        m->config_i = 0;
        get_config(m);
    }
    replace(&ca_key, NULL);
    return;
oom:
    free(new_ca);
    replace(&new_ca_key, NULL);
    replace(&tls_crt, NULL);
    replace(&tls_key, NULL);
    replace(&ca_crt, NULL);
    replace(&ca_key, NULL);
    fail(m, "making the certificates: out of memory");
}

static char *secret_field(const luna_http_response *resp, const char *key)
{
    char *b64 = lookup_string(resp->body, resp->body_len, (const char *const[]){ "data", key }, 2);
    char *pem = b64 ? b64_decode(b64) : NULL;
    free(b64);
    return pem;
}

static void secret_read(struct luna_webhook_manager *m, const luna_http_response *resp)
{
    char *rv = lookup_string(resp->body, resp->body_len,
                             (const char *const[]){ "metadata", "resourceVersion" }, 2);
    if (!rv)
        return fail(m, "the Secret has no metadata.resourceVersion");
    evaluate(m, rv, secret_field(resp, "tls.crt"), secret_field(resp, "tls.key"),
             secret_field(resp, "ca.crt"), secret_field(resp, "ca.key"));
    free(rv);
}

/* ---- step 2: the webhook configurations ---------------------------------- */

static void next_config(struct luna_webhook_manager *m)
{
    if (++m->config_i < 2)
        return get_config(m);
    m->crd_i = 0;
    get_crd(m);
}

static void get_config(struct luna_webhook_manager *m)
{
    if (!m->bundle_b64) {
        replace(&m->bundle_b64, b64_encode(m->bundle));
        if (!m->bundle_b64)
            return fail(m, "out of memory");
    }
    char *p = config_path(m, true);
    if (!p)
        return fail(m, "out of memory");
    request(m, STEP_GET_CONFIG, "GET", p, NULL, NULL);
    free(p);
}

/* The configuration's body: entries (NULL: an empty list) under the
 * annotation naming their hash; rv NULL for a create. */
static char *config_body(struct luna_webhook_manager *m, const char *rv, const char *entries,
                         const char *hash)
{
    luna_json_writer w;
    luna_json_writer_init(&w);
    const char *kind = config_kinds[m->config_i];
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "apiVersion", 10);
    luna_json_write_string(&w, "admissionregistration.k8s.io/v1", 31);
    luna_json_write_key(&w, "kind", 4);
    luna_json_write_string(&w, kind, strlen(kind));
    luna_json_write_key(&w, "metadata", 8);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "name", 4);
    luna_json_write_string(&w, m->config, strlen(m->config));
    if (rv) {
        luna_json_write_key(&w, "resourceVersion", 15);
        luna_json_write_string(&w, rv, strlen(rv));
    }
    luna_json_write_key(&w, "labels", 6);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "app.kubernetes.io/managed-by", 28);
    luna_json_write_string(&w, "luna", 4);
    luna_json_write_object_end(&w);
    luna_json_write_key(&w, "annotations", 11);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, LUNA_WEBHOOK_HASH_ANNOTATION, strlen(LUNA_WEBHOOK_HASH_ANNOTATION));
    luna_json_write_string(&w, hash, strlen(hash));
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    luna_json_write_key(&w, "webhooks", 8);
    if (entries) {
        luna_json_write_raw(&w, entries, strlen(entries));
    } else {
        luna_json_write_array_start(&w);
        luna_json_write_array_end(&w);
    }
    luna_json_write_object_end(&w);
    luna_error err = { 0 };
    char *out = luna_json_writer_finish(&w, &err) == 0 ? luna_json_writer_steal(&w, NULL) : NULL;
    luna_json_writer_free(&w);
    return out;
}

static void config_read(struct luna_webhook_manager *m, const luna_http_response *resp)
{
    bool failed = false;
    char *entries = m->o.entries(m->o.ud, config_types[m->config_i], m->bundle_b64, &failed);
    if (failed)
        return fail(m, "the webhooks' registration entries: out of memory");
    char hash[65];
    sha256_hex(entries ? entries : "[]", hash);
    char *rv = NULL;
    if (resp->status == 200) {
        char *have = lookup_string(resp->body, resp->body_len,
                                   (const char *const[]){ "metadata", "annotations",
                                                          LUNA_WEBHOOK_HASH_ANNOTATION }, 3);
        bool same = have && strcmp(have, hash) == 0;
        free(have);
        /* what is registered, not only the annotation: a caBundle edited
         * by hand (or written by a replica with a newer CA) is seen */
        for (int i = 0; i < 4096; i++) {
            char idx[16];
            snprintf(idx, sizeof idx, "%d", i);
            char *name = lookup_string(resp->body, resp->body_len,
                                       (const char *const[]){ "webhooks", idx, "name" }, 3);
            if (!name)
                break;
            free(name);
            char *cab = lookup_string(resp->body, resp->body_len,
                                      (const char *const[]){ "webhooks", idx, "clientConfig",
                                                             "caBundle" }, 4);
            bool differs = !cab || strcmp(cab, m->bundle_b64) != 0;
            bool reread = differs && reread_for_newer(m, cab);
            free(cab);
            if (reread) {
                free(entries);
                return;
            }
            same = same && !differs;
        }
        if (same) {
            free(entries);
            return next_config(m);
        }
        rv = lookup_string(resp->body, resp->body_len,
                           (const char *const[]){ "metadata", "resourceVersion" }, 2);
        if (!rv) {
            free(entries);
            return fail(m, "a webhook configuration has no metadata.resourceVersion");
        }
    } else if (!entries) {
        return next_config(m); /* 404 and nothing to register */
    }
    replace(&m->body, config_body(m, rv, entries, hash));
    free(entries);
    char *p = config_path(m, rv != NULL);
    if (!m->body || !p) {
        free(rv);
        free(p);
        return fail(m, "out of memory");
    }
    request(m, STEP_WRITE_CONFIG, rv ? "PUT" : "POST", p, m->body, NULL);
    luna_info("managed webhook configuration written", "kind", config_kinds[m->config_i],
              "name", m->config, "verb", rv ? "update" : "create");
    free(rv);
    free(p);
}

/* ---- step 3: the CRDs' conversion caBundle ----------------------------- */

static void serve_and_finish(struct luna_webhook_manager *m);

static void get_crd(struct luna_webhook_manager *m)
{
    if (m->crd_i >= m->ncrds)
        return serve_and_finish(m);
    char *p = NULL;
    if (asprintf(&p, CRDS "%s", m->crds[m->crd_i]) < 0)
        return fail(m, "out of memory");
    request(m, STEP_GET_CRD, "GET", p, NULL, NULL);
    free(p);
}

/* A CRD whose converter luna runs gets its whole spec.conversion written
 * (strategy Webhook, clientConfig with caBundle), with the stanza's hash
 * in LUNA_CONVERSION_HASH_ANNOTATION so replicas do not rewrite it; a CRD
 * only named (--webhook-conversion-crds) keeps its stanza and gets the
 * caBundle, when it converts by webhook. */
static void crd_read(struct luna_webhook_manager *m, const luna_http_response *resp)
{
    const char *name = m->crds[m->crd_i];
    bool failed = false;
    char *stanza = m->o.conversion ? m->o.conversion(m->o.ud, name, m->bundle_b64, &failed) : NULL;
    if (failed)
        return fail(m, "the converters' conversion stanza: out of memory");
    char *body = NULL, *p = NULL;
    if (stanza) {
        char hash[65];
        sha256_hex(stanza, hash);
        char *have = lookup_string(resp->body, resp->body_len,
                                   (const char *const[]){ "metadata", "annotations",
                                                          LUNA_CONVERSION_HASH_ANNOTATION }, 3);
        char *strategy = lookup_string(resp->body, resp->body_len,
                                       (const char *const[]){ "spec", "conversion", "strategy" }, 3);
        char *live = lookup_string(resp->body, resp->body_len,
                                   (const char *const[]){ "spec", "conversion", "webhook",
                                                          "clientConfig", "caBundle" }, 5);
        bool same = have && strcmp(have, hash) == 0 && strategy &&
                    strcmp(strategy, "Webhook") == 0 && live && strcmp(live, m->bundle_b64) == 0;
        bool reread = !same && live && reread_for_newer(m, live);
        free(have);
        free(strategy);
        free(live);
        if (reread) {
            free(stanza);
            return;
        }
        if (same) {
            free(stanza);
            m->crd_i++;
            return get_crd(m);
        }
        int w = asprintf(&body, "{\"metadata\":{\"annotations\":{\"%s\":\"%s\"}},"
                                "\"spec\":{\"conversion\":%s}}",
                         LUNA_CONVERSION_HASH_ANNOTATION, hash, stanza);
        free(stanza);
        if (w < 0) {
            body = NULL;
            return fail(m, "out of memory");
        }
        luna_info("managed webhook conversion written", "crd", name);
    } else {
        char *strategy = lookup_string(resp->body, resp->body_len,
                                       (const char *const[]){ "spec", "conversion", "strategy" }, 3);
        char *have = lookup_string(resp->body, resp->body_len,
                                   (const char *const[]){ "spec", "conversion", "webhook",
                                                          "clientConfig", "caBundle" }, 5);
        bool webhook = strategy && strcmp(strategy, "Webhook") == 0;
        bool same = have && strcmp(have, m->bundle_b64) == 0;
        bool reread = webhook && !same && have && reread_for_newer(m, have);
        free(strategy);
        free(have);
        if (reread)
            return;
        if (!webhook) {
            skip_crd(m, "its spec.conversion.strategy is not Webhook");
            m->crd_i++;
            return get_crd(m);
        }
        if (same) {
            m->crd_i++;
            return get_crd(m);
        }
        if (asprintf(&body, "{\"spec\":{\"conversion\":{\"webhook\":{\"clientConfig\":"
                            "{\"caBundle\":\"%s\"}}}}}", m->bundle_b64) < 0) {
            body = NULL;
            return fail(m, "out of memory");
        }
        luna_info("managed webhook certificate: CRD caBundle patched", "crd", name);
    }
    if (asprintf(&p, CRDS "%s", name) < 0) {
        free(body);
        return fail(m, "out of memory");
    }
    request(m, STEP_PATCH_CRD, "PATCH", p, body, "application/merge-patch+json");
    free(body);
    free(p);
}

/* ---- step 4 ---------------------------------------------------------------- */

static void serve_and_finish(struct luna_webhook_manager *m)
{
    if (!m->served_crt || strcmp(m->served_crt, m->tls_crt) != 0) {
        luna_error err = { 0 };
        if (m->o.serve && m->o.serve(m->o.ud, m->tls_crt, m->tls_key, &err) < 0) {
            char msg[1200];
            snprintf(msg, sizeof msg, "serving the certificate: %s", err.msg);
            return fail(m, msg);
        }
        replace(&m->served_crt, strdup(m->tls_crt));
        double nb = 0, na = 0;
        luna_cert_validity(m->tls_crt, &nb, &na);
        char until[32];
        struct tm tm;
        time_t t = (time_t)na;
        strftime(until, sizeof until, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
        char cas[16];
        snprintf(cas, sizeof cas, "%zu", luna_cert_count(m->bundle));
        luna_info("managed webhook certificate served", "secret", m->secret, "not_after", until,
                  LUNA_LOG_NUM("cas"), cas);
    }
    m->ever_ready = true;
    m->backoff = 0;
    m->last_error[0] = '\0';
    if (m->o.ready)
        m->o.ready(m->o.ud, true, NULL);
    double now = (double)time(NULL), next = resync(m);
    double points[2] = { renewal_point(m->tls_crt), renewal_point(m->bundle) };
    for (int i = 0; i < 2; i++)
        if (points[i] > 0 && points[i] - now < next)
            next = points[i] - now;
    end_sync(m, next);
}

/* ---- the answers ----------------------------------------------------------- */

/* A CRD that cannot be read or patched (RBAC narrowed to some CRDs, a
 * CRD the API server refuses to change) is skipped with the reason, as a
 * missing one is: the configurations are written and a renewed pair is
 * served whatever one CRD does; the next sync tries it again. */
static void crd_failed(struct luna_webhook_manager *m, const char *what,
                       const luna_http_response *resp, const luna_http_failure *f)
{
    char msg[1200];
    describe_response(msg, sizeof msg, what, resp, f);
    skip_crd(m, msg);
    m->crd_i++;
    get_crd(m);
}

static void on_done(void *ud, const luna_http_response *resp, const luna_http_failure *f)
{
    struct luna_webhook_manager *m = ud;
    m->req = NULL;
    long st = f ? 0 : resp->status;
    char what[400];
    switch (m->step) {
    case STEP_GET_SECRET:
        snprintf(what, sizeof what, "get Secret %s/%s", m->ns, m->secret);
        if (st == 200)
            return secret_read(m, resp);
        if (st == 404)
            return evaluate(m, NULL, NULL, NULL, NULL, NULL);
        return fail_response(m, what, resp, f);
    case STEP_CREATE_SECRET:
    case STEP_UPDATE_SECRET:
        snprintf(what, sizeof what, "%s Secret %s/%s",
                 m->step == STEP_CREATE_SECRET ? "create" : "update", m->ns, m->secret);
        if (st == 200 || st == 201) {
            luna_info("managed webhook certificate: Secret written", "secret", m->secret,
                      "verb", m->step == STEP_CREATE_SECRET ? "create" : "update");
            m->config_i = 0;
            return get_config(m);
        }
        if (st == 409) /* another replica wrote it first: use theirs */
            return conflict(m, what, resp);
        return fail_response(m, what, resp, f);
    case STEP_GET_CONFIG:
        snprintf(what, sizeof what, "get %s %s", config_kinds[m->config_i], m->config);
        if (st == 200 || st == 404)
            return config_read(m, resp);
        return fail_response(m, what, resp, f);
    case STEP_WRITE_CONFIG:
        snprintf(what, sizeof what, "write %s %s", config_kinds[m->config_i], m->config);
        if (st == 200 || st == 201)
            return next_config(m);
        if (st == 409)
            return conflict(m, what, resp);
        return fail_response(m, what, resp, f);
    case STEP_GET_CRD:
        snprintf(what, sizeof what, "get CustomResourceDefinition %s", m->crds[m->crd_i]);
        if (st == 200)
            return crd_read(m, resp);
        if (st == 404) {
            skip_crd(m, "not found");
            m->crd_i++;
            return get_crd(m);
        }
        return crd_failed(m, what, resp, f);
    case STEP_PATCH_CRD:
        snprintf(what, sizeof what, "patch CustomResourceDefinition %s", m->crds[m->crd_i]);
        if (st == 200) {
            m->crd_i++;
            return get_crd(m);
        }
        return crd_failed(m, what, resp, f);
    case STEP_NONE:
        break;
    }
}

/* ---- life ------------------------------------------------------------------- */

static void free_list(char **l, size_t n)
{
    for (size_t i = 0; l && i < n; i++)
        free(l[i]);
    free(l);
}

static char **copy_list(const char *const *l, size_t n)
{
    char **out = calloc(n ? n : 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(l[i]))) {
            free_list(out, i);
            return NULL;
        }
    return out;
}

int luna_webhook_manager_start(const struct luna_webhook_manager_options *o,
                               struct luna_webhook_manager **out, luna_error *err)
{
    *out = NULL;
    if (!o->kc || !o->namespace_ || !o->secret_name || !o->configuration_name || !o->entries ||
        o->nnames == 0 || o->cert_validity < 1 || o->ca_validity < o->cert_validity)
        return luna_error_set(err, LUNA_EINVAL, "managed webhook certificate: bad options");
    struct luna_webhook_manager *m = calloc(1, sizeof *m);
    if (!m)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    m->o = *o;
    m->ns = strdup(o->namespace_);
    m->secret = strdup(o->secret_name);
    m->config = strdup(o->configuration_name);
    m->names = copy_list(o->names, o->nnames);
    m->crds = copy_list(NULL, 0);
    if (!m->ns || !m->secret || !m->config || !m->names || !m->crds) {
        luna_webhook_manager_free(m);
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    }
    m->o.names = (const char *const *)m->names;
    ev_timer_init(&m->timer, timer_cb, 0., 0.);
    m->timer.data = m;
    start_sync(m);
    *out = m;
    return 0;
}

void luna_webhook_manager_sync(struct luna_webhook_manager *m)
{
    if (m)
        start_sync(m);
}

int luna_webhook_manager_set_crds(struct luna_webhook_manager *m, const char *const *names,
                                  size_t n)
{
    /* against the list that will be in force: a parked one, else crds */
    char **have = m->crds_parked ? m->next_crds : m->crds;
    size_t nhave = m->crds_parked ? m->nnext_crds : m->ncrds;
    bool same = n == nhave;
    for (size_t i = 0; same && i < n; i++)
        same = strcmp(names[i], have[i]) == 0;
    if (same)
        return 0;
    char **copy = copy_list(names, n);
    if (!copy)
        return LUNA_ENOMEM;
    if (m->step == STEP_GET_CRD || m->step == STEP_PATCH_CRD) {
        /* the sync in flight is reading crds[crd_i]: the new list waits
         * for its end, and a sync follows */
        if (m->crds_parked)
            free_list(m->next_crds, m->nnext_crds);
        m->next_crds = copy;
        m->nnext_crds = n;
        m->crds_parked = true;
        m->again = true;
        return 0;
    }
    free_list(m->crds, m->ncrds);
    m->crds = copy;
    m->ncrds = n;
    start_sync(m);
    return 0;
}

static void install_parked_crds(struct luna_webhook_manager *m)
{
    if (!m->crds_parked)
        return;
    free_list(m->crds, m->ncrds);
    m->crds = m->next_crds;
    m->ncrds = m->nnext_crds;
    m->next_crds = NULL;
    m->nnext_crds = 0;
    m->crds_parked = false;
}

void luna_webhook_manager_free(struct luna_webhook_manager *m)
{
    if (!m)
        return;
    if (m->req)
        luna_kube_request_cancel(m->req);
    ev_timer_stop(luna_loop(), &m->timer);
    free(m->ns);
    free(m->secret);
    free(m->config);
    free_list(m->names, m->o.nnames);
    free_list(m->crds, m->ncrds);
    if (m->crds_parked)
        free_list(m->next_crds, m->nnext_crds);
    replace(&m->body, NULL);
    replace(&m->tls_crt, NULL);
    replace(&m->tls_key, NULL);
    replace(&m->bundle, NULL);
    replace(&m->bundle_b64, NULL);
    replace(&m->served_crt, NULL);
    free(m);
}
