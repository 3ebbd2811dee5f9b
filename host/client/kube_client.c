/* kube_client.c — see kube_client.h. */
#include "client/kube_client.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

struct luna_kube_client {
    struct luna_kubeconfig *cfg;
    luna_http_client *http;
    struct luna_kube_request *live;  /* doubly linked list of live requests */
    luna_kube_observer_fn observer;
    void *observer_ud;
};

struct luna_kube_request {
    struct luna_kube_client *kc;
    struct luna_kube_request *prev, *next;
    luna_http_request *http;
    struct luna_kube_request_options o;  /* strings below are owned copies */
    char *method, *path, *body, *content_type, *accept;
    unsigned generation;  /* credentials generation of the current attempt */
    int attempt;
    bool retry_auth;      /* the current attempt got a 401 worth retrying */
};

static void unlink_request(struct luna_kube_request *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        r->kc->live = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void request_free(struct luna_kube_request *r)
{
    free(r->method);
    free(r->path);
    free(r->body);
    free(r->content_type);
    free(r->accept);
    free(r);
}

int luna_kube_client_new(struct luna_kubeconfig *cfg, luna_http_client *http,
                         struct luna_kube_client **out, luna_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    (*out)->cfg = cfg;
    (*out)->http = http;
    return 0;
}

void luna_kube_client_free(struct luna_kube_client *kc)
{
    if (!kc)
        return;
    while (kc->live) {
        struct luna_kube_request *r = kc->live;
        unlink_request(r);
        if (r->http)
            luna_http_request_cancel(r->http);
        request_free(r);
    }
    free(kc);
}


void luna_kube_client_set_observer(struct luna_kube_client *kc, luna_kube_observer_fn fn,
                                   void *ud)
{
    kc->observer = fn;
    kc->observer_ud = ud;
}

static bool refreshable(const struct luna_kubeconfig *cfg)
{
    return cfg->auth == LUNA_AUTH_EXEC || cfg->auth == LUNA_AUTH_TOKEN_FILE;
}

static int on_headers(luna_http_request *req, const luna_http_response *resp, void *ud,
                      luna_error *err)
{
    struct luna_kube_request *r = ud;
    if (resp->status == 401 && r->attempt == 0 && refreshable(r->kc->cfg)) {
        r->retry_auth = true;
        return luna_error_set(err, LUNA_ECANCELED, "unauthorized: refreshing credentials");
    }
    return r->o.on_headers ? r->o.on_headers(r->o.ud, resp, err) : 0;
}

static int on_chunk(luna_http_request *req, const char *data, size_t len, void *ud,
                    luna_error *err)
{
    struct luna_kube_request *r = ud;
    return r->o.on_chunk(r->o.ud, data, len, err);
}

static int on_line(luna_http_request *req, const char *data, size_t len, void *ud,
                   luna_error *err)
{
    struct luna_kube_request *r = ud;
    return r->o.on_line(r->o.ud, data, len, err);
}

static int send_attempt(struct luna_kube_request *r, luna_error *err);

static void on_done(luna_http_request *req, const luna_http_response *resp,
                    const luna_http_failure *fail, void *ud)
{
    struct luna_kube_request *r = ud;
    r->http = NULL;
    if (r->kc->observer)
        r->kc->observer(r->kc->observer_ud, resp->status > 0 ? (int)resp->status : 0, r->method);
    if (r->retry_auth) {
        r->retry_auth = false;
        r->attempt++;
        luna_kubeconfig_invalidate(r->kc->cfg, r->generation);
        luna_error err;
        if (send_attempt(r, &err) == 0)
            return;
        luna_http_failure f = { .reason = LUNA_HTTP_INVALID, .err = err };
        luna_http_response none = { 0 };
        unlink_request(r);
        if (r->o.on_done)
            r->o.on_done(r->o.ud, &none, &f);
        request_free(r);
        return;
    }
    unlink_request(r);
    if (r->o.on_done)
        r->o.on_done(r->o.ud, resp, fail);
    request_free(r);
}

/* "Basic base64(user:password)" for basic auth, into a heap string. */
static char *basic_auth(const char *user, const char *password)
{
    size_t plain_len = strlen(user) + 1 + strlen(password);
    unsigned char *plain = malloc(plain_len + 1);
    char *out = malloc(6 + 4 * ((plain_len + 2) / 3) + 1);
    if (!plain || !out) {
        free(plain);
        free(out);
        return NULL;
    }
    snprintf((char *)plain, plain_len + 1, "%s:%s", user, password);
    memcpy(out, "Basic ", 6);
    EVP_EncodeBlock((unsigned char *)out + 6, plain, (int)plain_len);
    OPENSSL_cleanse(plain, plain_len);
    free(plain);
    return out;
}

static int send_attempt(struct luna_kube_request *r, luna_error *err)
{
    struct luna_kube_client *kc = r->kc;
    struct luna_kubeconfig *cfg = kc->cfg;
    struct luna_credentials cred;
    int rc = luna_kubeconfig_credentials(cfg, &cred, err);
    if (rc < 0)
        return rc;
    r->generation = cred.generation;

    size_t url_len = strlen(cfg->server) + strlen(r->path) + 1;
    char *url = malloc(url_len);
    if (!url)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    snprintf(url, url_len, "%s%s", cfg->server, r->path);

    char *authorization = NULL;
    luna_http_header headers[4];
    size_t nh = 0;
    headers[nh++] = (luna_http_header){ "Accept", r->accept };
    headers[nh++] = (luna_http_header){ "User-Agent", "luna/" LUNA_VERSION };
    if (r->body)
        headers[nh++] = (luna_http_header){ "Content-Type", r->content_type };
    if (!cred.token && cred.username) {
        authorization = basic_auth(cred.username, cred.password ? cred.password : "");
        if (!authorization) {
            free(url);
            return luna_error_set(err, LUNA_ENOMEM, "out of memory");
        }
        headers[nh++] = (luna_http_header){ "Authorization", authorization };
    }

    luna_http_options ho = {
        .method = r->method,
        .url = url,
        .headers = headers,
        .nheaders = nh,
        .body = r->body,
        .body_len = r->o.body_len,
        /* r->body outlives every attempt (freed after on_done or cancel):
         * one copy of a request body in C, not two */
        .body_borrowed = true,
        .bearer_token = cred.token,
        .timeout = r->o.timeout,
        .idle_timeout = r->o.idle_timeout,
        .max_response_bytes = r->o.max_response_bytes,
        .max_line_bytes = r->o.max_line_bytes,
        .on_headers = on_headers,
        .on_chunk = r->o.on_chunk ? on_chunk : NULL,
        .on_line = r->o.on_line ? on_line : NULL,
        .on_done = on_done,
        .ud = r,
    };
    ho.tls.ca_file = cfg->ca_file;
    ho.tls.ca_pem = (const char *)cfg->ca_data;
    ho.tls.ca_pem_len = cfg->ca_data_len;
    ho.tls.cert_file = cred.client_cert_file;
    ho.tls.cert_pem = (const char *)cred.client_cert_data;
    ho.tls.cert_pem_len = cred.client_cert_data_len;
    ho.tls.key_file = cred.client_key_file;
    ho.tls.key_pem = (const char *)cred.client_key_data;
    ho.tls.key_pem_len = cred.client_key_data_len;
    ho.tls.insecure_skip_verify = cfg->insecure;
    ho.tls.server_name = cfg->tls_server_name;
    ho.proxy = cfg->proxy_url;

    enum luna_http_reason reason;
    r->http = luna_http_request_start(kc->http, &ho, &reason, err);
    if (authorization) {
        OPENSSL_cleanse(authorization, strlen(authorization));
        free(authorization);
    }
    free(url);
    if (!r->http)
        return err ? err->code : LUNA_EINVAL;
    return 0;
}

static char *dup_or_null(const char *s, size_t len)
{
    if (!s)
        return NULL;
    char *out = malloc(len + 1);
    if (out) {
        memcpy(out, s, len);
        out[len] = '\0';
    }
    return out;
}

struct luna_kube_request *luna_kube_request_start(struct luna_kube_client *kc,
                                                  const struct luna_kube_request_options *o,
                                                  luna_error *err)
{
    if (!o->path || o->path[0] != '/') {
        luna_error_set(err, LUNA_EINVAL, "request path must start with '/'");
        return NULL;
    }
    /* refused before the copy, not after (the HTTP client would refuse it) */
    if (o->body && o->body_len > LUNA_HTTP_DEFAULT_MAX_REQUEST) {
        luna_error_set(err, LUNA_ETOOBIG, "request body of %zu bytes exceeds %u bytes",
                       o->body_len, LUNA_HTTP_DEFAULT_MAX_REQUEST);
        return NULL;
    }
    struct luna_kube_request *r = calloc(1, sizeof *r);
    if (!r) {
        luna_error_set(err, LUNA_ENOMEM, "out of memory");
        return NULL;
    }
    r->kc = kc;
    r->o = *o;
    const char *method = o->method ? o->method : "GET";
    r->method = strdup(method);
    r->path = strdup(o->path);
    r->body = dup_or_null(o->body, o->body_len);
    r->content_type = strdup(o->content_type ? o->content_type : "application/json");
    r->accept = strdup(o->accept ? o->accept : "application/json");
    if (!r->method || !r->path || !r->content_type || !r->accept || (o->body && !r->body)) {
        request_free(r);
        luna_error_set(err, LUNA_ENOMEM, "out of memory");
        return NULL;
    }
    if (send_attempt(r, err) < 0) {
        request_free(r);
        return NULL;
    }
    r->next = kc->live;
    if (kc->live)
        kc->live->prev = r;
    kc->live = r;
    return r;
}

void luna_kube_request_cancel(struct luna_kube_request *r)
{
    if (!r)
        return;
    unlink_request(r);
    if (r->http)
        luna_http_request_cancel(r->http);
    request_free(r);
}
