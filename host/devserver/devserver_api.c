/* devserver_api.c — see devserver_api.h. */
#include "devserver/devserver_api.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "devserver/devserver_apply.h"
#include "devserver/devserver_faults.h"
#include "devserver/devserver_patch.h"
#include "devserver/devserver_filter.h"
#include "devserver/devserver_status.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"
#include "devserver/devserver_yaml.h"
#include "base/loop.h"

static luna_ds_api_config config;

/* ---- small helpers ---- */

static void now_rfc3339(char out[32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void new_uid(char out[37])
{
    unsigned char b[16];
    if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b) {
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (unsigned char)rand();
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
             b[12], b[13], b[14], b[15]);
}

static const char *sget(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static json_t *meta(json_t *doc)
{
    json_t *md = json_object_get(doc, "metadata");
    if (!json_is_object(md)) {
        md = json_object();
        json_object_set_new(doc, "metadata", md);
    }
    return md;
}

static void set_rv(json_t *doc, uint64_t rv)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)rv);
    json_object_set_new(meta(doc), "resourceVersion", json_string(buf));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A copy of a JSON object with its keys in sorted order (Go writes map
 * keys sorted), or a new reference to it when it is not an object. */
static json_t *sorted_map(json_t *obj)
{
    size_t n = json_is_object(obj) ? json_object_size(obj) : 0;
    if (n < 2)
        return json_incref(obj);
    const char **keys = malloc(n * sizeof *keys);
    if (!keys)
        abort();
    size_t i = 0;
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v)
        keys[i++] = k;
    qsort(keys, n, sizeof *keys, cmp_str);
    json_t *out = json_object();
    for (i = 0; i < n; i++)
        json_object_set(out, keys[i], json_object_get(obj, keys[i]));
    free(keys);
    return out;
}

/* Puts kind, apiVersion, metadata first, metadata's keys in kube's order
 * and the label and annotation maps in key order, as kube writes them. */
static void normalize(json_t *doc)
{
    static const char *const top[] = { "kind", "apiVersion", "metadata" };
    static const char *const md_order[] = { "name", "generateName", "namespace", "selfLink",
        "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
        "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
        "finalizers", "managedFields" };
    json_t *md = json_object_get(doc, "metadata");
    if (json_is_object(md)) {
        json_t *nm = json_object();
        for (size_t i = 0; i < sizeof md_order / sizeof *md_order; i++) {
            json_t *v = json_object_get(md, md_order[i]);
            if (v && (strcmp(md_order[i], "labels") == 0 || strcmp(md_order[i], "annotations") == 0))
                json_object_set_new(nm, md_order[i], sorted_map(v));
            else if (v)
                json_object_set(nm, md_order[i], v);
        }
        const char *k;
        json_t *v;
        json_object_foreach(md, k, v)
            if (!json_object_get(nm, k))
                json_object_set(nm, k, v);
        json_object_set_new(doc, "metadata", nm);
    }
    json_t *copy = json_object();
    for (size_t i = 0; i < 3; i++) {
        json_t *v = json_object_get(doc, top[i]);
        if (v)
            json_object_set(copy, top[i], v);
    }
    const char *k;
    json_t *v;
    json_object_foreach(doc, k, v)
        if (!json_object_get(copy, k))
            json_object_set(copy, k, v);
    json_object_clear(doc);
    json_object_update(doc, copy);
    json_decref(copy);
}

static void respond_bytes(luna_ds_response *resp, int code, char *body)
{
    resp->code = code;
    resp->body = body;
    resp->len = strlen(body);
}

/* Takes ownership of doc. */
static void respond_json(luna_ds_response *resp, int code, json_t *doc)
{
    char *s = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    size_t n = strlen(s);
    char *b = realloc(s, n + 2);
    if (!b)
        abort();
    b[n] = '\n';
    b[n + 1] = '\0';
    respond_bytes(resp, code, b);
}

static void respond_status(luna_ds_response *resp, luna_ds_status *st)
{
    resp->retry_after = st->retry_after;
    respond_json(resp, st->code, luna_ds_status_json(st));
    luna_ds_status_clear(st);
}

static const char *arg(const luna_ds_request *req, const char *name)
{
    return req->arg ? req->arg(req->arg_ctx, name) : NULL;
}

static bool arg_true(const luna_ds_request *req, const char *name)
{
    const char *v = arg(req, name);
    return v && (strcmp(v, "true") == 0 || strcmp(v, "1") == 0);
}

static luna_ds_type *storage_of(luna_ds_type *t)
{
    luna_ds_type *s = luna_ds_types_storage(t->coll);
    return s ? s : t;
}

/* The object as a document of type t's version (caller owns). */
static json_t *doc_as(luna_ds_type *t, const luna_ds_obj *o)
{
    json_t *doc = luna_ds_obj_doc(o);
    luna_ds_type *s = storage_of(t);
    if (s != t)
        luna_ds_types_convert(doc, s, t);
    return doc;
}

static void make_key(char *out, size_t n, const luna_ds_type *t, const char *ns, const char *name)
{
    if (t->namespaced)
        snprintf(out, n, "%s/%s", ns, name);
    else
        snprintf(out, n, "%s", name);
}

static luna_ds_type *find_storage_type(const char *group, const char *resource)
{
    for (luna_ds_type *t = luna_ds_types_all(); t; t = t->next)
        if (t->storage && strcmp(t->group, group) == 0 && strcmp(t->resource, resource) == 0)
            return t;
    return NULL;
}

static luna_ds_type *namespaces_type(void)
{
    return find_storage_type("", "namespaces");
}

/* ---- validation ---- */

static bool dns_label(const char *s, size_t n, bool letter_first)
{
    if (n == 0 || n > 63)
        return false;
    if (letter_first ? !islower((unsigned char)s[0])
                     : !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
        return false;
    if (!(islower((unsigned char)s[n - 1]) || isdigit((unsigned char)s[n - 1])))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-')
            return false;
    return true;
}

static bool dns_subdomain(const char *s)
{
    size_t len = strlen(s);
    if (len == 0 || len > 253)
        return false;
    const char *p = s;
    for (;;) {
        size_t n = strcspn(p, ".");
        if (!dns_label(p, n, false))
            return false;
        if (!p[n])
            return true;
        p += n + 1;
    }
}

static int validate_name(const luna_ds_type *t, const char *name, luna_ds_status *st)
{
    if (strcmp(t->resource, "namespaces") == 0) {
        if (!dns_label(name, strlen(name), false))
            return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid",
                "metadata.name", "Invalid value: \"%s\": a lowercase RFC 1123 label must consist "
                "of lower case alphanumeric characters or '-', and must start and end with an "
                "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')", name);
        return 0;
    }
    if (strcmp(t->resource, "services") == 0) {
        if (!dns_label(name, strlen(name), true))
            return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid",
                "metadata.name", "Invalid value: \"%s\": a DNS-1035 label must consist of lower "
                "case alphanumeric characters or '-', start with an alphabetic character, and "
                "end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used "
                "for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')", name);
        return 0;
    }
    if (!dns_subdomain(name))
        return luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid",
            "metadata.name", "Invalid value: \"%s\": a lowercase RFC 1123 subdomain must consist "
            "of lower case alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')", name);
    return 0;
}

/* Parses a request body that must be a JSON object. */
static json_t *parse_body(const luna_ds_request *req, luna_ds_status *st)
{
    if (!req->body || req->body_len == 0) {
        luna_ds_status_bad_request(st, "the body of the request was empty");
        return NULL;
    }
    json_error_t e;
    json_t *doc = json_loadb(req->body, req->body_len, JSON_DECODE_ANY, &e);
    if (!doc) {
        luna_ds_status_bad_request(st, "json: invalid request body: %s (line %d, column %d)",
                                   e.text, e.line, e.column);
        return NULL;
    }
    if (!json_is_object(doc)) {
        luna_ds_status_bad_request(st, "json: cannot unmarshal %s into Go value of type "
                                   "struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; "
                                   "Kind string \"json:\\\"kind,omitempty\\\"\" }",
                                   json_is_array(doc) ? "array" : "value");
        json_decref(doc);
        return NULL;
    }
    return doc;
}

/* Checks kind/apiVersion of a body against the path's type, filling them in
 * when absent. */
static int check_kind(luna_ds_type *t, json_t *doc, luna_ds_status *st)
{
    const char *kind = sget(doc, "kind");
    const char *av = sget(doc, "apiVersion");
    json_t *jk = json_object_get(doc, "kind"), *jav = json_object_get(doc, "apiVersion");
    if ((jk && !json_is_string(jk)) || (jav && !json_is_string(jav)))
        return luna_ds_status_bad_request(st, "Object 'Kind' is missing or not a string");
    if (kind && *kind && strcmp(kind, t->kind) != 0)
        return luna_ds_status_bad_request(st, "%s in version \"%s\" cannot be handled as a %s: "
                                          "no kind \"%s\" is registered for version \"%s\"",
                                          kind, av ? av : t->api_version, t->kind, kind,
                                          av ? av : t->api_version);
    if (av && *av && strcmp(av, t->api_version) != 0)
        return luna_ds_status_bad_request(st, "the API version in the data (%s) does not match "
                                          "the expected API version (%s)", av, t->api_version);
    json_object_set_new(doc, "kind", json_string(t->kind));
    json_object_set_new(doc, "apiVersion", json_string(t->api_version));
    json_t *md = json_object_get(doc, "metadata");
    if (md && !json_is_object(md))
        return luna_ds_status_bad_request(st, "metadata must be an object");
    meta(doc);
    return 0;
}

static int check_namespace(luna_ds_type *t, json_t *doc, const char *ns, luna_ds_status *st)
{
    json_t *md = meta(doc);
    if (!t->namespaced) {
        json_object_del(md, "namespace");
        return 0;
    }
    const char *bns = sget(md, "namespace");
    if (bns && *bns && strcmp(bns, ns) != 0)
        return luna_ds_status_bad_request(st, "the namespace of the provided object does not "
                                          "match the namespace sent on the request");
    json_object_set_new(md, "namespace", json_string(ns));
    return 0;
}

/* 404 when the namespace does not exist; 403 on create in a terminating one. */
static int namespace_usable(luna_ds_type *t, const char *ns, const char *name, bool creating,
                            luna_ds_status *st)
{
    if (!t->namespaced)
        return 0;
    luna_ds_obj *n = luna_ds_store_get(namespaces_type()->coll, ns);
    if (!n)
        return luna_ds_status_not_found(st, "", "namespaces", ns);
    if (creating && n->deleting) {
        luna_ds_status_set(st, 403, "Forbidden", "%s%s%s \"%s\" is forbidden: unable to create new "
                           "content in namespace %s because it is being terminated", t->resource,
                           *t->group ? "." : "", t->group, name, ns);
        st->details = json_pack("{s:s,s:s}", "name", name, "kind", t->resource);
        return -403;
    }
    return 0;
}

static const char *manager_of(const luna_ds_request *req, char *buf, size_t n)
{
    const char *m = arg(req, "fieldManager");
    if (m && *m)
        return m;
    const char *ua = req->user_agent ? req->user_agent : "unknown";
    size_t len = strcspn(ua, "/");
    if (len >= n)
        len = n - 1;
    memcpy(buf, ua, len);
    buf[len] = '\0';
    return buf;
}

/* Secrets: stringData folds into data (base64), type defaults to Opaque. */
static void secret_defaults(luna_ds_type *t, json_t *doc)
{
    if (t->custom || strcmp(t->resource, "secrets") != 0 || *t->group)
        return;
    json_t *sd = json_object_get(doc, "stringData");
    if (json_is_object(sd)) {
        json_t *data = json_object_get(doc, "data");
        if (!json_is_object(data)) {
            data = json_object();
            json_object_set_new(doc, "data", data);
        }
        const char *k;
        json_t *v;
        json_object_foreach(sd, k, v) {
            const char *s = json_string_value(v);
            if (!s)
                continue;
            size_t n = strlen(s);
            unsigned char *out = malloc(4 * ((n + 2) / 3) + 1);
            if (!out)
                abort();
            EVP_EncodeBlock(out, (const unsigned char *)s, (int)n);
            json_object_set_new(data, k, json_string((char *)out));
            free(out);
        }
    }
    json_object_del(doc, "stringData");
    if (!sget(doc, "type"))
        json_object_set_new(doc, "type", json_string("Opaque"));
}

/* ---- writes ---- */

static void after_write(luna_ds_type *t, enum luna_ds_event_type type, const json_t *doc);
static bool has_string(const json_t *arr, const char *s);

/* Stores doc (type t's version, consumed) as the new state of its key, runs
 * the write hooks, and returns a new reference to the key's current object
 * (after the hooks' own writes), or for DELETED to the deleted state. */
static luna_ds_obj *store(luna_ds_type *t, enum luna_ds_event_type type, json_t *doc)
{
    luna_ds_type *s = storage_of(t);
    if (s != t)
        luna_ds_types_convert(doc, t, s);
    uint64_t rv = luna_ds_store_next_rv();
    set_rv(doc, rv);
    normalize(doc);
    luna_ds_obj *o = luna_ds_obj_new(doc, rv);
    luna_ds_obj_ref(o);
    luna_ds_store_put(s->coll, type, o);
    after_write(s, type, doc);
    json_decref(doc);
    if (type != LUNA_DS_DELETED) {
        luna_ds_obj *cur = luna_ds_store_get(s->coll, o->key);
        if (cur && cur != o) {
            luna_ds_obj_ref(cur);
            luna_ds_obj_unref(o);
            return cur;
        }
    }
    return o;
}

static void gc_after_removal(const char *uid);
static void namespace_maybe_finalize(const char *ns);

/* Removes the object for good (a DELETED event at a new RV). */
static luna_ds_obj *remove_object(luna_ds_type *t, luna_ds_obj *cur)
{
    luna_ds_type *s = storage_of(t);
    json_t *doc = luna_ds_obj_doc(cur);
    char *uid = strdup(cur->uid);
    char *ns = strdup(cur->ns);
    luna_ds_obj *o = store(s, LUNA_DS_DELETED, doc);
    gc_after_removal(uid);
    if (*ns)
        namespace_maybe_finalize(ns);
    free(uid);
    free(ns);
    return o; /* caller unrefs */
}

/* Content of doc without metadata (and status when it is a subresource). */
static json_t *spec_part(const json_t *doc, bool drop_status)
{
    json_t *c = json_deep_copy(doc);
    json_object_del(c, "metadata");
    if (drop_status)
        json_object_del(c, "status");
    return c;
}

static bool has_string(const json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
            return true;
    return false;
}

/* The update pipeline shared by PUT, PATCH, apply and the server's own
 * writes.  newdoc (t's version, consumed) replaces cur.  subresource NULL
 * or "status".  manager NULL: managedFields already computed (apply) or
 * not tracked (server writes).  *out gets the stored state (or cur for a
 * no-op), as a new document in t's version; NULL if the write removed the
 * object. */
static int commit_update(luna_ds_type *t, luna_ds_obj *cur, json_t *newdoc, const char *sub,
                         const char *manager, json_t **out, luna_ds_status *st)
{
    json_t *old = doc_as(t, cur);
    json_t *omd = meta(old);
    json_t *nmd = meta(newdoc);
    const char *name = cur->name;
    /* preconditions */
    const char *nrv = sget(nmd, "resourceVersion");
    const char *orv = sget(omd, "resourceVersion");
    if (nrv && *nrv && strcmp(nrv, orv) != 0) {
        json_decref(old);
        json_decref(newdoc);
        return luna_ds_status_conflict(st, t->group, t->resource, name,
                                       "the object has been modified; please apply your changes "
                                       "to the latest version and try again");
    }
    const char *nuid = sget(nmd, "uid");
    if (nuid && *nuid && strcmp(nuid, cur->uid) != 0) {
        luna_ds_status_conflict(st, t->group, t->resource, name, "");
        snprintf(st->message, sizeof st->message, "Precondition failed: UID in precondition: %s, "
                 "UID in object meta: %s", nuid, cur->uid);
        json_decref(old);
        json_decref(newdoc);
        return -409;
    }
    json_t *result;
    if (sub) {
        /* status: only status (and managedFields) change */
        result = json_deep_copy(old);
        json_t *status = json_object_get(newdoc, "status");
        if (status)
            json_object_set(result, "status", status);
        else
            json_object_del(result, "status");
        json_t *mf = json_object_get(nmd, "managedFields");
        if (!manager && mf)
            json_object_set(meta(result), "managedFields", mf);
        json_decref(newdoc);
    } else {
        result = newdoc;
        json_t *rmd = meta(result);
        static const char *const system[] = { "uid", "creationTimestamp", "deletionTimestamp",
                                              "deletionGracePeriodSeconds", "generation" };
        for (size_t i = 0; i < sizeof system / sizeof *system; i++) {
            json_t *v = json_object_get(omd, system[i]);
            if (v)
                json_object_set(rmd, system[i], v);
            else
                json_object_del(rmd, system[i]);
        }
        json_object_set_new(rmd, "name", json_string(name));
        if (t->namespaced)
            json_object_set_new(rmd, "namespace", json_string(cur->ns));
        if (manager || !json_object_get(rmd, "managedFields")) {
            json_t *mf = json_object_get(omd, "managedFields");
            if (mf)
                json_object_set(rmd, "managedFields", mf);
        }
        if (t->has_status) {
            json_t *status = json_object_get(old, "status");
            if (status)
                json_object_set(result, "status", status);
            else
                json_object_del(result, "status");
        }
        secret_defaults(t, result);
        /* no new finalizers while being deleted */
        if (cur->deleting) {
            json_t *nf = json_object_get(rmd, "finalizers");
            json_t *of = json_object_get(omd, "finalizers");
            size_t i;
            json_t *v;
            json_array_foreach(nf, i, v)
                if (json_is_string(v) && !has_string(of, json_string_value(v))) {
                    int rc = luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueForbidden",
                        "metadata.finalizers", "Forbidden: no new finalizers can be added if the "
                        "object is being deleted, found new finalizers []string{\"%s\"}",
                        json_string_value(v));
                    json_decref(old);
                    json_decref(result);
                    return rc;
                }
        }
        if (strcmp(t->resource, "customresourcedefinitions") == 0 && !t->custom) {
            int rc = luna_ds_types_crd_validate(result, st);
            if (rc < 0) {
                json_decref(old);
                json_decref(result);
                return rc;
            }
        }
        /* generation: bumped when anything but metadata (and status) changed */
        if (t->has_generation) {
            json_t *a = spec_part(old, t->has_status), *b = spec_part(result, t->has_status);
            json_int_t gen = json_integer_value(json_object_get(omd, "generation"));
            if (!json_equal(a, b))
                gen++;
            json_object_set_new(rmd, "generation", json_integer(gen ? gen : 1));
            json_decref(a);
            json_decref(b);
        }
    }
    json_t *rmd = meta(result);
    json_object_set_new(rmd, "resourceVersion", json_string(orv));
    if (manager) {
        char now[32];
        now_rfc3339(now);
        luna_ds_apply_track_update(result, old, t, manager, sub, now);
    }
    /* no-op: nothing stored, no event, same resourceVersion */
    json_t *a = json_deep_copy(old), *b = json_deep_copy(result);
    json_object_del(meta(a), "managedFields");
    json_object_del(meta(b), "managedFields");
    bool same = json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (same) {
        json_decref(result);
        *out = old;
        return 0;
    }
    json_decref(old);
    json_t *fin = json_object_get(rmd, "finalizers");
    if (json_is_array(fin) && json_array_size(fin) == 0)
        json_object_del(rmd, "finalizers");
    bool deleting = json_object_get(rmd, "deletionTimestamp") != NULL;
    if (deleting && json_array_size(json_object_get(rmd, "finalizers")) == 0) {
        /* the last finalizer is gone: the object goes now */
        luna_ds_obj *o = store(t, LUNA_DS_MODIFIED, result);
        luna_ds_obj *gone = remove_object(t, o);
        luna_ds_obj_unref(gone);
        luna_ds_obj_unref(o);
        *out = NULL;
        return 0;
    }
    luna_ds_obj *o = store(t, LUNA_DS_MODIFIED, result);
    *out = doc_as(t, o);
    luna_ds_obj_unref(o);
    return 0;
}

/* Creates doc (t's version, consumed; kind/namespace already checked).
 * manager NULL: managedFields already set (apply).  *out: the stored
 * document in t's version. */
static int commit_create(luna_ds_type *t, json_t *doc, const char *manager, json_t **out,
                         luna_ds_status *st)
{
    json_t *md = meta(doc);
    const char *ns = t->namespaced ? sget(md, "namespace") : "";
    const char *rv = sget(md, "resourceVersion");
    if (rv && *rv) {
        json_decref(doc);
        return luna_ds_status_set(st, 500, "InternalError",
                                  "Internal error occurred: resourceVersion should not be set on "
                                  "objects to be created");
    }
    const char *name = sget(md, "name");
    const char *gen = sget(md, "generateName");
    char genbuf[300];
    if ((!name || !*name) && gen && *gen) {
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
        unsigned char r[5];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            memset(r, 0, sizeof r);
        snprintf(genbuf, sizeof genbuf, "%.*s%c%c%c%c%c", 58, gen,
                 alphabet[r[0] % 27], alphabet[r[1] % 27], alphabet[r[2] % 27],
                 alphabet[r[3] % 27], alphabet[r[4] % 27]);
        json_object_set_new(md, "name", json_string(genbuf));
        name = sget(md, "name");
    }
    if (!name || !*name) {
        json_decref(doc);
        return luna_ds_status_invalid(st, t->group, t->kind, "", "FieldValueRequired",
                                      "metadata.name", "Required value: name or generateName is required");
    }
    int rc = validate_name(t, name, st);
    if (rc == 0)
        rc = namespace_usable(t, ns, name, true, st);
    if (rc == 0 && strcmp(t->resource, "customresourcedefinitions") == 0 && !t->custom)
        rc = luna_ds_types_crd_validate(doc, st);
    char key[600];
    make_key(key, sizeof key, t, ns ? ns : "", name);
    if (rc == 0 && luna_ds_store_get(t->coll, key))
        rc = luna_ds_status_already_exists(st, t->group, t->resource, name);
    if (rc < 0) {
        json_decref(doc);
        return rc;
    }
    char uid[37], now[32];
    new_uid(uid);
    now_rfc3339(now);
    json_object_set_new(md, "uid", json_string(uid));
    json_object_set_new(md, "creationTimestamp", json_string(now));
    json_object_del(md, "deletionTimestamp");
    json_object_del(md, "deletionGracePeriodSeconds");
    json_object_del(md, "selfLink");
    if (t->has_generation)
        json_object_set_new(md, "generation", json_integer(1));
    else
        json_object_del(md, "generation");
    json_t *fin = json_object_get(md, "finalizers");
    if (json_is_array(fin) && json_array_size(fin) == 0)
        json_object_del(md, "finalizers");
    if (t->has_status)
        json_object_del(doc, "status");
    if (!t->custom && !*t->group) {
        if (strcmp(t->resource, "pods") == 0)
            json_object_set_new(doc, "status", json_pack("{s:s}", "phase", "Pending"));
        else if (strcmp(t->resource, "namespaces") == 0) {
            json_t *spec = json_object_get(doc, "spec");
            if (!json_is_object(spec)) {
                spec = json_object();
                json_object_set_new(doc, "spec", spec);
            }
            json_object_set_new(spec, "finalizers", json_pack("[s]", "kubernetes"));
            json_object_set_new(doc, "status", json_pack("{s:s}", "phase", "Active"));
            json_t *labels = json_object_get(md, "labels");
            if (!json_is_object(labels)) {
                labels = json_object();
                json_object_set_new(md, "labels", labels);
            }
            json_object_set_new(labels, "kubernetes.io/metadata.name", json_string(name));
        } else if (strcmp(t->resource, "services") == 0)
            json_object_set_new(doc, "status", json_pack("{s:{}}", "loadBalancer"));
    }
    secret_defaults(t, doc);
    if (manager) {
        json_object_del(md, "managedFields");
        luna_ds_apply_track_update(doc, NULL, t, manager, NULL, now);
    }
    luna_ds_obj *o = store(t, LUNA_DS_ADDED, doc);
    *out = doc_as(t, o);
    luna_ds_obj_unref(o);
    return 0;
}

/* ---- deletion and garbage collection ---- */

enum propagation { PROP_BACKGROUND, PROP_FOREGROUND, PROP_ORPHAN };

/* Keys of the stored objects `want` accepts (given arg), each with its type.
 * Free with free_keys(). */
struct key_list {
    bool (*want)(const luna_ds_obj *o, const char *arg);
    const char *arg;
    struct { luna_ds_type *t; char *key; } *items;
    size_t n, cap;
};

static bool collect_key(void *ctx, luna_ds_obj *o)
{
    struct key_list *l = ctx;
    if (!l->want(o, l->arg))
        return true;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->items = realloc(l->items, l->cap * sizeof *l->items);
        if (!l->items)
            abort();
    }
    l->items[l->n].key = strdup(o->key);
    l->items[l->n].t = NULL;
    l->n++;
    return true;
}

/* Adds the wanted objects of every stored type (namespaced types only if
 * namespaced_only), grouped by type; returns how many the list holds. */
static size_t collect_keys(struct key_list *l, bool namespaced_only)
{
    for (luna_ds_type *t = luna_ds_types_all(); t; t = t->next) {
        if (!t->storage || (namespaced_only && !t->namespaced))
            continue;
        size_t before = l->n;
        luna_ds_store_each(t->coll, collect_key, l);
        for (size_t i = before; i < l->n; i++)
            l->items[i].t = t;
    }
    return l->n;
}

static void free_keys(struct key_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].key);
    free(l->items);
}

static bool owned_by(const luna_ds_obj *o, const char *uid)
{
    for (int i = 0; i < o->nowners; i++)
        if (strcmp(o->owner_uids[i], uid) == 0)
            return true;
    return false;
}

/* Keys of every object with an ownerReference to uid, grouped by type. */
static void find_dependents(const char *uid, struct key_list *d)
{
    d->want = owned_by;
    d->arg = uid;
    collect_keys(d, false);
}

static bool uid_exists_cb(void *ctx, luna_ds_obj *o)
{
    const char **uid = ctx;
    if (*uid && strcmp(o->uid, *uid) == 0) {
        *uid = NULL;
        return false;
    }
    return true;
}

static bool uid_exists(const char *uid)
{
    const char *probe = uid;
    for (luna_ds_type *t = luna_ds_types_all(); t && probe; t = t->next)
        if (t->storage)
            luna_ds_store_each(t->coll, uid_exists_cb, &probe);
    return probe == NULL;
}

static int do_delete(luna_ds_type *t, luna_ds_obj *cur, enum propagation prop, json_t **out,
                     bool *removed, luna_ds_status *st);

/* The garbage collector's and namespace finalizer's delete: do_delete with
 * its result and status dropped. */
static void delete_quietly(luna_ds_type *t, luna_ds_obj *o, enum propagation prop)
{
    json_t *out = NULL;
    bool removed;
    luna_ds_status st = { 0 };
    do_delete(t, o, prop, &out, &removed, &st);
    if (out)
        json_decref(out);
    luna_ds_status_clear(&st);
}

/* Drops the ownerReference to owner_uid from the object at key. */
static void drop_owner_ref(luna_ds_type *t, const char *key, const char *owner_uid)
{
    luna_ds_obj *o = luna_ds_store_get(t->coll, key);
    if (!o)
        return;
    json_t *doc = luna_ds_obj_doc(o);
    json_t *refs = json_object_get(meta(doc), "ownerReferences");
    for (size_t i = json_array_size(refs); i-- > 0;)
        if (strcmp(sget(json_array_get(refs, i), "uid") ? sget(json_array_get(refs, i), "uid") : "",
                   owner_uid) == 0)
            json_array_remove(refs, i);
    if (json_array_size(refs) == 0)
        json_object_del(meta(doc), "ownerReferences");
    json_t *out = NULL;
    luna_ds_status st = { 0 };
    json_object_del(meta(doc), "resourceVersion");
    commit_update(t, o, doc, NULL, "garbage-collector", &out, &st);
    if (out)
        json_decref(out);
    luna_ds_status_clear(&st);
}

/* Removes finalizer `name` from the object (which may then go). */
static void drop_finalizer(luna_ds_type *t, const char *key, const char *name)
{
    luna_ds_obj *o = luna_ds_store_get(t->coll, key);
    if (!o)
        return;
    json_t *doc = luna_ds_obj_doc(o);
    json_t *fin = json_object_get(meta(doc), "finalizers");
    bool changed = false;
    for (size_t i = json_array_size(fin); i-- > 0;)
        if (json_is_string(json_array_get(fin, i)) &&
            strcmp(json_string_value(json_array_get(fin, i)), name) == 0) {
            json_array_remove(fin, i);
            changed = true;
        }
    if (!changed) {
        json_decref(doc);
        return;
    }
    json_t *out = NULL;
    luna_ds_status st = { 0 };
    json_object_del(meta(doc), "resourceVersion");
    commit_update(t, o, doc, NULL, NULL, &out, &st);
    if (out)
        json_decref(out);
    luna_ds_status_clear(&st);
}

static bool has_finalizer(const luna_ds_obj *o, const char *name)
{
    if (o->nfinalizers == 0)
        return false;
    json_t *doc = luna_ds_obj_doc(o);
    bool has = has_string(json_object_get(meta(doc), "finalizers"), name);
    json_decref(doc);
    return has;
}

/* Runs the garbage collector's part for an owner being deleted with the
 * foreground or orphan policy (it carries that finalizer). */
static void gc_owner(luna_ds_type *t, const char *key)
{
    luna_ds_obj *o = luna_ds_store_get(t->coll, key);
    if (!o || !o->deleting)
        return;
    char *uid = strdup(o->uid);
    struct key_list d = { 0 };
    if (has_finalizer(o, "orphan")) {
        find_dependents(uid, &d);
        for (size_t i = 0; i < d.n; i++)
            drop_owner_ref(d.items[i].t, d.items[i].key, uid);
        drop_finalizer(t, key, "orphan");
    } else if (has_finalizer(o, "foregroundDeletion")) {
        find_dependents(uid, &d);
        for (size_t i = 0; i < d.n; i++) {
            luna_ds_obj *dep = luna_ds_store_get(d.items[i].t->coll, d.items[i].key);
            if (dep && !dep->deleting)
                delete_quietly(d.items[i].t, dep, PROP_FOREGROUND);
        }
        free_keys(&d);
        memset(&d, 0, sizeof d);
        find_dependents(uid, &d);
        if (d.n == 0)
            drop_finalizer(t, key, "foregroundDeletion");
    }
    free_keys(&d);
    free(uid);
}

/* After an object is gone: dependents whose every owner is gone are deleted
 * (background); others lose the reference.  Owners waiting in foreground
 * deletion for this object are re-examined. */
static void gc_after_removal(const char *uid)
{
    struct key_list d = { 0 };
    find_dependents(uid, &d);
    for (size_t i = 0; i < d.n; i++) {
        luna_ds_obj *dep = luna_ds_store_get(d.items[i].t->coll, d.items[i].key);
        if (!dep)
            continue;
        bool other_owner = false;
        for (int j = 0; j < dep->nowners; j++)
            if (strcmp(dep->owner_uids[j], uid) != 0 && uid_exists(dep->owner_uids[j]))
                other_owner = true;
        if (other_owner) {
            drop_owner_ref(d.items[i].t, d.items[i].key, uid);
        } else if (!dep->deleting) {
            delete_quietly(d.items[i].t, dep, PROP_BACKGROUND);
        }
    }
    free_keys(&d);
}

struct uid_finder {
    const char *uid;
    char key[600];
    bool found;
};

static bool find_uid_cb(void *ctx, luna_ds_obj *o)
{
    struct uid_finder *f = ctx;
    if (strcmp(o->uid, f->uid) == 0) {
        snprintf(f->key, sizeof f->key, "%s", o->key);
        f->found = true;
        return false;
    }
    return true;
}

/* Owners of a removed object that wait in foreground deletion get another
 * look: they go once their last dependent is gone. */
static void gc_recheck_owners(const json_t *doc)
{
    json_t *refs = json_object_get(json_object_get(doc, "metadata"), "ownerReferences");
    size_t i;
    json_t *r;
    json_array_foreach(refs, i, r) {
        const char *uid = sget(r, "uid");
        if (!uid)
            continue;
        for (luna_ds_type *t = luna_ds_types_all(); t; t = t->next) {
            if (!t->storage)
                continue;
            struct uid_finder f = { .uid = uid };
            luna_ds_store_each(t->coll, find_uid_cb, &f);
            if (!f.found)
                continue;
            luna_ds_obj *owner = luna_ds_store_get(t->coll, f.key);
            if (owner && owner->deleting)
                gc_owner(t, f.key);
            break;
        }
    }
}

static const char *deletion_reply_kind(luna_ds_type *t) { return t->resource; }

/* Deletes cur.  *out: the response document; *removed: whether the object
 * is gone. */
static int do_delete(luna_ds_type *t, luna_ds_obj *cur, enum propagation prop, json_t **out,
                     bool *removed, luna_ds_status *st)
{
    *removed = false;
    char key[600];
    snprintf(key, sizeof key, "%s", cur->key);
    json_t *doc = doc_as(t, cur);
    json_t *md = meta(doc);
    json_t *fin = json_object_get(md, "finalizers");
    if (!json_is_array(fin)) {
        fin = json_array();
        json_object_set_new(md, "finalizers", fin);
    }
    bool changed = false;
    if (prop == PROP_FOREGROUND && !has_string(fin, "foregroundDeletion")) {
        json_array_append_new(fin, json_string("foregroundDeletion"));
        changed = true;
    }
    if (prop == PROP_ORPHAN && !has_string(fin, "orphan")) {
        json_array_append_new(fin, json_string("orphan"));
        changed = true;
    }
    /* namespaces: contents go first */
    bool is_ns = strcmp(t->resource, "namespaces") == 0 && !*t->group && !t->custom;
    if (json_array_size(fin) == 0 && !is_ns) {
        json_decref(doc);
        char *uid = strdup(cur->uid);
        luna_ds_obj *gone = remove_object(t, cur);
        if (t->return_deleted)
            *out = doc_as(t, gone);
        else
            *out = luna_ds_status_success_delete(t->group, deletion_reply_kind(t), gone->name, uid);
        luna_ds_obj_unref(gone);
        free(uid);
        *removed = true;
        return 0;
    }
    if (json_array_size(fin) == 0)
        json_object_del(md, "finalizers");
    if (!cur->deleting) {
        char now[32];
        now_rfc3339(now);
        json_object_set_new(md, "deletionTimestamp", json_string(now));
        json_object_set_new(md, "deletionGracePeriodSeconds", json_integer(0));
        json_int_t gen = json_integer_value(json_object_get(md, "generation"));
        if (gen > 0)
            json_object_set_new(md, "generation", json_integer(gen + 1));
        if (is_ns) {
            json_t *status = json_object_get(doc, "status");
            if (!json_is_object(status)) {
                status = json_object();
                json_object_set_new(doc, "status", status);
            }
            json_object_set_new(status, "phase", json_string("Terminating"));
        }
        changed = true;
    }
    if (changed) {
        luna_ds_obj *o = store(t, LUNA_DS_MODIFIED, doc);
        *out = doc_as(t, o);
        luna_ds_obj_unref(o);
    } else {
        *out = doc;
    }
    if (is_ns) {
        namespace_maybe_finalize(cur->name);
    } else {
        gc_owner(t, key);
    }
    *removed = luna_ds_store_get(storage_of(t)->coll, key) == NULL;
    return 0;
}

static bool in_namespace(const luna_ds_obj *o, const char *ns)
{
    return strcmp(o->ns, ns) == 0;
}

static size_t namespace_contents(const char *ns, struct key_list *c)
{
    c->want = in_namespace;
    c->arg = ns;
    return collect_keys(c, true);
}

static bool finalizing_ns;

/* A terminating namespace: delete what is in it; once empty, remove it. */
static void namespace_maybe_finalize(const char *ns_name)
{
    luna_ds_type *nt = namespaces_type();
    luna_ds_obj *ns = luna_ds_store_get(nt->coll, ns_name);
    if (!ns || !ns->deleting || finalizing_ns)
        return;
    finalizing_ns = true;
    char *name = strdup(ns_name);
    struct key_list c = { 0 };
    namespace_contents(name, &c);
    for (size_t i = 0; i < c.n; i++) {
        luna_ds_obj *o = luna_ds_store_get(c.items[i].t->coll, c.items[i].key);
        if (o && !o->deleting)
            delete_quietly(c.items[i].t, o, PROP_BACKGROUND);
    }
    free_keys(&c);
    memset(&c, 0, sizeof c);
    size_t left = namespace_contents(name, &c);
    free_keys(&c);
    finalizing_ns = false;
    ns = luna_ds_store_get(nt->coll, name);
    if (left == 0 && ns) {
        json_t *doc = luna_ds_obj_doc(ns);
        json_object_del(json_object_get(doc, "spec"), "finalizers");
        json_object_del(meta(doc), "finalizers");
        luna_ds_obj *o = store(nt, LUNA_DS_MODIFIED, doc);
        luna_ds_obj *gone = remove_object(nt, o);
        luna_ds_obj_unref(gone);
        luna_ds_obj_unref(o);
    }
    free(name);
}

/* What the apiextensions controller writes once a CRD's names are
 * accepted: conditions NamesAccepted and Established, acceptedNames,
 * storedVersions.  Written (a MODIFIED) only when it differs. */
static void crd_set_status(luna_ds_type *t, const json_t *doc)
{
    json_t *spec = json_object_get(doc, "spec");
    json_t *names = json_deep_copy(json_object_get(spec, "names"));
    if (!json_is_object(names))
        return;
    const char *kind = sget(names, "kind");
    if (!sget(names, "listKind") && kind) {
        char lk[300];
        snprintf(lk, sizeof lk, "%sList", kind);
        json_object_set_new(names, "listKind", json_string(lk));
    }
    if (!sget(names, "singular") && kind) {
        char lower[256];
        size_t n = strlen(kind) < 255 ? strlen(kind) : 255;
        for (size_t i = 0; i < n; i++)
            lower[i] = (char)tolower((unsigned char)kind[i]);
        lower[n] = '\0';
        json_object_set_new(names, "singular", json_string(lower));
    }
    json_t *stored = json_array();
    json_t *old = json_object_get(doc, "status");
    json_t *old_stored = json_object_get(old, "storedVersions");
    size_t i;
    json_t *v;
    json_array_foreach(old_stored, i, v)
        json_array_append(stored, v);
    json_array_foreach(json_object_get(spec, "versions"), i, v)
        if (json_is_true(json_object_get(v, "storage")) && !has_string(stored, sget(v, "name")))
            json_array_append_new(stored, json_string(sget(v, "name")));
    json_t *old_conds = json_object_get(old, "conditions");
    if (json_equal(json_object_get(old, "acceptedNames"), names) &&
        json_equal(old_stored, stored) && json_array_size(old_conds) >= 2) {
        json_decref(names);
        json_decref(stored);
        return;
    }
    char now[32];
    now_rfc3339(now);
    json_t *conds = json_pack("[{s:s,s:s,s:s,s:s,s:s},{s:s,s:s,s:s,s:s,s:s}]",
                              "type", "NamesAccepted", "status", "True", "lastTransitionTime", now,
                              "reason", "NoConflicts", "message", "no conflicts found",
                              "type", "Established", "status", "True", "lastTransitionTime", now,
                              "reason", "InitialNamesAccepted",
                              "message", "the initial names have been accepted");
    json_t *copy = json_deep_copy(doc);
    json_object_set_new(copy, "status", json_pack("{s:o,s:o,s:o}", "conditions", conds,
                                                  "acceptedNames", names, "storedVersions", stored));
    luna_ds_obj *o = store(t, LUNA_DS_MODIFIED, copy);
    luna_ds_obj_unref(o);
}

/* Orphans: kube-controller-manager's garbage collector also deletes an
 * object written with ownerReferences none of which exists any more (a
 * dependent re-created by a controller racing its owner's deletion).  As
 * there, this happens shortly after the write, not inside it. */
struct orphan_check {
    luna_ds_type *t;
    char *key;
};
static struct orphan_check *orphan_checks;
static size_t n_orphan_checks, cap_orphan_checks;
static ev_timer orphan_timer;
static bool orphan_timer_ready;

static void orphan_sweep(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
    struct orphan_check *checks = orphan_checks;
    size_t n = n_orphan_checks;
    orphan_checks = NULL;
    n_orphan_checks = cap_orphan_checks = 0;
    for (size_t i = 0; i < n; i++) {
        luna_ds_obj *o = luna_ds_store_get(checks[i].t->coll, checks[i].key);
        bool orphan = o && !o->deleting && o->nowners > 0;
        for (int j = 0; orphan && j < o->nowners; j++)
            if (uid_exists(o->owner_uids[j]))
                orphan = false;
        if (orphan)
            delete_quietly(checks[i].t, o, PROP_BACKGROUND);
        free(checks[i].key);
    }
    free(checks);
}

static void check_orphan_later(luna_ds_type *t, const json_t *doc)
{
    json_t *refs = json_object_get(json_object_get(doc, "metadata"), "ownerReferences");
    if (!json_is_array(refs) || json_array_size(refs) == 0)
        return;
    json_t *m = json_object_get(doc, "metadata");
    const char *name = sget(m, "name"), *ns = sget(m, "namespace");
    if (!name)
        return;
    if (n_orphan_checks == cap_orphan_checks) {
        size_t cap = cap_orphan_checks ? 2 * cap_orphan_checks : 16;
        struct orphan_check *v = realloc(orphan_checks, cap * sizeof *v);
        if (!v)
            return;
        orphan_checks = v;
        cap_orphan_checks = cap;
    }
    char key[600];
    snprintf(key, sizeof key, "%s%s%s", t->namespaced && ns ? ns : "",
             t->namespaced && ns ? "/" : "", name);
    char *copy = strdup(key);
    if (!copy)
        return;
    orphan_checks[n_orphan_checks++] = (struct orphan_check){ t, copy };
    if (!orphan_timer_ready) {
        ev_timer_init(&orphan_timer, orphan_sweep, 0., 0.);
        orphan_timer_ready = true;
    }
    if (!ev_is_active(&orphan_timer)) {
        ev_timer_set(&orphan_timer, 0.05, 0.);
        ev_timer_start(luna_loop(), &orphan_timer);
    }
}

/* Hooks after every write (storage type). */
static void after_write(luna_ds_type *t, enum luna_ds_event_type type, const json_t *doc)
{
    if (type != LUNA_DS_DELETED)
        check_orphan_later(t, doc);
    if (!t->custom && strcmp(t->resource, "customresourcedefinitions") == 0) {
        const char *name = sget(json_object_get(doc, "metadata"), "name");
        if (type == LUNA_DS_DELETED) {
            /* the CRD's objects go with it */
            for (luna_ds_type *u = luna_ds_types_all(); u; u = u->next) {
                if (!u->custom || !u->storage || !u->served || strcmp(u->crd_name, name) != 0)
                    continue;
                luna_ds_obj **items;
                size_t n;
                luna_ds_store_snapshot(u->coll, 0, &items, &n);
                char **keys = calloc(n + 1, sizeof *keys);
                for (size_t i = 0; i < n; i++)
                    keys[i] = strdup(items[i]->key);
                free(items);
                for (size_t i = 0; i < n; i++) {
                    luna_ds_obj *o = luna_ds_store_get(u->coll, keys[i]);
                    if (o) {
                        luna_ds_obj *gone = remove_object(u, o);
                        luna_ds_obj_unref(gone);
                    }
                    free(keys[i]);
                }
                free(keys);
            }
            luna_ds_types_crd_remove(name);
        } else {
            luna_ds_types_crd_sync(doc);
            crd_set_status(t, doc);
        }
    }
    if (type == LUNA_DS_DELETED)
        gc_recheck_owners(doc);
}

/* ---- continue tokens ---- */

static char *encode_continue(uint64_t rv, const char *last_key)
{
    json_t *o = json_object();
    json_object_set_new(o, "v", json_string("meta.k8s.io/v1"));
    json_object_set_new(o, "rv", json_integer((json_int_t)rv));
    size_t n = strlen(last_key);
    char *start = malloc(n + 2);
    memcpy(start, last_key, n);
    start[n] = '\0';
    /* kube's start key is the last key followed by a NUL byte */
    json_object_set_new(o, "start", json_stringn(start, n + 1));
    free(start);
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(o);
    size_t len = strlen(s);
    unsigned char *b64 = malloc(4 * ((len + 2) / 3) + 1);
    int m = EVP_EncodeBlock(b64, (unsigned char *)s, (int)len);
    free(s);
    /* base64 RawURLEncoding: -_ and no padding */
    for (int i = 0; i < m; i++) {
        if (b64[i] == '+')
            b64[i] = '-';
        else if (b64[i] == '/')
            b64[i] = '_';
    }
    while (m > 0 && b64[m - 1] == '=')
        b64[--m] = '\0';
    return (char *)b64;
}

/* Returns 0 with rv and *start (malloc'd, without the trailing NUL). */
static int decode_continue(const char *tok, uint64_t *rv, char **start)
{
    size_t n = strlen(tok);
    char *b = malloc(n + 4);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        char c = tok[i];
        if (c == '-')
            c = '+';
        else if (c == '_')
            c = '/';
        else if (!isalnum((unsigned char)c) && c != '+' && c != '/' && c != '=') {
            free(b);
            return -1;
        }
        b[m++] = c;
    }
    while (m % 4)
        b[m++] = '=';
    b[m] = '\0';
    unsigned char *raw = malloc(m + 1);
    int len = EVP_DecodeBlock(raw, (unsigned char *)b, (int)m);
    free(b);
    if (len < 0) {
        free(raw);
        return -1;
    }
    while (len > 0 && raw[len - 1] == '\0')
        len--; /* EVP_DecodeBlock pads with zero bytes */
    json_t *o = json_loadb((char *)raw, (size_t)len, JSON_ALLOW_NUL, NULL);
    free(raw);
    if (!o)
        return -1;
    json_t *jrv = json_object_get(o, "rv");
    json_t *js = json_object_get(o, "start");
    if (!json_is_integer(jrv) || !json_is_string(js) || json_integer_value(jrv) <= 0 ||
        strcmp(sget(o, "v") ? sget(o, "v") : "", "meta.k8s.io/v1") != 0) {
        json_decref(o);
        return -1;
    }
    *rv = (uint64_t)json_integer_value(jrv);
    size_t sl = json_string_length(js);
    const char *sv = json_string_value(js);
    if (sl > 0 && sv[sl - 1] == '\0')
        sl--;
    *start = strndup(sv, sl);
    json_decref(o);
    return 0;
}

/* ---- request parsing shared by list and watch ---- */

static int parse_filter(const luna_ds_request *req, luna_ds_type *t, const char *ns,
                        luna_ds_filter *f, luna_ds_status *st)
{
    memset(f, 0, sizeof *f);
    luna_error err;
    if (luna_selector_parse(arg(req, "labelSelector"), LUNA_SELECTOR_LABELS, &f->labels, &err) < 0)
        return luna_ds_status_bad_request(st, "%s", err.msg);
    const char *allowed[64] = { "metadata.name", "metadata.namespace" };
    int n = 2;
    for (const char *const *p = t->fields; p && *p && n < 63; p++)
        allowed[n++] = *p;
    allowed[n] = NULL;
    if (luna_selector_parse_fields(arg(req, "fieldSelector"), allowed, &f->fields, &err) < 0) {
        luna_ds_filter_clear(f);
        return luna_ds_status_bad_request(st, "%s", err.msg);
    }
    if (ns && *ns) {
        f->ns = strdup(ns);
    }
    return 0;
}

static int parse_rv(const char *s, uint64_t *rv, luna_ds_status *st)
{
    char *end;
    if (!*s || strspn(s, "0123456789") != strlen(s))
        return luna_ds_status_bad_request(st, "invalid resource version: strconv.ParseUint: "
                                          "parsing \"%s\": invalid syntax", s);
    *rv = strtoull(s, &end, 10);
    return 0;
}

static int too_large(uint64_t rv, luna_ds_status *st)
{
    luna_ds_status_set(st, 504, "Timeout", "Timeout: Too large resource version: %llu, current: %llu",
                       (unsigned long long)rv, (unsigned long long)luna_ds_store_rv());
    st->details = json_pack("{s:[{s:s,s:s}],s:i}", "causes", "reason", "ResourceVersionTooLarge",
                            "message", "Too large resource version", "retryAfterSeconds", 1);
    return -504;
}

static int list_options_invalid(luna_ds_status *st, const char *field, const char *what)
{
    luna_ds_status_set(st, 422, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: %s: %s",
                       field, what);
    st->details = json_pack("{s:s,s:s,s:[{s:s,s:s,s:s}]}", "group", "meta.k8s.io", "kind",
                            "ListOptions", "causes", "reason", "FieldValueInvalid", "message",
                            what, "field", field);
    return -422;
}

/* ---- LIST ---- */

struct buf {
    char *p;
    size_t len, cap;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            abort();
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(struct buf *b, const char *s) { buf_add(b, s, strlen(s)); }

/* First index in the sorted items whose key is > after (or >= prefix). */
static size_t lower_bound(luna_ds_obj **items, size_t n, const char *key, bool strictly_after)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int d = strcmp(items[mid]->key, key);
        if (d < 0 || (strictly_after && d == 0))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void handle_watch(const luna_ds_request *req, luna_ds_type *t, const char *ns,
                         luna_ds_response *resp);

static void handle_list(const luna_ds_request *req, luna_ds_type *t, const char *ns,
                        luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    if (arg_true(req, "watch")) {
        handle_watch(req, t, ns, resp);
        return;
    }
    luna_ds_filter f;
    if (parse_filter(req, t, ns, &f, &st) < 0) {
        respond_status(resp, &st);
        return;
    }
    const char *rvs = arg(req, "resourceVersion");
    const char *match = arg(req, "resourceVersionMatch");
    const char *cont = arg(req, "continue");
    const char *lim = arg(req, "limit");
    long long limit = 0;
    if (lim && *lim) {
        char *end;
        limit = strtoll(lim, &end, 10);
        if (*end || limit < 0)
            limit = 0;
    }
    if (rvs && !*rvs)
        rvs = NULL;
    if (match && !*match)
        match = NULL;
    if (cont && !*cont)
        cont = NULL;
    uint64_t now = luna_ds_store_rv();
    uint64_t snap = now;
    char *start = NULL;
    int rc = 0;
    if (match && strcmp(match, "Exact") != 0 && strcmp(match, "NotOlderThan") != 0) {
        char what[256];
        snprintf(what, sizeof what, "Unsupported value: \"%s\": supported values: \"Exact\", "
                 "\"NotOlderThan\"", match);
        rc = list_options_invalid(&st, "resourceVersionMatch", what);
    } else if (match && !rvs) {
        rc = list_options_invalid(&st, "resourceVersionMatch",
                                  "Forbidden: resourceVersionMatch is forbidden unless "
                                  "resourceVersion is provided");
    } else if (match && cont) {
        rc = list_options_invalid(&st, "resourceVersionMatch",
                                  "Forbidden: resourceVersionMatch is forbidden when continue is provided");
    } else if (match && strcmp(match, "Exact") == 0 && strcmp(rvs, "0") == 0) {
        rc = list_options_invalid(&st, "resourceVersionMatch",
                                  "Forbidden: resourceVersionMatch \"exact\" is forbidden for "
                                  "resourceVersion \"0\"");
    } else if (cont) {
        if (rvs && strcmp(rvs, "0") != 0)
            rc = luna_ds_status_bad_request(&st, "specifying resource version is not allowed "
                                            "when using continue");
        else if (decode_continue(cont, &snap, &start) < 0)
            rc = luna_ds_status_bad_request(&st, "continue key is not valid: incorrect encoded "
                                            "start resourceVersion (version meta.k8s.io/v1)");
        else if (snap < luna_ds_store_floor(t->coll) || snap > now) {
            luna_ds_status_set(&st, 410, "Expired", "The provided continue parameter is too old "
                               "to display a consistent list result. You can start a new list "
                               "without the continue parameter, or use the continue token in "
                               "this response to retrieve the remainder of the results. "
                               "Continuing with the provided token results in an inconsistent "
                               "list - objects that were created, modified, or deleted between "
                               "the time the first chunk was returned and now may show up in "
                               "the list.");
            rc = -410;
        }
    } else if (rvs) {
        uint64_t want;
        rc = parse_rv(rvs, &want, &st);
        if (rc == 0 && want != 0) {
            if (want > now)
                rc = too_large(want, &st);
            else if (match && strcmp(match, "Exact") == 0) {
                if (want < luna_ds_store_floor(t->coll)) {
                    luna_ds_status_set(&st, 410, "Expired",
                                       "The resourceVersion for the provided list is too old.");
                    rc = -410;
                } else {
                    snap = want;
                }
            }
        } else if (rc == 0 && want == 0 && !match) {
            limit = 0; /* served "from the cache": kube ignores limit for RV 0 */
        }
    }
    if (rc < 0) {
        free(start);
        luna_ds_filter_clear(&f);
        respond_status(resp, &st);
        return;
    }
    luna_ds_obj **items;
    size_t n;
    luna_ds_store_snapshot(t->coll, snap == now ? 0 : snap, &items, &n);
    size_t i = 0, end = n;
    if (t->namespaced && f.ns) {
        char prefix[300];
        snprintf(prefix, sizeof prefix, "%s/", f.ns);
        i = lower_bound(items, n, prefix, false);
        prefix[strlen(prefix) - 1] = '0'; /* '/' + 1 */
        end = lower_bound(items, n, prefix, false);
    }
    if (start) {
        size_t s = lower_bound(items, n, start, true);
        if (s > i)
            i = s;
    }
    bool convert = storage_of(t) != t;
    bool selects = luna_ds_filter_selects(&f);
    struct buf b = { 0 };
    size_t est = 256;
    for (size_t k = i; k < end && (limit <= 0 || k - i < (size_t)limit); k++)
        est += items[k]->len + 1;
    b.p = malloc(est);
    b.cap = est;
    if (!b.p)
        abort();
    buf_str(&b, "{\"kind\":\"");
    buf_str(&b, t->list_kind);
    buf_str(&b, "\",\"apiVersion\":\"");
    buf_str(&b, t->api_version);
    buf_str(&b, "\",\"metadata\":{\"resourceVersion\":\"");
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)snap);
    buf_str(&b, num);
    buf_str(&b, "\"");
    size_t meta_end = b.len;
    buf_str(&b, "},\"items\":[");
    long long count = 0;
    size_t k = i;
    const char *last_key = NULL;
    for (; k < end; k++) {
        if (limit > 0 && count == limit)
            break;
        luna_ds_obj *o = items[k];
        if (selects && !luna_ds_filter_match(&f, o))
            continue;
        if (count)
            buf_add(&b, ",", 1);
        if (convert) {
            json_t *doc = doc_as(t, o);
            char *s = json_dumps(doc, JSON_COMPACT);
            buf_str(&b, s);
            free(s);
            json_decref(doc);
        } else {
            buf_add(&b, o->bytes, o->len);
        }
        count++;
        last_key = o->key;
    }
    buf_str(&b, "]}\n");
    if (limit > 0 && k < end && last_key) {
        /* more keys remain: a continue token, and a count without selectors */
        char *tok = encode_continue(snap, last_key);
        struct buf m = { 0 };
        buf_str(&m, ",\"continue\":\"");
        buf_str(&m, tok);
        buf_str(&m, "\"");
        if (!selects) {
            char rem[64];
            snprintf(rem, sizeof rem, ",\"remainingItemCount\":%zu", end - k);
            buf_str(&m, rem);
        }
        free(tok);
        /* splice into the metadata */
        struct buf out = { 0 };
        buf_add(&out, b.p, meta_end);
        buf_add(&out, m.p, m.len);
        buf_add(&out, b.p + meta_end, b.len - meta_end);
        free(b.p);
        free(m.p);
        b = out;
    }
    free(items);
    free(start);
    luna_ds_filter_clear(&f);
    resp->code = 200;
    resp->body = b.p;
    resp->len = b.len;
}

/* ---- WATCH ---- */

static void handle_watch(const luna_ds_request *req, luna_ds_type *t, const char *ns,
                         luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_watch_opts o = { .type = t, .bookmark_interval = config.bookmark_interval };
    if (parse_filter(req, t, ns, &o.filter, &st) < 0) {
        respond_status(resp, &st);
        return;
    }
    const char *rvs = arg(req, "resourceVersion");
    const char *match = arg(req, "resourceVersionMatch");
    const char *sie = arg(req, "sendInitialEvents");
    o.bookmarks = arg_true(req, "allowWatchBookmarks");
    o.send_initial_events = sie && strcmp(sie, "true") == 0;
    const char *ts = arg(req, "timeoutSeconds");
    if (ts && *ts)
        o.timeout = strtod(ts, NULL);
    int rc = 0;
    if (sie && (!match || strcmp(match, "NotOlderThan") != 0)) {
        rc = list_options_invalid(&st, "resourceVersionMatch",
                                  "Forbidden: sendInitialEvents requires setting "
                                  "resourceVersionMatch to NotOlderThan");
    } else if (o.send_initial_events && !o.bookmarks) {
        rc = list_options_invalid(&st, "allowWatchBookmarks",
                                  "Required value: allowWatchBookmarks must be set to true when "
                                  "sendInitialEvents is set");
    } else if (match && !sie) {
        rc = list_options_invalid(&st, "resourceVersionMatch",
                                  "Forbidden: resourceVersionMatch is forbidden for watch");
    } else if (rvs && *rvs && strcmp(rvs, "0") != 0) {
        rc = parse_rv(rvs, &o.rv, &st);
        if (rc == 0 && o.rv > luna_ds_store_rv())
            rc = too_large(o.rv, &st);
        o.start = LUNA_DS_WATCH_FROM_RV;
    } else {
        o.start = LUNA_DS_WATCH_FROM_STATE;
    }
    if (rc < 0) {
        luna_ds_filter_clear(&o.filter);
        respond_status(resp, &st);
        return;
    }
    resp->code = 200;
    resp->watch = luna_ds_watch_start(&o);
}

/* ---- single-object verbs ---- */

static void reply_doc(luna_ds_response *resp, int code, json_t *doc)
{
    respond_json(resp, code, doc);
}

static void handle_create(const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    json_t *doc = parse_body(req, &st);
    if (!doc || check_kind(t, doc, &st) < 0 || check_namespace(t, doc, ns, &st) < 0) {
        json_decref(doc);
        respond_status(resp, &st);
        return;
    }
    char mb[128];
    const char *manager = manager_of(req, mb, sizeof mb);
    json_t *out = NULL;
    if (commit_create(t, doc, manager, &out, &st) < 0) {
        respond_status(resp, &st);
        return;
    }
    reply_doc(resp, 201, out);
}

static luna_ds_obj *lookup(luna_ds_type *t, const char *ns, const char *name,
                           luna_ds_status *st)
{
    char key[600];
    make_key(key, sizeof key, t, ns, name);
    luna_ds_obj *o = luna_ds_store_get(t->coll, key);
    if (!o)
        luna_ds_status_not_found(st, t->group, t->resource, name);
    return o;
}

static void handle_get(luna_ds_type *t, const char *ns, const char *name, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_obj *o = lookup(t, ns, name, &st);
    if (!o) {
        respond_status(resp, &st);
        return;
    }
    if (storage_of(t) == t) {
        char *b = malloc(o->len + 2);
        if (!b)
            abort();
        memcpy(b, o->bytes, o->len);
        b[o->len] = '\n';
        b[o->len + 1] = '\0';
        resp->code = 200;
        resp->body = b;
        resp->len = o->len + 1;
        return;
    }
    reply_doc(resp, 200, doc_as(t, o));
}

static void handle_update(const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          const char *name, const char *sub, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    json_t *doc = parse_body(req, &st);
    if (!doc || check_kind(t, doc, &st) < 0 || check_namespace(t, doc, ns, &st) < 0) {
        json_decref(doc);
        respond_status(resp, &st);
        return;
    }
    const char *bname = sget(meta(doc), "name");
    if (bname && strcmp(bname, name) != 0) {
        luna_ds_status_bad_request(&st, "the name of the object (%s) does not match the name on "
                                   "the URL (%s)", bname, name);
        json_decref(doc);
        respond_status(resp, &st);
        return;
    }
    luna_ds_obj *cur = lookup(t, ns, name, &st);
    if (!cur) {
        json_decref(doc);
        respond_status(resp, &st);
        return;
    }
    char mb[128];
    const char *manager = manager_of(req, mb, sizeof mb);
    json_t *out = NULL;
    if (commit_update(t, cur, doc, sub, manager, &out, &st) < 0) {
        respond_status(resp, &st);
        return;
    }
    if (!out) {
        /* removed by the update (last finalizer dropped): kube answers the
         * final state */
        luna_ds_status_not_found(&st, t->group, t->resource, name);
        luna_ds_status_clear(&st);
        json_t *gone = json_pack("{s:s,s:s,s:{s:s}}", "kind", t->kind, "apiVersion",
                                 t->api_version, "metadata", "name", name);
        reply_doc(resp, 200, gone);
        return;
    }
    reply_doc(resp, 200, out);
}

static json_t *body_or_null(const luna_ds_request *req)
{
    if (!req->body || req->body_len == 0)
        return NULL;
    return json_loadb(req->body, req->body_len, 0, NULL);
}

static void handle_delete(const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          const char *name, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    json_t *opts = body_or_null(req);
    if (req->body_len && !opts) {
        luna_ds_status_bad_request(&st, "json: invalid DeleteOptions body");
        respond_status(resp, &st);
        return;
    }
    const char *policy = sget(opts, "propagationPolicy");
    if (!policy)
        policy = arg(req, "propagationPolicy");
    enum propagation prop = PROP_BACKGROUND;
    json_t *orphan = json_object_get(opts, "orphanDependents");
    const char *qorphan = arg(req, "orphanDependents");
    if (json_is_true(orphan) || (qorphan && strcmp(qorphan, "true") == 0))
        prop = PROP_ORPHAN;
    if (policy && *policy) {
        if (strcmp(policy, "Foreground") == 0)
            prop = PROP_FOREGROUND;
        else if (strcmp(policy, "Orphan") == 0)
            prop = PROP_ORPHAN;
        else if (strcmp(policy, "Background") == 0)
            prop = PROP_BACKGROUND;
        else {
            json_decref(opts);
            luna_ds_status_set(&st, 422, "Invalid", "DeleteOptions.meta.k8s.io \"\" is invalid: "
                               "propagationPolicy: Unsupported value: \"%s\": supported values: "
                               "\"Foreground\", \"Background\", \"Orphan\", \"nil\"", policy);
            respond_status(resp, &st);
            return;
        }
    }
    luna_ds_obj *cur = lookup(t, ns, name, &st);
    if (!cur) {
        json_decref(opts);
        respond_status(resp, &st);
        return;
    }
    json_t *pre = json_object_get(opts, "preconditions");
    const char *puid = sget(pre, "uid");
    const char *prv = sget(pre, "resourceVersion");
    if (puid && strcmp(puid, cur->uid) != 0) {
        luna_ds_status_conflict(&st, t->group, t->resource, name, "");
        snprintf(st.message, sizeof st.message, "Precondition failed: UID in precondition: %s, "
                 "UID in object meta: %s", puid, cur->uid);
        json_decref(opts);
        respond_status(resp, &st);
        return;
    }
    if (prv) {
        char cur_rv[32];
        snprintf(cur_rv, sizeof cur_rv, "%llu", (unsigned long long)cur->rv);
        if (strcmp(prv, cur_rv) != 0) {
            luna_ds_status_conflict(&st, t->group, t->resource, name, "");
            snprintf(st.message, sizeof st.message, "Precondition failed: ResourceVersion in "
                     "precondition: %s, ResourceVersion in object meta: %s", prv, cur_rv);
            json_decref(opts);
            respond_status(resp, &st);
            return;
        }
    }
    json_decref(opts);
    json_t *out = NULL;
    bool removed;
    do_delete(t, cur, prop, &out, &removed, &st);
    reply_doc(resp, 200, out);
}

static void handle_delete_collection(const luna_ds_request *req, luna_ds_type *t,
                                     const char *ns, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_filter f;
    if (parse_filter(req, t, ns, &f, &st) < 0) {
        respond_status(resp, &st);
        return;
    }
    luna_ds_obj **items;
    size_t n;
    luna_ds_store_snapshot(t->coll, 0, &items, &n);
    char **keys = calloc(n + 1, sizeof *keys);
    size_t nk = 0;
    for (size_t i = 0; i < n; i++)
        if (luna_ds_filter_match(&f, items[i]))
            keys[nk++] = strdup(items[i]->key);
    free(items);
    luna_ds_filter_clear(&f);
    struct buf b = { 0 };
    buf_str(&b, "{\"kind\":\"");
    buf_str(&b, t->list_kind);
    buf_str(&b, "\",\"apiVersion\":\"");
    buf_str(&b, t->api_version);
    buf_str(&b, "\",\"metadata\":{},\"items\":[");
    size_t count = 0;
    for (size_t i = 0; i < nk; i++) {
        luna_ds_obj *o = luna_ds_store_get(t->coll, keys[i]);
        free(keys[i]);
        if (!o)
            continue;
        json_t *doc = doc_as(t, o);
        json_t *out = NULL;
        bool removed;
        do_delete(t, o, PROP_BACKGROUND, &out, &removed, &st);
        json_decref(out);
        char *s = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        if (count++)
            buf_str(&b, ",");
        buf_str(&b, s);
        free(s);
    }
    free(keys);
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)luna_ds_store_rv());
    buf_str(&b, "]}\n");
    (void)num;
    resp->code = 200;
    resp->body = b.p;
    resp->len = b.len;
}

static bool content_type_is(const luna_ds_request *req, const char *want)
{
    const char *ct = req->content_type ? req->content_type : "";
    size_t n = strlen(want);
    return strncmp(ct, want, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

static void handle_patch(const luna_ds_request *req, luna_ds_type *t, const char *ns,
                         const char *name, const char *sub, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    enum { MERGE, JSONPATCH, STRATEGIC, APPLY } kind;
    if (content_type_is(req, "application/merge-patch+json"))
        kind = MERGE;
    else if (content_type_is(req, "application/json-patch+json"))
        kind = JSONPATCH;
    else if (content_type_is(req, "application/strategic-merge-patch+json"))
        kind = STRATEGIC;
    else if (content_type_is(req, "application/apply-patch+yaml") ||
             content_type_is(req, "application/apply-patch+json"))
        kind = APPLY;
    else {
        luna_ds_status_set(&st, 415, "UnsupportedMediaType", "the body of the request was in an "
                           "unknown format - accepted media types include: "
                           "application/json-patch+json, application/merge-patch+json, "
                           "application/apply-patch+yaml");
        respond_status(resp, &st);
        return;
    }
    if (kind == STRATEGIC && t->custom) {
        luna_ds_status_set(&st, 415, "UnsupportedMediaType", "the body of the request was in an "
                           "unknown format - accepted media types include: "
                           "application/json-patch+json, application/merge-patch+json, "
                           "application/apply-patch+yaml");
        respond_status(resp, &st);
        return;
    }
    if (!req->body || req->body_len == 0) {
        luna_ds_status_bad_request(&st, "the body of the request was empty");
        respond_status(resp, &st);
        return;
    }
    char mb[128];
    const char *manager = manager_of(req, mb, sizeof mb);
    if (kind == APPLY) {
        const char *fm = arg(req, "fieldManager");
        if (!fm || !*fm) {
            luna_ds_status_set(&st, 422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: "
                               "fieldManager: Required value: is required for apply patch");
            respond_status(resp, &st);
            return;
        }
        luna_error err = { 0 };
        json_t *docs = luna_ds_yaml_load(req->body, req->body_len, &err);
        json_t *applied = docs && json_array_size(docs) == 1 ? json_incref(json_array_get(docs, 0)) : NULL;
        json_decref(docs);
        if (!json_is_object(applied)) {
            json_decref(applied);
            luna_ds_status_bad_request(&st, "error decoding YAML: %s",
                                       err.msg[0] ? err.msg : "expected one object");
            respond_status(resp, &st);
            return;
        }
        if (!sget(applied, "apiVersion") || !sget(applied, "kind")) {
            luna_ds_status_bad_request(&st, "%s", !sget(applied, "kind") ? "Object 'Kind' is missing in the applied object"
                                                                        : "Object 'apiVersion' is missing");
            json_decref(applied);
            respond_status(resp, &st);
            return;
        }
        if (check_kind(t, applied, &st) < 0 || check_namespace(t, applied, ns, &st) < 0) {
            json_decref(applied);
            respond_status(resp, &st);
            return;
        }
        const char *aname = sget(meta(applied), "name");
        if (aname && strcmp(aname, name) != 0) {
            luna_ds_status_bad_request(&st, "the name of the object (%s) does not match the name "
                                       "on the URL (%s)", aname, name);
            json_decref(applied);
            respond_status(resp, &st);
            return;
        }
        json_object_set_new(meta(applied), "name", json_string(name));
        bool force = arg_true(req, "force");
        char key[600];
        make_key(key, sizeof key, t, ns, name);
        luna_ds_obj *cur = luna_ds_store_get(t->coll, key);
        char now[32];
        now_rfc3339(now);
        json_t *curdoc = cur ? doc_as(t, cur) : NULL;
        json_t *result = luna_ds_apply(curdoc, applied, t, fm, force, sub, now, &st);
        json_decref(applied);
        if (!result) {
            json_decref(curdoc);
            respond_status(resp, &st);
            return;
        }
        json_t *out = NULL;
        int rc;
        if (!cur) {
            json_decref(curdoc);
            if (sub) {
                json_decref(result);
                luna_ds_status_not_found(&st, t->group, t->resource, name);
                respond_status(resp, &st);
                return;
            }
            json_object_set_new(result, "kind", json_string(t->kind));
            json_object_set_new(result, "apiVersion", json_string(t->api_version));
            rc = commit_create(t, result, NULL, &out, &st);
            if (rc < 0) {
                respond_status(resp, &st);
                return;
            }
            reply_doc(resp, 201, out);
            return;
        }
        /* the applied resourceVersion (if any) is a precondition */
        json_t *arv = json_object_get(meta(result), "resourceVersion");
        (void)arv;
        json_decref(curdoc);
        rc = commit_update(t, cur, result, sub, NULL, &out, &st);
        if (rc < 0) {
            respond_status(resp, &st);
            return;
        }
        if (!out)
            out = json_pack("{s:s,s:s,s:{s:s}}", "kind", t->kind, "apiVersion", t->api_version,
                            "metadata", "name", name);
        reply_doc(resp, 200, out);
        return;
    }
    json_error_t je;
    json_t *patch = json_loadb(req->body, req->body_len, JSON_DECODE_ANY, &je);
    if (!patch) {
        luna_ds_status_bad_request(&st, "error decoding patch: %s", je.text);
        respond_status(resp, &st);
        return;
    }
    luna_ds_obj *cur = lookup(t, ns, name, &st);
    if (!cur) {
        json_decref(patch);
        respond_status(resp, &st);
        return;
    }
    json_t *doc = doc_as(t, cur);
    char msg[1024] = "";
    int rc = 0;
    if (kind == MERGE) {
        if (!json_is_object(patch))
            rc = 400, snprintf(msg, sizeof msg, "json: cannot unmarshal %s into Go value of type "
                               "map[string]interface {}", json_is_array(patch) ? "array" : "value");
        else
            doc = luna_ds_patch_merge(doc, patch);
    } else if (kind == JSONPATCH) {
        rc = luna_ds_patch_json(&doc, patch, msg, sizeof msg);
    } else {
        rc = luna_ds_patch_strategic(doc, patch, t, msg, sizeof msg);
    }
    json_decref(patch);
    if (rc == 0 && !json_is_object(doc)) {
        rc = 422;
        snprintf(msg, sizeof msg, "the patched object is not a JSON object");
    }
    if (rc) {
        json_decref(doc);
        if (rc == 400)
            luna_ds_status_bad_request(&st, "%s", msg);
        else
            luna_ds_status_set(&st, 422, "Invalid", "%s", msg);
        respond_status(resp, &st);
        return;
    }
    if (check_kind(t, doc, &st) < 0) {
        json_decref(doc);
        respond_status(resp, &st);
        return;
    }
    json_t *md = meta(doc);
    const char *pname = sget(md, "name");
    if (!pname || strcmp(pname, name) != 0) {
        luna_ds_status_invalid(&st, t->group, t->kind, name, "FieldValueInvalid", "metadata.name",
                               "Invalid value: \"%s\": field is immutable", pname ? pname : "");
        json_decref(doc);
        respond_status(resp, &st);
        return;
    }
    json_t *out = NULL;
    if (commit_update(t, cur, doc, sub, manager, &out, &st) < 0) {
        respond_status(resp, &st);
        return;
    }
    if (!out)
        out = json_pack("{s:s,s:s,s:{s:s}}", "kind", t->kind, "apiVersion", t->api_version,
                        "metadata", "name", name);
    reply_doc(resp, 200, out);
}

/* ---- routing ---- */

static void not_found_path(luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_status_set(&st, 404, "NotFound", "the server could not find the requested resource");
    respond_status(resp, &st);
}

static void method_not_allowed(luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_status_set(&st, 405, "MethodNotAllowed",
                       "the server does not allow this method on the requested resource");
    respond_status(resp, &st);
}

#define MAX_SEGS 12

static int split_path(const char *path, char *buf, size_t bufsize, char **segs)
{
    snprintf(buf, bufsize, "%s", path);
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(buf, "/", &save); s && n < MAX_SEGS; s = strtok_r(NULL, "/", &save))
        segs[n++] = s;
    return n;
}

static void handle_resource(const luna_ds_request *req, luna_ds_type *t, const char *ns,
                            const char *name, const char *sub, luna_ds_response *resp)
{
    const char *m = req->method;
    luna_ds_status st = { 0 };
    if (sub && (strcmp(sub, "status") != 0 || !t->has_status)) {
        not_found_path(resp);
        return;
    }
    if (t->namespaced && ns && *ns && !name && strcmp(m, "POST") != 0 && strcmp(m, "GET") != 0 &&
        strcmp(m, "DELETE") != 0) {
        method_not_allowed(resp);
        return;
    }
    if (!name) {
        if (strcmp(m, "GET") == 0) {
            handle_list(req, t, ns, resp);
        } else if (strcmp(m, "POST") == 0) {
            if (t->namespaced && (!ns || !*ns)) {
                method_not_allowed(resp);
                return;
            }
            handle_create(req, t, ns ? ns : "", resp);
        } else if (strcmp(m, "DELETE") == 0) {
            handle_delete_collection(req, t, ns, resp);
        } else {
            method_not_allowed(resp);
        }
        return;
    }
    if (t->namespaced && (!ns || !*ns)) {
        not_found_path(resp);
        return;
    }
    if (strcmp(m, "GET") == 0)
        handle_get(t, ns ? ns : "", name, resp);
    else if (strcmp(m, "PUT") == 0)
        handle_update(req, t, ns ? ns : "", name, sub, resp);
    else if (strcmp(m, "PATCH") == 0)
        handle_patch(req, t, ns ? ns : "", name, sub, resp);
    else if (strcmp(m, "DELETE") == 0 && !sub)
        handle_delete(req, t, ns ? ns : "", name, resp);
    else
        method_not_allowed(resp);
    (void)st;
}

static void handle_version(luna_ds_response *resp)
{
    json_t *v = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}",
                          "major", "1", "minor", "32", "gitVersion", "v1.32.0-luna." LUNA_VERSION,
                          "gitCommit", "0000000000000000000000000000000000000000",
                          "gitTreeState", "clean", "buildDate", "2025-01-01T00:00:00Z",
                          "goVersion", "go1.23.0", "compiler", "gc", "platform", "linux/amd64");
    respond_json(resp, 200, v);
}

static void handle_faults(const luna_ds_request *req, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    if (strcmp(req->method, "PUT") == 0 || strcmp(req->method, "POST") == 0) {
        char *spec = strndup(req->body ? req->body : "", req->body_len);
        char msg[256];
        int rc = luna_ds_faults_set(spec, msg, sizeof msg);
        free(spec);
        if (rc < 0) {
            luna_ds_status_bad_request(&st, "%s", msg);
            respond_status(resp, &st);
            return;
        }
    } else if (strcmp(req->method, "GET") != 0) {
        method_not_allowed(resp);
        return;
    }
    respond_json(resp, 200, luna_ds_faults_json());
}

void luna_ds_api_handle(const luna_ds_request *req, luna_ds_response *resp)
{
    memset(resp, 0, sizeof *resp);
    char buf[2048];
    char *s[MAX_SEGS];
    int n = split_path(req->path, buf, sizeof buf, s);
    bool get = strcmp(req->method, "GET") == 0;
    if (n == 1 && strcmp(s[0], "version") == 0 && get) {
        handle_version(resp);
        return;
    }
    if (n == 1 && (strcmp(s[0], "healthz") == 0 || strcmp(s[0], "livez") == 0 ||
                   strcmp(s[0], "readyz") == 0)) {
        respond_bytes(resp, 200, strdup("ok"));
        return;
    }
    if (n == 3 && strcmp(s[0], "luna") == 0 && strcmp(s[1], "v1") == 0) {
        if (strcmp(s[2], "dump") == 0 && get) {
            respond_json(resp, 200, luna_ds_api_dump());
            return;
        }
        if (strcmp(s[2], "faults") == 0 && config.admin) {
            handle_faults(req, resp);
            return;
        }
        not_found_path(resp);
        return;
    }
    if (n >= 2 && strcmp(s[0], "openapi") == 0 && strcmp(s[1], "v3") == 0 && get) {
        if (n == 2) {
            respond_json(resp, 200, luna_ds_types_openapi_index());
            return;
        }
        char gv[600] = "";
        for (int i = 2; i < n; i++) {
            strncat(gv, s[i], sizeof gv - strlen(gv) - 1);
            if (i + 1 < n)
                strncat(gv, "/", sizeof gv - strlen(gv) - 1);
        }
        json_t *doc = luna_ds_types_openapi_gv(gv);
        if (!doc)
            return not_found_path(resp);
        respond_json(resp, 200, doc);
        return;
    }
    const char *group, *version;
    int rest;
    if (n >= 1 && strcmp(s[0], "api") == 0) {
        if (n == 1) {
            if (!get)
                return method_not_allowed(resp);
            respond_json(resp, 200, luna_ds_types_api_versions(config.server_address));
            return;
        }
        group = "";
        version = s[1];
        rest = 2;
    } else if (n >= 1 && strcmp(s[0], "apis") == 0) {
        if (n == 1) {
            if (!get)
                return method_not_allowed(resp);
            respond_json(resp, 200, luna_ds_types_group_list());
            return;
        }
        if (n == 2) {
            json_t *g = luna_ds_types_group(s[1]);
            if (!g)
                return not_found_path(resp);
            respond_json(resp, 200, g);
            return;
        }
        group = s[1];
        version = s[2];
        rest = 3;
    } else {
        not_found_path(resp);
        return;
    }
    if (n == rest) {
        json_t *rl = luna_ds_types_resource_list(group, version);
        if (!rl || !get) {
            json_decref(rl);
            return rl ? method_not_allowed(resp) : not_found_path(resp);
        }
        respond_json(resp, 200, rl);
        return;
    }
    const char *ns = NULL, *res, *name = NULL, *sub = NULL;
    int k = rest;
    if (n - k >= 3 && strcmp(s[k], "namespaces") == 0) {
        ns = s[k + 1];
        res = s[k + 2];
        k += 3;
    } else {
        res = s[k];
        k += 1;
    }
    if (k < n)
        name = s[k++];
    if (k < n)
        sub = s[k++];
    if (k < n)
        return not_found_path(resp);
    luna_ds_type *t = luna_ds_types_find(group, version, res);
    if (!t && ns && !name && !*group && (strcmp(res, "status") == 0 || strcmp(res, "finalize") == 0)) {
        /* /api/v1/namespaces/NAME/status: the namespace's own subresource */
        t = luna_ds_types_find("", version, "namespaces");
        name = ns;
        sub = res;
        ns = NULL;
    }
    if (!t) {
        not_found_path(resp);
        return;
    }
    if (!t->namespaced && ns) {
        not_found_path(resp);
        return;
    }
    handle_resource(req, t, ns, name, sub, resp);
}

/* ---- seeding, dump, init ---- */

int luna_ds_api_seed(const json_t *doc, luna_error *err)
{
    if (!json_is_object(doc))
        return luna_error_set(err, LUNA_EINVAL, "seed document is not an object");
    const char *kind = sget(doc, "kind");
    const char *av = sget(doc, "apiVersion");
    json_t *items = json_object_get(doc, "items");
    if (kind && strlen(kind) >= 4 && strcmp(kind + strlen(kind) - 4, "List") == 0 &&
        json_is_array(items)) {
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
            int rc = luna_ds_api_seed(it, err);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (!kind || !av)
        return luna_error_set(err, LUNA_EINVAL, "seed object without apiVersion and kind");
    luna_ds_type *t = luna_ds_types_find_kind(av, kind);
    if (!t)
        return luna_error_set(err, LUNA_ENOTFOUND, "no resource for %s %s", av, kind);
    json_t *copy = json_deep_copy(doc);
    json_t *md = meta(copy);
    const char *ns = sget(md, "namespace");
    if (t->namespaced && (!ns || !*ns)) {
        json_object_set_new(md, "namespace", json_string("default"));
        ns = "default";
    }
    luna_ds_status st = { 0 };
    if (t->namespaced) {
        luna_ds_type *nt = namespaces_type();
        if (!luna_ds_store_get(nt->coll, ns)) {
            json_t *nsdoc = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind",
                                      "Namespace", "metadata", "name", ns);
            json_t *out = NULL;
            if (commit_create(nt, nsdoc, "luna-seed", &out, &st) < 0) {
                luna_error_set(err, LUNA_EINVAL, "namespace %s: %s", ns, st.message);
                luna_ds_status_clear(&st);
                json_decref(copy);
                return LUNA_EINVAL;
            }
            json_decref(out);
        }
    }
    json_object_del(md, "resourceVersion");
    const char *name = sget(md, "name");
    char key[600];
    make_key(key, sizeof key, t, ns ? ns : "", name ? name : "");
    luna_ds_obj *cur = name ? luna_ds_store_get(t->coll, key) : NULL;
    json_t *out = NULL;
    int rc;
    if (cur)
        rc = commit_update(t, cur, copy, NULL, "luna-seed", &out, &st);
    else
        rc = commit_create(t, copy, "luna-seed", &out, &st);
    if (rc < 0) {
        luna_error_set(err, LUNA_EINVAL, "%s %s: %s", kind, name ? name : "", st.message);
        luna_ds_status_clear(&st);
        return LUNA_EINVAL;
    }
    json_decref(out);
    return 0;
}

json_t *luna_ds_api_dump(void)
{
    json_t *items = json_array();
    for (luna_ds_type *t = luna_ds_types_all(); t; t = t->next) {
        if (!t->storage || !t->served)
            continue;
        luna_ds_obj **objs;
        size_t n;
        luna_ds_store_snapshot(t->coll, 0, &objs, &n);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(items, luna_ds_obj_doc(objs[i]));
        free(objs);
    }
    char rv[32];
    snprintf(rv, sizeof rv, "%llu", (unsigned long long)luna_ds_store_rv());
    return json_pack("{s:s,s:s,s:{s:s},s:o}", "kind", "List", "apiVersion", "v1", "metadata",
                     "resourceVersion", rv, "items", items);
}

void luna_ds_api_init(const luna_ds_api_config *cfg)
{
    config = *cfg;
    luna_ds_types_init();
    static const char *const defaults[] = { "default", "kube-node-lease", "kube-public",
                                            "kube-system" };
    luna_ds_type *nt = namespaces_type();
    for (size_t i = 0; i < 4; i++) {
        json_t *doc = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", "Namespace",
                                "metadata", "name", defaults[i]);
        json_t *out = NULL;
        luna_ds_status st = { 0 };
        if (commit_create(nt, doc, "kube-apiserver", &out, &st) == 0)
            json_decref(out);
        luna_ds_status_clear(&st);
    }
}

void luna_ds_api_shutdown(void)
{
    if (orphan_timer_ready)
        ev_timer_stop(luna_loop(), &orphan_timer);
    for (size_t i = 0; i < n_orphan_checks; i++)
        free(orphan_checks[i].key);
    free(orphan_checks);
    orphan_checks = NULL;
    n_orphan_checks = cap_orphan_checks = 0;
    luna_ds_types_shutdown();
}
