/* discovery.c — see discovery.h. */
#include "client/discovery.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/log.h"

struct luna_discovery_wait {
    struct group_version *gv;
    char *kind;
    luna_discovery_fn fn;
    void *ud;
    struct luna_discovery_wait *next;
};

struct group_version {
    char *group, *version;
    struct luna_resource *resources;
    size_t n;
    bool cached;
    bool served;                        /* the last answer was not a 404 */
    struct luna_kube_request *req;      /* fetch in flight */
    struct luna_discovery_wait *waits;  /* resolves waiting for the fetch */
    struct luna_discovery *d;
    struct group_version *next;
    char *body;
    size_t body_len;
};

struct luna_discovery {
    struct luna_kube_client *kc;
    struct group_version *gvs;
};

/* ---- parsing --------------------------------------------------------- */

struct parse_ctx {
    const char *group, *version;
    struct luna_resource *v;
    size_t n, cap;
    int key;             /* item key: 1 name, 2 kind, 3 namespaced, 4 group, 5 version */
    bool in_resources;
    char *name, *kind;
    bool namespaced;
    char *item_group, *item_version;
};

static void item_clear(struct parse_ctx *c)
{
    free(c->name);
    free(c->kind);
    free(c->item_group);
    free(c->item_version);
    c->name = c->kind = c->item_group = c->item_version = NULL;
    c->namespaced = false;
}

static int item_done(struct parse_ctx *c, luna_error *err)
{
    if (!c->name || !c->kind)
        return 0;
    const char *slash = strchr(c->name, '/');
    if (slash) {
        /* A subresource: note "status" on its parent if already seen. */
        if (strcmp(slash + 1, "status") == 0)
            for (size_t i = 0; i < c->n; i++)
                if (strlen(c->v[i].resource) == (size_t)(slash - c->name) &&
                    strncmp(c->v[i].resource, c->name, (size_t)(slash - c->name)) == 0)
                    c->v[i].has_status = true;
        return 0;
    }
    /* Resources served from another group-version (rare) are skipped. */
    if ((c->item_group && strcmp(c->item_group, c->group) != 0) ||
        (c->item_version && strcmp(c->item_version, c->version) != 0))
        return 0;
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        struct luna_resource *v = realloc(c->v, cap * sizeof *v);
        if (!v)
            return luna_error_set(err, LUNA_ENOMEM, "out of memory");
        c->v = v;
        c->cap = cap;
    }
    struct luna_resource tmp = {
        .group = (char *)c->group, .version = (char *)c->version, .resource = c->name,
        .kind = c->kind, .namespaced = c->namespaced,
    };
    if (luna_resource_copy(&c->v[c->n], &tmp) < 0)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    c->n++;
    return 0;
}

static bool is_key(const luna_json_event *ev, const char *k)
{
    return ev->len == strlen(k) && memcmp(ev->str, k, ev->len) == 0;
}

static int parse_event(void *ud, const luna_json_event *ev, luna_error *err)
{
    struct parse_ctx *c = ud;
    if (ev->depth == 1 && ev->type == LUNA_JSON_KEY) {
        c->in_resources = is_key(ev, "resources");
        return 0;
    }
    if (!c->in_resources)
        return 0;
    if (ev->depth == 2 && ev->type == LUNA_JSON_OBJECT_START) {
        item_clear(c);
        return 0;
    }
    if (ev->depth == 2 && ev->type == LUNA_JSON_OBJECT_END) {
        int rc = item_done(c, err);
        item_clear(c);
        return rc;
    }
    if (ev->depth != 3)
        return 0;
    if (ev->type == LUNA_JSON_KEY) {
        c->key = is_key(ev, "name") ? 1 : is_key(ev, "kind") ? 2 : is_key(ev, "namespaced") ? 3
               : is_key(ev, "group") ? 4 : is_key(ev, "version") ? 5 : 0;
        return 0;
    }
    if (ev->type == LUNA_JSON_STRING && c->key && c->key != 3) {
        char **slot = c->key == 1 ? &c->name : c->key == 2 ? &c->kind
                    : c->key == 4 ? &c->item_group : &c->item_version;
        free(*slot);
        *slot = strndup(ev->str, ev->len);
        if (!*slot)
            return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    } else if (c->key == 3 && (ev->type == LUNA_JSON_TRUE || ev->type == LUNA_JSON_FALSE)) {
        c->namespaced = ev->type == LUNA_JSON_TRUE;
    }
    c->key = 0;
    return 0;
}

/* Parses an APIResourceList body into resources.  *out is a malloc'd
 * array of n resources, each cleared with luna_resource_clear, then the
 * array freed. */
static int luna_discovery_parse(const char *json, size_t len, const char *group, const char *version,
                         struct luna_resource **out, size_t *n, luna_error *err)
{
    struct parse_ctx c = { .group = group, .version = version };
    int rc = luna_json_parse(json, len, NULL, parse_event, &c, err);
    item_clear(&c);
    if (rc < 0) {
        for (size_t i = 0; i < c.n; i++)
            luna_resource_clear(&c.v[i]);
        free(c.v);
        *out = NULL;
        *n = 0;
        return rc;
    }
    *out = c.v;
    *n = c.n;
    return 0;
}

/* ---- cache and fetching ---------------------------------------------- */

int luna_discovery_new(struct luna_kube_client *kc, struct luna_discovery **out, luna_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    (*out)->kc = kc;
    return 0;
}

static void gv_clear_resources(struct group_version *gv)
{
    for (size_t i = 0; i < gv->n; i++)
        luna_resource_clear(&gv->resources[i]);
    free(gv->resources);
    gv->resources = NULL;
    gv->n = 0;
}

static void wait_free(struct luna_discovery_wait *w)
{
    free(w->kind);
    free(w);
}

void luna_discovery_free(struct luna_discovery *d)
{
    if (!d)
        return;
    struct group_version *gv = d->gvs;
    while (gv) {
        struct group_version *next = gv->next;
        if (gv->req)
            luna_kube_request_cancel(gv->req);
        while (gv->waits) {
            struct luna_discovery_wait *w = gv->waits;
            gv->waits = w->next;
            wait_free(w);
        }
        gv_clear_resources(gv);
        free(gv->body);
        free(gv->group);
        free(gv->version);
        free(gv);
        gv = next;
    }
    free(d);
}

static struct group_version *find_gv(struct luna_discovery *d, const char *group,
                                     const char *version, bool create)
{
    for (struct group_version *gv = d->gvs; gv; gv = gv->next)
        if (strcmp(gv->group, group) == 0 && strcmp(gv->version, version) == 0)
            return gv;
    if (!create)
        return NULL;
    struct group_version *gv = calloc(1, sizeof *gv);
    if (!gv || !(gv->group = strdup(group)) || !(gv->version = strdup(version))) {
        if (gv)
            free(gv->group);
        free(gv);
        return NULL;
    }
    gv->d = d;
    gv->next = d->gvs;
    d->gvs = gv;
    return gv;
}

/* Unlinks and frees gv, which has no request in flight and no waits. */
static void gv_drop(struct group_version *gv)
{
    struct group_version **p = &gv->d->gvs;
    while (*p && *p != gv)
        p = &(*p)->next;
    if (*p)
        *p = gv->next;
    gv_clear_resources(gv);
    free(gv->body);
    free(gv->group);
    free(gv->version);
    free(gv);
}

static const struct luna_resource *find_kind(const struct group_version *gv, const char *kind)
{
    for (size_t i = 0; i < gv->n; i++)
        if (strcmp(gv->resources[i].kind, kind) == 0)
            return &gv->resources[i];
    return NULL;
}

const struct luna_resource *luna_discovery_lookup(struct luna_discovery *d, const char *group,
                                                  const char *version, const char *kind)
{
    struct group_version *gv = find_gv(d, group, version, false);
    return gv && gv->cached ? find_kind(gv, kind) : NULL;
}

static int on_body(void *ud, const char *data, size_t len, luna_error *err)
{
    struct group_version *gv = ud;
    char *b = realloc(gv->body, gv->body_len + len + 1);
    if (!b)
        return luna_error_set(err, LUNA_ENOMEM, "out of memory");
    memcpy(b + gv->body_len, data, len);
    gv->body_len += len;
    b[gv->body_len] = '\0';
    gv->body = b;
    return 0;
}

/* Answers every waiting resolve of gv (callbacks may start new resolves). */
static void answer_waits(struct group_version *gv, const luna_error *fetch_err)
{
    struct luna_discovery_wait *waits = gv->waits;
    gv->waits = NULL;
    while (waits) {
        struct luna_discovery_wait *w = waits;
        waits = w->next;
        const struct luna_resource *res = fetch_err ? NULL : find_kind(gv, w->kind);
        if (res) {
            w->fn(w->ud, res, NULL);
        } else {
            luna_error e;
            if (fetch_err)
                e = *fetch_err;
            else
                luna_error_set(&e, LUNA_ENOMATCH, "no matches for kind \"%s\" in version "
                               "\"%s%s%s\"%s", w->kind, gv->group, *gv->group ? "/" : "",
                               gv->version, gv->served ? "" : ": the server does not serve "
                               "that group-version");
            w->fn(w->ud, NULL, &e);
        }
        wait_free(w);
    }
}

static void on_fetched(void *ud, const luna_http_response *resp, const luna_http_failure *fail)
{
    struct group_version *gv = ud;
    gv->req = NULL;
    luna_error err = { 0 };
    int rc = 0;
    if (fail) {
        err = fail->err;
        rc = err.code ? err.code : LUNA_EIO;
    } else if (resp->status == 404) {
        /* The server answered: it serves nothing under that group-version
         * (a real kube-apiserver says so with a plain-text 404, the dev
         * server with a Status; the body is not looked at).  Every kind
         * asked for is then no match, not a failed discovery. */
        gv_clear_resources(gv);
        gv->cached = true;
        gv->served = false;
    } else if (resp->status != 200) {
        rc = luna_error_set(&err, LUNA_EIO, "discovery of %s%s%s failed: HTTP %ld", gv->group,
                            *gv->group ? "/" : "", gv->version, resp->status);
    } else {
        struct luna_resource *res;
        size_t n;
        rc = luna_discovery_parse(gv->body ? gv->body : "", gv->body_len, gv->group, gv->version,
                                  &res, &n, &err);
        if (rc == 0) {
            gv_clear_resources(gv);
            gv->resources = res;
            gv->n = n;
            gv->cached = true;
            gv->served = true;
        }
    }
    free(gv->body);
    gv->body = NULL;
    gv->body_len = 0;
    answer_waits(gv, rc < 0 ? &err : NULL);
    /* Only served group-versions are kept: a miss is fetched again on the
     * next resolve anyway, and keeping every group-version ever asked for
     * let a script grow this list (and its linear lookups) without bound
     * by asking for made-up kinds.  Unless a callback asked again meanwhile. */
    if (!gv->req && !gv->waits && !(gv->cached && gv->served))
        gv_drop(gv);
}

static int fetch(struct luna_discovery *d, struct group_version *gv, luna_error *err)
{
    if (gv->req)
        return 0;
    char path[512];
    if (*gv->group)
        snprintf(path, sizeof path, "/apis/%s/%s", gv->group, gv->version);
    else
        snprintf(path, sizeof path, "/api/%s", gv->version);
    struct luna_kube_request_options o = {
        .path = path, .timeout = 30, .on_chunk = on_body, .on_done = on_fetched, .ud = gv,
    };
    gv->req = luna_kube_request_start(d->kc, &o, err);
    return gv->req ? 0 : (err ? err->code : LUNA_EIO);
}

struct luna_discovery_wait *luna_discovery_resolve(struct luna_discovery *d, const char *group,
                                                   const char *version, const char *kind,
                                                   luna_discovery_fn fn, void *ud,
                                                   luna_error *err)
{
    const struct luna_resource *hit = luna_discovery_lookup(d, group, version, kind);
    if (hit) {
        fn(ud, hit, NULL);
        return NULL;
    }
    struct group_version *gv = find_gv(d, group, version, true);
    struct luna_discovery_wait *w = gv ? calloc(1, sizeof *w) : NULL;
    if (!w || !(w->kind = strdup(kind))) {
        free(w);
        luna_error_set(err, LUNA_ENOMEM, "out of memory");
        return NULL;
    }
    w->gv = gv;
    w->fn = fn;
    w->ud = ud;
    if (fetch(d, gv, err) < 0) {
        wait_free(w);
        if (!gv->req && !gv->waits && !(gv->cached && gv->served))
            gv_drop(gv);
        return NULL;
    }
    w->next = gv->waits;
    gv->waits = w;
    return w;
}

void luna_discovery_cancel(struct luna_discovery_wait *w)
{
    if (!w)
        return;
    struct luna_discovery_wait **p = &w->gv->waits;
    while (*p && *p != w)
        p = &(*p)->next;
    if (*p) {
        *p = w->next;
        wait_free(w);
    }
}
