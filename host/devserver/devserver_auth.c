/* devserver_auth.c — see devserver_auth.h. */
#include "devserver/devserver_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <uthash.h>

#include "devserver/devserver_doc.h"
#include "devserver/devserver_schema.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"

#define MAX_TOKENS 10000
#define MIN_EXPIRATION 600
#define DEFAULT_EXPIRATION 3600
#define API_AUDIENCE "https://kubernetes.default.svc.cluster.local"
#define RBAC_GROUP "rbac.authorization.k8s.io"

struct luna_ds_token {
    unsigned char key[32];       /* SHA-256 of the token */
    char *ns, *name, *uid;       /* the ServiceAccount it was issued for */
    json_t *audiences;           /* array of strings */
    time_t expires;
    UT_hash_handle hh;
};

static void token_free(struct luna_ds_token *t)
{
    free(t->ns);
    free(t->name);
    free(t->uid);
    json_decref(t->audiences);
    free(t);
}

void luna_ds_auth_free(luna_ds_auth *a)
{
    struct luna_ds_token *t, *tmp;
    HASH_ITER(hh, a->tokens, t, tmp) {
        HASH_DEL(a->tokens, t);
        token_free(t);
    }
    if (a->admin_token) {
        OPENSSL_cleanse(a->admin_token, strlen(a->admin_token));
        free(a->admin_token);
    }
    a->admin_token = NULL;
}

int luna_ds_auth_set_admin_token(luna_ds *ds, const char *token)
{
    char *copy = token ? strdup(token) : NULL;
    if (token && !copy)
        return LUNA_ENOMEM;
    free(ds->auth.admin_token);
    ds->auth.admin_token = copy;
    return 0;
}

static void sha256(unsigned char out[32], const char *s, size_t len)
{
    unsigned int n = 32;
    if (!EVP_Digest(s, len, out, &n, EVP_sha256(), NULL))
        memset(out, 0, 32);
}

/* ---- identities ---------------------------------------------------------------- */

/* The ServiceAccount object ns/name, borrowed until the next write. */
static luna_ds_obj *service_account(luna_ds *ds, const char *ns, const char *name)
{
    luna_ds_type *t = luna_ds_types_find(ds->types, "", "v1", "serviceaccounts");
    if (!t)
        return NULL;
    char key[600];
    luna_ds_doc_key(key, sizeof key, t, ns, name);
    return luna_ds_store_get(t->coll, key);
}

static bool is_admin(const luna_ds_auth *a, const char *token, size_t len)
{
    return a->admin_token && strlen(a->admin_token) == len &&
           CRYPTO_memcmp(a->admin_token, token, len) == 0;
}

/* The live issued token, or NULL (an expired or orphaned one is dropped). */
static struct luna_ds_token *issued(luna_ds *ds, const char *token, size_t len)
{
    unsigned char key[32];
    sha256(key, token, len);
    struct luna_ds_token *t;
    HASH_FIND(hh, ds->auth.tokens, key, 32, t);
    if (!t)
        return NULL;
    luna_ds_obj *sa = service_account(ds, t->ns, t->name);
    if (t->expires <= time(NULL) || !sa || !sa->uid || strcmp(sa->uid, t->uid) != 0) {
        HASH_DEL(ds->auth.tokens, t);
        token_free(t);
        return NULL;
    }
    return t;
}

/* The bearer token of an Authorization value, or NULL. */
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
        return NULL;
    *len = n;
    return p;
}

bool luna_ds_auth_request(luna_ds *ds, const char *authorization)
{
    size_t len = 0;
    const char *token = bearer(authorization, &len);
    return token && (is_admin(&ds->auth, token, len) || issued(ds, token, len));
}

/* ---- request bodies ------------------------------------------------------------ */

/* The request body as a JSON object of apiVersion/kind (when they are
 * given), or NULL with a 400 recorded in st. */
static json_t *review_body(const luna_ds_request *req, const char *api_version,
                           const char *kind, luna_ds_status *st)
{
    json_error_t jerr;
    json_t *doc = req->body ? json_loadb(req->body, req->body_len, 0, &jerr) : NULL;
    if (!json_is_object(doc)) {
        json_decref(doc);
        luna_ds_status_bad_request(st, "the body of the request is not a %s object", kind);
        return NULL;
    }
    const char *av = luna_ds_doc_str(doc, "apiVersion"), *k = luna_ds_doc_str(doc, "kind");
    if ((av && strcmp(av, api_version) != 0) || (k && strcmp(k, kind) != 0)) {
        json_decref(doc);
        luna_ds_status_bad_request(st, "the body of the request must be a %s %s", api_version,
                                   kind);
        return NULL;
    }
    /* kube decodes a review as any body: a field of the wrong JSON type
     * is the decoder's 400 (the schema tables know the review kinds) */
    char group[64];
    const char *slash = strchr(api_version, '/');
    snprintf(group, sizeof group, "%.*s", slash ? (int)(slash - api_version) : 0, api_version);
    luna_ds_type rt = { .group = group, .version = (char *)(slash ? slash + 1 : api_version),
                        .api_version = (char *)api_version, .kind = (char *)kind };
    if (luna_ds_schema_decode(&rt, doc, 0, st) < 0) {
        json_decref(doc);
        return NULL;
    }
    if (!json_is_object(json_object_get(doc, "spec")))
        json_object_set_new(doc, "spec", json_object());
    return doc;
}

static void reply_created(luna_ds_response *resp, json_t *doc, const char *api_version,
                          const char *kind)
{
    json_object_set_new(doc, "apiVersion", json_string(api_version));
    json_object_set_new(doc, "kind", json_string(kind));
    luna_ds_reply_json(resp, 201, doc);
}

static void reply_status(luna_ds_response *resp, luna_ds_status *st)
{
    luna_ds_reply_status(resp, st);
}

/* ---- TokenRequest -------------------------------------------------------------- */

static void base64url(const unsigned char *in, size_t n, char *out)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = alphabet[(acc >> bits) & 63];
        }
    }
    if (bits > 0)
        out[o++] = alphabet[(acc << (6 - bits)) & 63];
    out[o] = '\0';
}

/* Keeps the token table within MAX_TOKENS: expired first, then the oldest. */
static void prune(luna_ds_auth *a)
{
    if (HASH_COUNT(a->tokens) < MAX_TOKENS)
        return;
    time_t now = time(NULL);
    struct luna_ds_token *t, *tmp;
    HASH_ITER(hh, a->tokens, t, tmp) {
        if (t->expires <= now) {
            HASH_DEL(a->tokens, t);
            token_free(t);
        }
    }
    while (a->tokens && HASH_COUNT(a->tokens) >= MAX_TOKENS) {
        t = a->tokens;
        HASH_DEL(a->tokens, t);
        token_free(t);
    }
}

void luna_ds_auth_token_request(luna_ds *ds, const luna_ds_request *req, const char *ns,
                                const char *name, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    if (strcmp(req->method, "POST") != 0) {
        luna_ds_reply_not_allowed(resp);
        return;
    }
    json_t *doc = review_body(req, "authentication.k8s.io/v1", "TokenRequest", &st);
    if (!doc)
        return reply_status(resp, &st);
    luna_ds_obj *sa = service_account(ds, ns, name);
    if (!sa || !sa->uid) {
        json_decref(doc);
        luna_ds_status_not_found(&st, "", "serviceaccounts", name);
        return reply_status(resp, &st);
    }
    json_t *spec = json_object_get(doc, "spec");
    json_t *exp = json_object_get(spec, "expirationSeconds");
    json_int_t seconds = DEFAULT_EXPIRATION;
    if (exp && !json_is_null(exp)) {
        if (!json_is_integer(exp) || json_integer_value(exp) < MIN_EXPIRATION ||
            json_integer_value(exp) > ((json_int_t)1 << 32)) {
            json_decref(doc);
            luna_ds_status_invalid(&st, "authentication.k8s.io", "TokenRequest", name,
                                   "FieldValueInvalid", "spec.expirationSeconds",
                                   "may not specify a duration less than 10 minutes or "
                                   "more than 2^32 seconds");
            return reply_status(resp, &st);
        }
        seconds = json_integer_value(exp);
    }
    json_t *aud = json_object_get(spec, "audiences");
    json_t *audiences;
    if (json_is_array(aud) && json_array_size(aud) > 0) {
        size_t i;
        json_t *v;
        json_array_foreach(aud, i, v) {
            if (!json_is_string(v) || !*json_string_value(v)) {
                json_decref(doc);
                luna_ds_status_invalid(&st, "authentication.k8s.io", "TokenRequest", name,
                                       "FieldValueInvalid", "spec.audiences",
                                       "audiences must be non-empty strings");
                return reply_status(resp, &st);
            }
        }
        audiences = json_deep_copy(aud);
    } else {
        audiences = json_pack("[s]", API_AUDIENCE);
    }
    unsigned char raw[32];
    char token[64];
    struct luna_ds_token *t = calloc(1, sizeof *t);
    if (!t || !audiences || RAND_bytes(raw, sizeof raw) != 1 || !(t->ns = strdup(ns)) ||
        !(t->name = strdup(name)) || !(t->uid = strdup(sa->uid))) {
        if (t)
            token_free(t);
        json_decref(audiences);
        json_decref(doc);
        return luna_ds_reply_oom(resp);
    }
    base64url(raw, sizeof raw, token);
    OPENSSL_cleanse(raw, sizeof raw);
    sha256(t->key, token, strlen(token));
    t->audiences = json_incref(audiences);
    t->expires = time(NULL) + (time_t)seconds;
    prune(&ds->auth);
    HASH_ADD(hh, ds->auth.tokens, key, 32, t);

    char now[32], until[32];
    luna_ds_doc_now(now);
    struct tm tm;
    gmtime_r(&t->expires, &tm);
    strftime(until, sizeof until, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object_set_new(spec, "audiences", audiences);
    json_object_set_new(spec, "expirationSeconds", json_integer(seconds));
    if (!json_object_get(spec, "boundObjectRef"))
        json_object_set_new(spec, "boundObjectRef", json_null());
    json_object_set_new(doc, "metadata", json_pack("{s:s,s:s,s:s}", "name", name, "namespace", ns,
                                                   "creationTimestamp", now));
    json_object_set_new(doc, "status", json_pack("{s:s,s:s}", "token", token,
                                                 "expirationTimestamp", until));
    OPENSSL_cleanse(token, sizeof token);
    reply_created(resp, doc, "authentication.k8s.io/v1", "TokenRequest");
}

/* ---- TokenReview --------------------------------------------------------------- */

/* The audiences both lists name (requested empty: the API server's). */
static json_t *intersect(const json_t *requested, const json_t *granted)
{
    json_t *out = json_array();
    json_t *want = json_is_array(requested) && json_array_size(requested) > 0
                       ? json_incref((json_t *)requested) : json_pack("[s]", API_AUDIENCE);
    size_t i;
    json_t *v;
    json_array_foreach(want, i, v) {
        if (json_is_string(v) && luna_ds_doc_has_string(granted, json_string_value(v)))
            json_array_append(out, v);
    }
    json_decref(want);
    return out;
}

void luna_ds_auth_token_review(luna_ds *ds, const luna_ds_request *req, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    if (strcmp(req->method, "POST") != 0) {
        luna_ds_reply_not_allowed(resp);
        return;
    }
    json_t *doc = review_body(req, "authentication.k8s.io/v1", "TokenReview", &st);
    if (!doc)
        return reply_status(resp, &st);
    json_t *spec = json_object_get(doc, "spec");
    const char *token = luna_ds_doc_str(spec, "token");
    json_t *requested = json_object_get(spec, "audiences");
    json_t *status = NULL;
    size_t len = token ? strlen(token) : 0;
    if (token && is_admin(&ds->auth, token, len)) {
        json_t *aud = json_is_array(requested) && json_array_size(requested) > 0
                          ? json_deep_copy(requested) : json_pack("[s]", API_AUDIENCE);
        status = json_pack("{s:b,s:{s:s,s:[ss]},s:o}", "authenticated", 1, "user", "username",
                           "admin", "groups", "system:masters", "system:authenticated",
                           "audiences", aud);
    } else {
        struct luna_ds_token *t = token && len ? issued(ds, token, len) : NULL;
        json_t *aud = t ? intersect(requested, t->audiences) : NULL;
        if (t && aud && json_array_size(aud) > 0) {
            char user[600], group[300];
            snprintf(user, sizeof user, "system:serviceaccount:%s:%s", t->ns, t->name);
            snprintf(group, sizeof group, "system:serviceaccounts:%s", t->ns);
            status = json_pack("{s:b,s:{s:s,s:s,s:[sss]},s:o}", "authenticated", 1, "user",
                               "username", user, "uid", t->uid, "groups",
                               "system:serviceaccounts", group, "system:authenticated",
                               "audiences", aud);
        } else {
            json_decref(aud);
            status = json_pack("{s:{},s:s}", "user", "error",
                               t ? "token audiences do not match the review's"
                                 : "invalid bearer token");
        }
    }
    if (!status) {
        json_decref(doc);
        return luna_ds_reply_oom(resp);
    }
    json_object_set_new(doc, "metadata", json_pack("{s:n}", "creationTimestamp"));
    json_object_set_new(doc, "status", status);
    reply_created(resp, doc, "authentication.k8s.io/v1", "TokenReview");
}

/* ---- SubjectAccessReview: RBAC ------------------------------------------------- */

struct attrs {
    const char *user;
    const json_t *groups;        /* array of strings, may be NULL */
    bool resource;
    const char *verb, *group, *res, *sub, *name, *ns; /* resource requests */
    const char *path;                                  /* non-resource requests */
};

static luna_ds_coll *rbac_coll(luna_ds *ds, const char *resource)
{
    luna_ds_type *t = luna_ds_types_find(ds->types, RBAC_GROUP, "v1", resource);
    return t ? t->coll : NULL;
}

static bool in_list(const json_t *arr, const char *s)
{
    return s && luna_ds_doc_has_string(arr, s);
}

static bool rule_allows(const json_t *rule, const struct attrs *a)
{
    const json_t *verbs = json_object_get(rule, "verbs");
    if (!in_list(verbs, a->verb) && !in_list(verbs, "*"))
        return false;
    if (!a->resource) {
        const json_t *urls = json_object_get(rule, "nonResourceURLs");
        size_t i;
        json_t *u;
        json_array_foreach(urls, i, u) {
            const char *p = json_string_value(u);
            if (!p)
                continue;
            size_t n = strlen(p);
            if (strcmp(p, "*") == 0 || strcmp(p, a->path) == 0 ||
                (n > 0 && p[n - 1] == '*' && strncmp(a->path, p, n - 1) == 0))
                return true;
        }
        return false;
    }
    const json_t *groups = json_object_get(rule, "apiGroups");
    if (!in_list(groups, a->group) && !in_list(groups, "*"))
        return false;
    char combined[512], any_sub[300];
    snprintf(combined, sizeof combined, "%s%s%s", a->res, *a->sub ? "/" : "", a->sub);
    snprintf(any_sub, sizeof any_sub, "*/%s", a->sub);
    const json_t *resources = json_object_get(rule, "resources");
    if (!in_list(resources, "*") && !in_list(resources, combined) &&
        !(*a->sub && in_list(resources, any_sub)))
        return false;
    const json_t *names = json_object_get(rule, "resourceNames");
    return json_array_size(names) == 0 || in_list(names, a->name);
}

static bool selector_matches(const json_t *sel, const json_t *labels)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(sel, "matchLabels"), k, v) {
        const char *have = json_string_value(json_object_get(labels, k));
        if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)) != 0)
            return false;
    }
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, e) {
        const char *key = luna_ds_doc_str(e, "key"), *op = luna_ds_doc_str(e, "operator");
        const char *have = key ? json_string_value(json_object_get(labels, key)) : NULL;
        const json_t *values = json_object_get(e, "values");
        if (!key || !op)
            return false;
        if (strcmp(op, "In") == 0 ? !have || !in_list(values, have)
            : strcmp(op, "NotIn") == 0 ? have && in_list(values, have)
            : strcmp(op, "Exists") == 0 ? !have
            : strcmp(op, "DoesNotExist") == 0 ? have != NULL
            : true)
            return false;
    }
    return true;
}

struct aggregate {
    const json_t *selectors;
    const struct attrs *a;
    bool allowed;
};

static bool aggregate_one(void *ctx, luna_ds_obj *o)
{
    struct aggregate *ag = ctx;
    bool selected = false;
    size_t i;
    json_t *sel;
    json_array_foreach(ag->selectors, i, sel) {
        if (selector_matches(sel, o->labels)) {
            selected = true;
            break;
        }
    }
    if (!selected)
        return true;
    json_t *doc = luna_ds_obj_doc(o);
    json_t *rule;
    json_array_foreach(json_object_get(doc, "rules"), i, rule) {
        if (rule_allows(rule, ag->a)) {
            ag->allowed = true;
            break;
        }
    }
    json_decref(doc);
    return !ag->allowed;
}

/* Whether the role (kind Role in ns, or ClusterRole) allows the request. */
static bool role_allows(luna_ds *ds, const char *kind, const char *ns, const char *name,
                        const struct attrs *a)
{
    bool cluster = strcmp(kind, "ClusterRole") == 0;
    if (!cluster && strcmp(kind, "Role") != 0)
        return false;
    luna_ds_type *t = luna_ds_types_find(ds->types, RBAC_GROUP, "v1", cluster ? "clusterroles"
                                                                               : "roles");
    if (!t)
        return false;
    luna_ds_coll *coll = t->coll;
    char key[600];
    luna_ds_doc_key(key, sizeof key, t, cluster ? "" : ns, name);
    luna_ds_obj *o = luna_ds_store_get(coll, key);
    json_t *doc = o ? luna_ds_obj_doc(o) : NULL;
    if (!doc)
        return false;
    bool allowed = false;
    const json_t *selectors =
        cluster ? json_object_get(json_object_get(doc, "aggregationRule"), "clusterRoleSelectors")
                : NULL;
    if (selectors) {
        /* the rules the cluster's aggregation controller would write */
        struct aggregate ag = { .selectors = selectors, .a = a };
        luna_ds_store_each(coll, aggregate_one, &ag);
        allowed = ag.allowed;
    } else {
        size_t i;
        json_t *rule;
        json_array_foreach(json_object_get(doc, "rules"), i, rule) {
            if (rule_allows(rule, a)) {
                allowed = true;
                break;
            }
        }
    }
    json_decref(doc);
    return allowed;
}

static bool subject_applies(const json_t *s, const struct attrs *a, const char *binding_ns)
{
    const char *kind = luna_ds_doc_str(s, "kind"), *name = luna_ds_doc_str(s, "name");
    if (!kind || !name)
        return false;
    if (strcmp(kind, "User") == 0)
        return a->user && strcmp(a->user, name) == 0;
    if (strcmp(kind, "Group") == 0)
        return in_list(a->groups, name);
    if (strcmp(kind, "ServiceAccount") == 0) {
        const char *ns = luna_ds_doc_str(s, "namespace");
        if (!ns || !*ns)
            ns = binding_ns;
        char user[600];
        snprintf(user, sizeof user, "system:serviceaccount:%s:%s", ns ? ns : "", name);
        return a->user && strcmp(a->user, user) == 0;
    }
    return false;
}

struct search {
    luna_ds *ds;
    const struct attrs *a;
    const char *ns;                /* RoleBindings: only this namespace */
    bool allowed;
    char reason[1024];
};

static bool binding_one(void *ctx, luna_ds_obj *o)
{
    struct search *s = ctx;
    if (s->ns && strcmp(o->ns, s->ns) != 0)
        return true;
    json_t *doc = luna_ds_obj_doc(o);
    const json_t *ref = json_object_get(doc, "roleRef");
    const char *rkind = luna_ds_doc_str(ref, "kind"), *rname = luna_ds_doc_str(ref, "name");
    size_t i;
    json_t *subj;
    json_array_foreach(json_object_get(doc, "subjects"), i, subj) {
        if (!rkind || !rname || !subject_applies(subj, s->a, *o->ns ? o->ns : NULL))
            continue;
        if (role_allows(s->ds, rkind, o->ns, rname, s->a)) {
            s->allowed = true;
            snprintf(s->reason, sizeof s->reason,
                     "RBAC: allowed by %s \"%s\" of %s \"%s\" to %s \"%s\"",
                     *o->ns ? "RoleBinding" : "ClusterRoleBinding", o->name, rkind, rname,
                     luna_ds_doc_str(subj, "kind"), luna_ds_doc_str(subj, "name"));
        }
        break;
    }
    json_decref(doc);
    return !s->allowed;
}

static bool rbac_allows(luna_ds *ds, const struct attrs *a, char *reason, size_t n)
{
    if (in_list(a->groups, "system:masters")) {
        snprintf(reason, n, "the group system:masters may do everything");
        return true;
    }
    struct search s = { .ds = ds, .a = a };
    luna_ds_coll *crb = rbac_coll(ds, "clusterrolebindings");
    if (crb)
        luna_ds_store_each(crb, binding_one, &s);
    luna_ds_coll *rb = rbac_coll(ds, "rolebindings");
    if (!s.allowed && rb && a->resource && a->ns && *a->ns) {
        s.ns = a->ns;
        luna_ds_store_each(rb, binding_one, &s);
    }
    snprintf(reason, n, "%s", s.reason);
    return s.allowed;
}

static const char *str_or(const json_t *o, const char *k, const char *def)
{
    const char *v = luna_ds_doc_str(o, k);
    return v ? v : def;
}

/* Takes a's request from spec's resourceAttributes (ra) or
 * nonResourceAttributes, asks RBAC, and answers doc (consumed: the
 * review with its status) as a 201 of kind. */
static void answer_review(luna_ds *ds, json_t *doc, struct attrs *ap, const char *kind,
                          luna_ds_response *resp)
{
    struct attrs a = *ap;
    json_t *spec = json_object_get(doc, "spec");
    const json_t *ra = json_object_get(spec, "resourceAttributes");
    const json_t *na = json_object_get(spec, "nonResourceAttributes");
    if (ra) {
        a.resource = true;
        a.verb = str_or(ra, "verb", "");
        a.group = str_or(ra, "group", "");
        a.res = str_or(ra, "resource", "");
        a.sub = str_or(ra, "subresource", "");
        a.name = str_or(ra, "name", "");
        a.ns = str_or(ra, "namespace", "");
    } else {
        a.verb = str_or(na, "verb", "");
        a.path = str_or(na, "path", "");
    }
    char reason[1024] = "";
    bool allowed = rbac_allows(ds, &a, reason, sizeof reason);
    json_t *status = allowed ? json_pack("{s:b,s:s}", "allowed", 1, "reason", reason)
                             : json_pack("{s:b}", "allowed", 0);
    if (!status) {
        json_decref(doc);
        return luna_ds_reply_oom(resp);
    }
    json_object_set_new(doc, "metadata", json_pack("{s:n}", "creationTimestamp"));
    json_object_set_new(doc, "status", status);
    reply_created(resp, doc, "authorization.k8s.io/v1", kind);
}

void luna_ds_auth_access_review(luna_ds *ds, const luna_ds_request *req, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    if (strcmp(req->method, "POST") != 0) {
        luna_ds_reply_not_allowed(resp);
        return;
    }
    json_t *doc = review_body(req, "authorization.k8s.io/v1", "SubjectAccessReview", &st);
    if (!doc)
        return reply_status(resp, &st);
    json_t *spec = json_object_get(doc, "spec");
    const json_t *ra = json_object_get(spec, "resourceAttributes");
    const json_t *na = json_object_get(spec, "nonResourceAttributes");
    struct attrs a = { .user = luna_ds_doc_str(spec, "user"),
                       .groups = json_object_get(spec, "groups") };
    if ((ra != NULL) == (na != NULL)) {
        json_decref(doc);
        luna_ds_status_invalid(&st, "authorization.k8s.io", "SubjectAccessReview", "",
                               "FieldValueRequired", "spec.resourceAttributes",
                               "exactly one of nonResourceAttributes or resourceAttributes "
                               "must be specified");
        return reply_status(resp, &st);
    }
    if ((!a.user || !*a.user) && json_array_size(a.groups) == 0) {
        json_decref(doc);
        luna_ds_status_invalid(&st, "authorization.k8s.io", "SubjectAccessReview", "",
                               "FieldValueRequired", "spec.user",
                               "at least one of user or group must be specified");
        return reply_status(resp, &st);
    }
    answer_review(ds, doc, &a, "SubjectAccessReview", resp);
}

/* authorization ValidateSelfSubjectAccessReview: metadata must be empty
 * (kube renders the ObjectMeta it decoded; here its JSON), and exactly one
 * of the attribute kinds.  The requester is the one the transport
 * authenticated on the headers (req->user; luna_ds_auth_user_info). */
void luna_ds_auth_self_access_review(luna_ds *ds, const luna_ds_request *req,
                                     luna_ds_response *resp)
{
    static const char *const KIND = "SelfSubjectAccessReview";
    luna_ds_status st = { 0 };
    if (strcmp(req->method, "POST") != 0) {
        luna_ds_reply_not_allowed(resp);
        return;
    }
    json_t *doc = review_body(req, "authorization.k8s.io/v1", KIND, &st);
    if (!doc)
        return reply_status(resp, &st);
    json_t *md = json_object_get(doc, "metadata");
    bool md_empty = !md || json_is_null(md);
    if (json_is_object(md)) {
        md_empty = true;
        const char *k;
        json_t *v;
        json_object_foreach(md, k, v)
            if (!json_is_null(v))
                md_empty = false;
    }
    if (!md_empty) {
        char *shown = json_dumps(md, JSON_COMPACT | JSON_SORT_KEYS);
        json_decref(doc);
        if (!shown)
            return luna_ds_reply_oom(resp);
        luna_ds_status_invalid(&st, "authorization.k8s.io", KIND, "", "FieldValueInvalid",
                               "metadata", "Invalid value: %s: must be empty", shown);
        free(shown);
        return reply_status(resp, &st);
    }
    json_t *spec = json_object_get(doc, "spec");
    if ((json_object_get(spec, "resourceAttributes") != NULL) ==
        (json_object_get(spec, "nonResourceAttributes") != NULL)) {
        json_decref(doc);
        luna_ds_status_invalid(&st, "authorization.k8s.io", KIND, "", "FieldValueInvalid", "spec",
                               "Invalid value: null: exactly one of nonResourceAttributes or "
                               "resourceAttributes must be specified");
        return reply_status(resp, &st);
    }
    /* the requester as authenticated on the request's headers: a token
     * that lapsed while the body came does not make it someone else */
    json_t *who = req->user ? json_incref(req->user)
                            : luna_ds_auth_user_info(ds, req->authorization);
    if (!who) {
        json_decref(doc);
        return luna_ds_reply_oom(resp);
    }
    struct attrs a = { .user = json_string_value(json_object_get(who, "username")),
                       .groups = json_object_get(who, "groups") };
    answer_review(ds, doc, &a, KIND, resp);
    json_decref(who);
}

json_t *luna_ds_auth_user_info(luna_ds *ds, const char *authorization)
{
    size_t len = 0;
    const char *token = bearer(authorization, &len);
    struct luna_ds_token *t = token ? issued(ds, token, len) : NULL;
    if (!t)
        return json_pack("{s:s,s:[ss]}", "username", "admin", "groups", "system:masters",
                         "system:authenticated");
    char user[600], group[300];
    snprintf(user, sizeof user, "system:serviceaccount:%s:%s", t->ns, t->name);
    snprintf(group, sizeof group, "system:serviceaccounts:%s", t->ns);
    return json_pack("{s:s,s:s,s:[sss]}", "username", user, "uid", t->uid, "groups",
                     "system:serviceaccounts", group, "system:authenticated");
}
