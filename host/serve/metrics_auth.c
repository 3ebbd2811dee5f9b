/* metrics_auth.c — see metrics_auth.h. */
#include "serve/metrics_auth.h"

#include <math.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uthash.h>

#include "base/backoff.h"
#include "base/json_writer.h"
#include "base/log.h"

#define TOKEN_REVIEW_PATH "/apis/authentication.k8s.io/v1/tokenreviews"
#define ACCESS_REVIEW_PATH "/apis/authorization.k8s.io/v1/subjectaccessreviews"
#define MAX_ATTEMPTS 5
#define RETRY_FACTOR 1.5
#define RETRY_JITTER 0.2
#define MAX_REVIEW_BYTES (256 * 1024)
#define MAX_FIELD 4096

/* One cached answer, keyed by a SHA-256: of the token (token cache) or of
 * the user and the request (access cache). */
struct entry {
    unsigned char key[32];
    double expires;
    bool yes;                 /* authenticated / allowed */
    char *username, *uid;     /* token cache, authenticated: owned */
    char *groups, *extra;     /* raw JSON array / object, owned, or NULL */
    UT_hash_handle hh;
};

struct cache {
    struct entry *map;        /* in insertion order (uthash keeps it) */
    size_t max;
};

struct user {
    char *username, *uid, *groups, *extra; /* owned; uid/groups/extra may be NULL */
};

enum step { STEP_TOKEN, STEP_ACCESS };

struct luna_metrics_auth_check {
    struct luna_metrics_auth *a;
    struct luna_metrics_auth_check *prev, *next; /* the pending list */
    enum step step;
    unsigned char token_key[32];
    char *token;              /* owned until the token review is answered */
    char *verb, *path;
    unsigned char access_key[32];
    struct user user;
    struct luna_kube_request *req;
    ev_timer retry;           /* armed between attempts */
    struct luna_backoff backoff;
    int attempts;             /* of the current step */
    luna_metrics_auth_fn done;
    void *ud;
};

struct luna_metrics_auth {
    struct luna_kube_client *kc;
    struct ev_loop *loop;
    const struct luna_clock *clock;
    double token_ttl, allow_ttl, deny_ttl, timeout, retry_base;
    size_t max_in_flight;
    struct cache tokens, access;
    struct luna_metrics_auth_check *pending;
    size_t in_flight;
    struct luna_metrics_auth_stats stats;
};

int luna_metrics_auth_status(enum luna_metrics_auth_decision d)
{
    switch (d) {
    case LUNA_METRICS_AUTH_ALLOW: return 200;
    case LUNA_METRICS_AUTH_UNAUTHENTICATED: return 401;
    case LUNA_METRICS_AUTH_FORBIDDEN: return 403;
    case LUNA_METRICS_AUTH_BUSY: return 503;
    case LUNA_METRICS_AUTH_ERROR:
    case LUNA_METRICS_AUTH_PENDING: break;
    }
    return 500;
}

const char *luna_metrics_auth_decision_name(enum luna_metrics_auth_decision d)
{
    switch (d) {
    case LUNA_METRICS_AUTH_ALLOW: return "allow";
    case LUNA_METRICS_AUTH_UNAUTHENTICATED: return "unauthenticated";
    case LUNA_METRICS_AUTH_FORBIDDEN: return "forbidden";
    case LUNA_METRICS_AUTH_ERROR: return "error";
    case LUNA_METRICS_AUTH_BUSY: return "busy";
    case LUNA_METRICS_AUTH_PENDING: return "pending";
    }
    return "?";
}

/* ---- caches ----------------------------------------------------------------- */

static void entry_free(struct entry *e)
{
    free(e->username);
    free(e->uid);
    free(e->groups);
    free(e->extra);
    free(e);
}

static void cache_clear(struct cache *c)
{
    struct entry *e, *tmp;
    HASH_ITER(hh, c->map, e, tmp) {
        HASH_DEL(c->map, e);
        entry_free(e);
    }
}

/* The live entry under key, or NULL (an expired one is dropped). */
static struct entry *cache_get(struct cache *c, const unsigned char key[32], double now)
{
    struct entry *e;
    HASH_FIND(hh, c->map, key, 32, e);
    if (e && e->expires <= now) {
        HASH_DEL(c->map, e);
        entry_free(e);
        e = NULL;
    }
    return e;
}

/* Takes e; replaces an entry with its key; keeps the cache within max. */
static void cache_put(struct cache *c, struct entry *e, double now)
{
    struct entry *old, *tmp;
    HASH_FIND(hh, c->map, e->key, 32, old);
    if (old) {
        HASH_DEL(c->map, old);
        entry_free(old);
    }
    if (HASH_COUNT(c->map) >= c->max) {
        HASH_ITER(hh, c->map, old, tmp) {
            if (old->expires <= now) {
                HASH_DEL(c->map, old);
                entry_free(old);
            }
        }
    }
    while (c->map && HASH_COUNT(c->map) >= c->max) { /* the oldest first */
        old = c->map;
        HASH_DEL(c->map, old);
        entry_free(old);
    }
    HASH_ADD(hh, c->map, key, 32, e);
}

static void sha256(unsigned char out[32], const void *data, size_t len)
{
    unsigned int n = 32;
    if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL))
        memset(out, 0, 32);
}

/* SHA-256 over NUL-separated fields (NULL counts as absent, not empty). */
static void key_of(unsigned char out[32], const char *const *fields, size_t n)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int len = 32;
    if (!ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        EVP_MD_CTX_free(ctx);
        memset(out, 0, 32);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *f = fields[i] ? fields[i] : "";
        unsigned char tag = fields[i] ? 1 : 0;
        EVP_DigestUpdate(ctx, &tag, 1);
        EVP_DigestUpdate(ctx, f, strlen(f) + 1);
    }
    EVP_DigestFinal_ex(ctx, out, &len);
    EVP_MD_CTX_free(ctx);
}

/* ---- checks ----------------------------------------------------------------- */

static void user_free(struct user *u)
{
    free(u->username);
    free(u->uid);
    free(u->groups);
    free(u->extra);
    memset(u, 0, sizeof *u);
}

static void wipe_token(struct luna_metrics_auth_check *c)
{
    if (c->token) {
        memset(c->token, 0, strlen(c->token));
        free(c->token);
        c->token = NULL;
    }
}

static void check_free(struct luna_metrics_auth_check *c)
{
    struct luna_metrics_auth *a = c->a;
    if (c->req)
        luna_kube_request_cancel(c->req);
    ev_timer_stop(a->loop, &c->retry);
    if (c->prev)
        c->prev->next = c->next;
    else
        a->pending = c->next;
    if (c->next)
        c->next->prev = c->prev;
    a->in_flight--;
    wipe_token(c);
    free(c->verb);
    free(c->path);
    user_free(&c->user);
    free(c);
}

/* Ends a pending check: the callback, then the check is gone. */
static void finish(struct luna_metrics_auth_check *c, enum luna_metrics_auth_decision d)
{
    luna_metrics_auth_fn done = c->done;
    void *ud = c->ud;
    char user[256];
    snprintf(user, sizeof user, "%s", c->user.username ? c->user.username : "");
    check_free(c);
    done(ud, d, user);
}

static int start_request(struct luna_metrics_auth_check *c, luna_error *err);

static void retry_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct luna_metrics_auth_check *c = w->data;
    luna_error err = { 0 };
    if (start_request(c, &err) < 0) {
        luna_warn("metrics authorization failed", "error", err.msg);
        finish(c, LUNA_METRICS_AUTH_ERROR);
    }
}

/* The review could not be answered: retry with backoff, or give up. */
static void failed(struct luna_metrics_auth_check *c, const char *why)
{
    struct luna_metrics_auth *a = c->a;
    const char *what = c->step == STEP_TOKEN ? "TokenReview" : "SubjectAccessReview";
    if (c->attempts >= MAX_ATTEMPTS) {
        luna_warn("metrics authorization failed", "review", what, LUNA_LOG_NUM("attempts"), "5",
                  "error", why);
        finish(c, LUNA_METRICS_AUTH_ERROR);
        return;
    }
    double delay = luna_backoff_next(&c->backoff, luna_clock_now(a->clock));
    luna_debug("metrics authorization retry", "review", what, "error", why);
    ev_timer_set(&c->retry, delay, 0.);
    ev_timer_start(a->loop, &c->retry);
}

/* Copies the string at path (NULL if absent or not a string); false on a
 * malformed document or a value too long. */
static bool lookup_string(const char *json, size_t len, const char *path, char **out)
{
    char buf[MAX_FIELD];
    luna_json_value v;
    *out = NULL;
    int rc = luna_json_lookup(json, len, path, &v, buf, sizeof buf, NULL);
    if (rc == LUNA_ENOTFOUND || (rc == 0 && v.type == LUNA_JSON_NULL))
        return true;
    if (rc < 0 || v.type != LUNA_JSON_STRING)
        return false;
    return (*out = strndup(buf, v.len)) != NULL;
}

/* Copies the raw JSON of the array/object at path (NULL if absent). */
static bool lookup_raw(const char *json, size_t len, const char *path,
                       enum luna_json_event_type want, char **out)
{
    char buf[MAX_FIELD];
    luna_json_value v;
    *out = NULL;
    int rc = luna_json_lookup(json, len, path, &v, buf, sizeof buf, NULL);
    if (rc == LUNA_ENOTFOUND || (rc == 0 && v.type == LUNA_JSON_NULL))
        return true;
    if (rc < 0 || v.type != want || v.end > len || v.end - v.start > MAX_REVIEW_BYTES)
        return false;
    return (*out = strndup(json + v.start, (size_t)(v.end - v.start))) != NULL;
}

/* status.<field> as a boolean: 1 true, 0 false or absent, -1 malformed. */
static int lookup_bool(const char *json, size_t len, const char *path)
{
    char buf[64];
    luna_json_value v;
    int rc = luna_json_lookup(json, len, path, &v, buf, sizeof buf, NULL);
    if (rc == LUNA_ENOTFOUND)
        return 0;
    if (rc < 0)
        return -1;
    if (v.type == LUNA_JSON_TRUE)
        return 1;
    return v.type == LUNA_JSON_FALSE || v.type == LUNA_JSON_NULL ? 0 : -1;
}

static void go_access(struct luna_metrics_auth_check *c);

static void token_answered(struct luna_metrics_auth_check *c, const char *body, size_t len)
{
    struct luna_metrics_auth *a = c->a;
    int authenticated = lookup_bool(body, len, "status.authenticated");
    struct user u = { 0 };
    if (authenticated < 0 ||
        (authenticated == 1 &&
         (!lookup_string(body, len, "status.user.username", &u.username) ||
          !lookup_string(body, len, "status.user.uid", &u.uid) ||
          !lookup_raw(body, len, "status.user.groups", LUNA_JSON_ARRAY_START, &u.groups) ||
          !lookup_raw(body, len, "status.user.extra", LUNA_JSON_OBJECT_START, &u.extra)))) {
        user_free(&u);
        failed(c, "TokenReview: malformed answer");
        return;
    }
    if (authenticated == 1 && (!u.username || !*u.username))
        authenticated = 0; /* no user to authorize */
    wipe_token(c);
    struct entry *e = calloc(1, sizeof *e);
    if (e) {
        memcpy(e->key, c->token_key, 32);
        e->expires = luna_clock_now(a->clock) + a->token_ttl;
        e->yes = authenticated == 1;
        if (e->yes && (!(e->username = strdup(u.username)) ||
                       (u.uid && !(e->uid = strdup(u.uid))) ||
                       (u.groups && !(e->groups = strdup(u.groups))) ||
                       (u.extra && !(e->extra = strdup(u.extra))))) {
            entry_free(e);
            e = NULL;
        }
        if (e)
            cache_put(&a->tokens, e, luna_clock_now(a->clock));
    }
    if (authenticated != 1) {
        user_free(&u);
        finish(c, LUNA_METRICS_AUTH_UNAUTHENTICATED);
        return;
    }
    c->user = u;
    go_access(c);
}

static void access_answered(struct luna_metrics_auth_check *c, const char *body, size_t len)
{
    struct luna_metrics_auth *a = c->a;
    int allowed = lookup_bool(body, len, "status.allowed");
    if (allowed < 0) {
        failed(c, "SubjectAccessReview: malformed answer");
        return;
    }
    struct entry *e = calloc(1, sizeof *e);
    if (e) {
        memcpy(e->key, c->access_key, 32);
        e->yes = allowed == 1;
        e->expires = luna_clock_now(a->clock) + (e->yes ? a->allow_ttl : a->deny_ttl);
        cache_put(&a->access, e, luna_clock_now(a->clock));
    }
    if (allowed != 1) {
        char *reason = NULL;
        lookup_string(body, len, "status.reason", &reason);
        luna_debug("metrics scrape forbidden", "user", c->user.username,
                   "reason", reason ? reason : "");
        free(reason);
    }
    finish(c, allowed == 1 ? LUNA_METRICS_AUTH_ALLOW : LUNA_METRICS_AUTH_FORBIDDEN);
}

static void on_done(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct luna_metrics_auth_check *c = ud;
    c->req = NULL;
    char why[sizeof fail->err.msg + 64];
    const char *what = c->step == STEP_TOKEN ? "TokenReview" : "SubjectAccessReview";
    if (fail) {
        snprintf(why, sizeof why, "%s: %s", what, fail->err.msg);
        failed(c, why);
        return;
    }
    if (resp->status != 200 && resp->status != 201) {
        if (resp->status == 429 || resp->status >= 500) {
            snprintf(why, sizeof why, "%s: HTTP %ld", what, resp->status);
            failed(c, why);
            return;
        }
        /* 401/403: luna's own credentials or RBAC; retrying cannot help. */
        char code[24];
        snprintf(code, sizeof code, "%ld", resp->status);
        luna_warn("metrics authorization failed", "review", what, LUNA_LOG_NUM("status"), code,
                  "hint",
                  resp->status == 403 ? "luna's service account needs create on " "tokenreviews and subjectaccessreviews" : "");
        finish(c, LUNA_METRICS_AUTH_ERROR);
        return;
    }
    if (c->step == STEP_TOKEN)
        token_answered(c, resp->body ? resp->body : "", resp->body_len);
    else
        access_answered(c, resp->body ? resp->body : "", resp->body_len);
}

static int token_review_body(const char *token, char **out, size_t *len, luna_error *err)
{
    luna_json_writer w;
    luna_json_writer_init(&w);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "apiVersion", 10);
    luna_json_write_string(&w, "authentication.k8s.io/v1", 24);
    luna_json_write_key(&w, "kind", 4);
    luna_json_write_string(&w, "TokenReview", 11);
    luna_json_write_key(&w, "spec", 4);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "token", 5);
    luna_json_write_string(&w, token, strlen(token));
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    int rc = luna_json_writer_finish(&w, err);
    if (rc == 0 && !(*out = luna_json_writer_steal(&w, len)))
        rc = luna_error_set(err, LUNA_ENOMEM, "out of memory");
    if (w.buf)
        memset(w.buf, 0, w.len); /* the token */
    luna_json_writer_free(&w);
    return rc;
}

static int access_review_body(const struct luna_metrics_auth_check *c, char **out, size_t *len,
                              luna_error *err)
{
    luna_json_writer w;
    luna_json_writer_init(&w);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "apiVersion", 10);
    luna_json_write_string(&w, "authorization.k8s.io/v1", 23);
    luna_json_write_key(&w, "kind", 4);
    luna_json_write_string(&w, "SubjectAccessReview", 19);
    luna_json_write_key(&w, "spec", 4);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "nonResourceAttributes", 21);
    luna_json_write_object_start(&w);
    luna_json_write_key(&w, "path", 4);
    luna_json_write_string(&w, c->path, strlen(c->path));
    luna_json_write_key(&w, "verb", 4);
    luna_json_write_string(&w, c->verb, strlen(c->verb));
    luna_json_write_object_end(&w);
    luna_json_write_key(&w, "user", 4);
    luna_json_write_string(&w, c->user.username, strlen(c->user.username));
    if (c->user.uid) {
        luna_json_write_key(&w, "uid", 3);
        luna_json_write_string(&w, c->user.uid, strlen(c->user.uid));
    }
    if (c->user.groups) {
        luna_json_write_key(&w, "groups", 6);
        luna_json_write_raw(&w, c->user.groups, strlen(c->user.groups));
    }
    if (c->user.extra) {
        luna_json_write_key(&w, "extra", 5);
        luna_json_write_raw(&w, c->user.extra, strlen(c->user.extra));
    }
    luna_json_write_object_end(&w);
    luna_json_write_object_end(&w);
    int rc = luna_json_writer_finish(&w, err);
    if (rc == 0 && !(*out = luna_json_writer_steal(&w, len)))
        rc = luna_error_set(err, LUNA_ENOMEM, "out of memory");
    luna_json_writer_free(&w);
    return rc;
}

static int start_request(struct luna_metrics_auth_check *c, luna_error *err)
{
    struct luna_metrics_auth *a = c->a;
    char *body = NULL;
    size_t len = 0;
    int rc = c->step == STEP_TOKEN ? token_review_body(c->token, &body, &len, err)
                                   : access_review_body(c, &body, &len, err);
    if (rc < 0)
        return rc;
    struct luna_kube_request_options o = {
        .method = "POST",
        .path = c->step == STEP_TOKEN ? TOKEN_REVIEW_PATH : ACCESS_REVIEW_PATH,
        .body = body,
        .body_len = len,
        .timeout = a->timeout,
        .max_response_bytes = MAX_REVIEW_BYTES,
        .on_done = on_done,
        .ud = c,
    };
    c->attempts++;
    if (c->step == STEP_TOKEN)
        a->stats.token_reviews++;
    else
        a->stats.access_reviews++;
    c->req = luna_kube_request_start(a->kc, &o, err);
    memset(body, 0, len);
    free(body);
    return c->req ? 0 : (err->code ? err->code : LUNA_EIO);
}

/* The user is known: a cached access decision, or a SubjectAccessReview. */
static void go_access(struct luna_metrics_auth_check *c)
{
    struct luna_metrics_auth *a = c->a;
    const char *fields[] = { c->user.username, c->user.uid, c->user.groups, c->user.extra,
                             c->verb, c->path };
    key_of(c->access_key, fields, sizeof fields / sizeof fields[0]);
    struct entry *e = cache_get(&a->access, c->access_key, luna_clock_now(a->clock));
    if (e) {
        a->stats.cache_hits++;
        finish(c, e->yes ? LUNA_METRICS_AUTH_ALLOW : LUNA_METRICS_AUTH_FORBIDDEN);
        return;
    }
    c->step = STEP_ACCESS;
    c->attempts = 0;
    luna_backoff_reset(&c->backoff);
    luna_error err = { 0 };
    if (start_request(c, &err) < 0) {
        luna_warn("metrics authorization failed", "error", err.msg);
        finish(c, LUNA_METRICS_AUTH_ERROR);
    }
}

/* The bearer token of an Authorization value ("Bearer T", any case, as the
 * API server's bearer-token authenticator reads it), or NULL. */
static const char *bearer(const char *authorization, size_t *len)
{
    if (!authorization)
        return NULL;
    const char *p = authorization + strspn(authorization, " \t");
    if (strncasecmp(p, "bearer", 6) != 0 || (p[6] != ' ' && p[6] != '\t'))
        return NULL;
    p += 6;
    p += strspn(p, " \t");
    size_t n = strcspn(p, " \t");
    if (n == 0 || p[n + strspn(p + n, " \t")] != '\0')
        return NULL; /* empty, or more than two fields */
    *len = n;
    return p;
}

enum luna_metrics_auth_decision
luna_metrics_auth_check(struct luna_metrics_auth *a, const char *authorization,
                        const char *verb, const char *path, luna_metrics_auth_fn done,
                        void *ud, struct luna_metrics_auth_check **check)
{
    *check = NULL;
    size_t tlen = 0;
    const char *token = bearer(authorization, &tlen);
    if (!token || luna_json_utf8_valid_prefix(token, tlen) != tlen)
        return LUNA_METRICS_AUTH_UNAUTHENTICATED;
    unsigned char tkey[32];
    sha256(tkey, token, tlen);
    double now = luna_clock_now(a->clock);
    struct entry *te = cache_get(&a->tokens, tkey, now);
    if (te && !te->yes) {
        a->stats.cache_hits++;
        return LUNA_METRICS_AUTH_UNAUTHENTICATED;
    }
    unsigned char akey[32];
    if (te) {
        const char *fields[] = { te->username, te->uid, te->groups, te->extra, verb, path };
        key_of(akey, fields, sizeof fields / sizeof fields[0]);
        struct entry *ae = cache_get(&a->access, akey, now);
        if (ae) {
            a->stats.cache_hits += 2;
            return ae->yes ? LUNA_METRICS_AUTH_ALLOW : LUNA_METRICS_AUTH_FORBIDDEN;
        }
    }
    if (a->in_flight >= a->max_in_flight)
        return LUNA_METRICS_AUTH_BUSY;
    struct luna_metrics_auth_check *c = calloc(1, sizeof *c);
    if (!c)
        return LUNA_METRICS_AUTH_ERROR;
    c->a = a;
    c->done = done;
    c->ud = ud;
    memcpy(c->token_key, tkey, 32);
    ev_timer_init(&c->retry, retry_cb, 0., 0.);
    c->retry.data = c;
    luna_backoff_init(&c->backoff, a->retry_base, a->retry_base * pow(RETRY_FACTOR, MAX_ATTEMPTS),
                      RETRY_FACTOR, RETRY_JITTER, 1e9, (uint64_t)(uintptr_t)c ^ (uint64_t)(now * 1e6));
    c->next = a->pending;
    if (a->pending)
        a->pending->prev = c;
    a->pending = c;
    a->in_flight++;
    if (!(c->verb = strdup(verb)) || !(c->path = strdup(path))) {
        check_free(c);
        return LUNA_METRICS_AUTH_ERROR;
    }
    if (te) {
        a->stats.cache_hits++;
        if (!(c->user.username = strdup(te->username)) ||
            (te->uid && !(c->user.uid = strdup(te->uid))) ||
            (te->groups && !(c->user.groups = strdup(te->groups))) ||
            (te->extra && !(c->user.extra = strdup(te->extra)))) {
            check_free(c);
            return LUNA_METRICS_AUTH_ERROR;
        }
        memcpy(c->access_key, akey, 32);
        c->step = STEP_ACCESS;
    } else {
        if (!(c->token = strndup(token, tlen))) {
            check_free(c);
            return LUNA_METRICS_AUTH_ERROR;
        }
        c->step = STEP_TOKEN;
    }
    luna_error err = { 0 };
    if (start_request(c, &err) < 0) {
        luna_warn("metrics authorization failed", "error", err.msg);
        check_free(c);
        return LUNA_METRICS_AUTH_ERROR;
    }
    *check = c;
    return LUNA_METRICS_AUTH_PENDING;
}

void luna_metrics_auth_cached_user(struct luna_metrics_auth *a, const char *authorization,
                                   char *buf, size_t size)
{
    if (size)
        buf[0] = '\0';
    size_t tlen = 0;
    const char *token = bearer(authorization, &tlen);
    if (!token || !size)
        return;
    unsigned char tkey[32];
    sha256(tkey, token, tlen);
    struct entry *te = cache_get(&a->tokens, tkey, luna_clock_now(a->clock));
    if (te && te->yes && te->username)
        snprintf(buf, size, "%s", te->username);
}

void luna_metrics_auth_cancel(struct luna_metrics_auth_check *c)
{
    if (c)
        check_free(c);
}

int luna_metrics_auth_new(const struct luna_metrics_auth_options *o,
                          struct luna_metrics_auth **out, luna_error *err)
{
    *out = NULL;
    if (!o->kc || !o->loop)
        return luna_error_set(err, LUNA_EINVAL, "metrics auth: a kube client and a loop are required");
    struct luna_metrics_auth *a = calloc(1, sizeof *a);
    if (!a)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    a->kc = o->kc;
    a->loop = o->loop;
    a->clock = o->clock ? o->clock : luna_clock_monotonic();
    a->token_ttl = o->token_ttl > 0 ? o->token_ttl : 60;
    a->allow_ttl = o->allow_ttl > 0 ? o->allow_ttl : 300;
    a->deny_ttl = o->deny_ttl > 0 ? o->deny_ttl : 30;
    a->timeout = o->timeout > 0 ? o->timeout : 10;
    a->retry_base = o->retry_base > 0 ? o->retry_base : 0.5;
    a->tokens.max = a->access.max = o->max_cached ? o->max_cached : 1024;
    a->max_in_flight = o->max_in_flight ? o->max_in_flight : 32;
    *out = a;
    return 0;
}

void luna_metrics_auth_free(struct luna_metrics_auth *a)
{
    if (!a)
        return;
    while (a->pending)
        check_free(a->pending);
    cache_clear(&a->tokens);
    cache_clear(&a->access);
    free(a);
}

struct luna_metrics_auth_stats luna_metrics_auth_stats(const struct luna_metrics_auth *a)
{
    struct luna_metrics_auth_stats s = a->stats;
    s.in_flight = a->in_flight;
    return s;
}
