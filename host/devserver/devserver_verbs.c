/* devserver_verbs.c — see devserver_verbs.h. */
#include "devserver/devserver_verbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_apply.h"
#include "devserver/devserver_doc.h"
#include "devserver/devserver_fields.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_gc.h"
#include "devserver/devserver_list.h"
#include "devserver/devserver_patch.h"
#include "devserver/devserver_schema.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_validate.h"
#include "devserver/devserver_write.h"
#include "devserver/devserver_negotiate.h"
#include "devserver/devserver_yaml.h"
#include "base/textbuf.h"

void luna_ds_verbs_create(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    enum luna_ds_field_validation dv;
    if (luna_ds_fields_directive(req, "CreateOptions", &dv, &st) < 0) {
        luna_ds_reply_status(resp, &st);
        return;
    }
    json_t *doc = luna_ds_validate_body(req, &st);
    if (!doc || luna_ds_validate_object(t, doc, ns, NULL, &st) < 0 ||
        luna_ds_schema_decode(t, doc, 0, &st) < 0 ||
        luna_ds_fields_check(t, doc, dv, false, &resp->warnings, &st) < 0) {
        json_decref(doc);
        luna_ds_reply_status(resp, &st);
        return;
    }
    char mb[128];
    const char *manager = luna_ds_request_manager(req, mb, sizeof mb);
    json_t *out = NULL;
    if (luna_ds_write_create(ds, t, doc, manager, &out, &st) < 0) {
        luna_ds_reply_status(resp, &st);
        return;
    }
    luna_ds_reply_json(resp, 201, out);
}

static luna_ds_obj *lookup(luna_ds_type *t, const char *ns, const char *name,
                           luna_ds_status *st)
{
    char key[600];
    luna_ds_doc_key(key, sizeof key, t, ns, name);
    luna_ds_obj *o = luna_ds_store_get(t->coll, key);
    if (!o)
        luna_ds_status_not_found(st, t->group, t->resource, name);
    return o;
}

void luna_ds_verbs_get(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                       const char *name, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_output out;
    if (luna_ds_negotiate_route(req->accept, t, false, &st) < 0 ||
        luna_ds_negotiate(req->accept, t, &out, &st) < 0) {
        luna_ds_reply_status(resp, &st);
        return;
    }
    luna_ds_obj *o = lookup(t, ns, name, &st);
    if (!o) {
        luna_ds_reply_status(resp, &st);
        return;
    }
    /* kube converts after the object is read: a 404 comes first */
    if (out.as == LUNA_DS_AS_PARTIAL_LIST) {
        luna_ds_negotiate_mismatch(t, false, &st);
        luna_ds_reply_status(resp, &st);
        return;
    }
    if (out.as == LUNA_DS_AS_PARTIAL) {
        luna_ds_reply_json(resp, 200, luna_ds_partial_object(luna_ds_doc_as(ds, t, o),
                                                             out.meta_version));
        return;
    }
    if (luna_ds_types_storage_of(ds->types, t) == t) {
        char *b = malloc(o->len + 2);
        if (!b) {
            luna_ds_reply_oom(resp);
            return;
        }
        memcpy(b, o->bytes, o->len);
        b[o->len] = '\n';
        b[o->len + 1] = '\0';
        resp->code = 200;
        resp->body = b;
        resp->len = o->len + 1;
        return;
    }
    luna_ds_reply_json(resp, 200, luna_ds_doc_as(ds, t, o));
}

/* The reply to a write that removed the object (its last finalizer went):
 * kube answers the final state, which here is its kind and name. */
static json_t *final_state(const luna_ds_type *t, const char *name)
{
    return json_pack("{s:s,s:s,s:{s:s}}", "kind", t->kind, "apiVersion", t->api_version,
                     "metadata", "name", name);
}

/* Answers a write: resp gets code and *out (final_state when the write
 * removed the object), or the Status in st when rc < 0. */
static void reply_write(luna_ds_response *resp, int rc, int code, json_t *out,
                        const luna_ds_type *t, const char *name, luna_ds_status *st)
{
    if (rc < 0)
        luna_ds_reply_status(resp, st);
    else
        luna_ds_reply_json(resp, code, out ? out : final_state(t, name));
}

static int update(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                  const char *name, const char *sub, json_t **out, json_t **warnings,
                  luna_ds_status *st)
{
    enum luna_ds_field_validation dv;
    if (luna_ds_fields_directive(req, "UpdateOptions", &dv, st) < 0)
        return LUNA_EINVAL;
    json_t *doc = luna_ds_validate_body(req, st);
    if (!doc || luna_ds_validate_object(t, doc, ns, name, st) < 0 ||
        luna_ds_schema_decode(t, doc, 0, st) < 0 ||
        luna_ds_fields_check(t, doc, dv, false, warnings, st) < 0) {
        json_decref(doc);
        return LUNA_EINVAL;
    }
    luna_ds_obj *cur = lookup(t, ns, name, st);
    if (!cur) {
        json_decref(doc);
        return LUNA_ENOTFOUND;
    }
    char mb[128];
    const char *manager = luna_ds_request_manager(req, mb, sizeof mb);
    return luna_ds_write_update(ds, t, cur, doc, sub, manager, out, st);
}

void luna_ds_verbs_update(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          const char *name, const char *sub, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    json_t *out = NULL;
    int rc = update(ds, req, t, ns, name, sub, &out, &resp->warnings, &st);
    reply_write(resp, rc, 200, out, t, name, &st);
}

static json_t *body_or_null(const luna_ds_request *req)
{
    if (!req->body || req->body_len == 0)
        return NULL;
    return json_loadb(req->body, req->body_len, 0, NULL);
}

void luna_ds_verbs_delete(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          const char *name, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    json_t *opts = body_or_null(req);
    if (req->body_len && !opts) {
        luna_ds_status_bad_request(&st, "json: invalid DeleteOptions body");
        luna_ds_reply_status(resp, &st);
        return;
    }
    /* The options come from the body when there is one, and then the query
     * is ignored, as kube-apiserver's delete handler does. */
    const char *policy, *qorphan = NULL;
    json_t *orphan = NULL;
    if (opts) {
        policy = luna_ds_doc_str(opts, "propagationPolicy");
        orphan = json_object_get(opts, "orphanDependents");
    } else {
        policy = luna_ds_request_arg(req, "propagationPolicy");
        qorphan = luna_ds_request_arg(req, "orphanDependents");
    }
    enum luna_ds_propagation prop = LUNA_DS_PROP_BACKGROUND;
    if (json_is_true(orphan) || (qorphan && strcmp(qorphan, "true") == 0))
        prop = LUNA_DS_PROP_ORPHAN;
    if (policy && *policy) {
        if (strcmp(policy, "Foreground") == 0)
            prop = LUNA_DS_PROP_FOREGROUND;
        else if (strcmp(policy, "Orphan") == 0)
            prop = LUNA_DS_PROP_ORPHAN;
        else if (strcmp(policy, "Background") == 0)
            prop = LUNA_DS_PROP_BACKGROUND;
        else {
            /* policy may point into opts: the message is written first. */
            luna_ds_status_set(&st, 422, "Invalid", "DeleteOptions.meta.k8s.io \"\" is invalid: "
                               "propagationPolicy: Unsupported value: \"%s\": supported values: "
                               "\"Foreground\", \"Background\", \"Orphan\", \"nil\"", policy);
            json_decref(opts);
            luna_ds_reply_status(resp, &st);
            return;
        }
    }
    luna_ds_obj *cur = lookup(t, ns, name, &st);
    if (!cur) {
        json_decref(opts);
        luna_ds_reply_status(resp, &st);
        return;
    }
    json_t *pre = json_object_get(opts, "preconditions");
    const char *puid = luna_ds_doc_str(pre, "uid");
    const char *prv = luna_ds_doc_str(pre, "resourceVersion");
    if (puid && strcmp(puid, cur->uid) != 0) {
        luna_ds_status_conflict(&st, t->group, t->resource, name, "");
        snprintf(st.message, sizeof st.message, "Precondition failed: UID in precondition: %s, "
                 "UID in object meta: %s", puid, cur->uid);
        json_decref(opts);
        luna_ds_reply_status(resp, &st);
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
            luna_ds_reply_status(resp, &st);
            return;
        }
    }
    json_decref(opts);
    json_t *out = NULL;
    bool removed;
    if (luna_ds_gc_delete(ds, t, cur, prop, &out, &removed, &st) < 0) {
        json_decref(out);
        luna_ds_reply_status(resp, &st);
        return;
    }
    luna_ds_reply_json(resp, 200, out);
}

void luna_ds_verbs_delete_collection(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t,
                                     const char *ns, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    luna_ds_filter f;
    if (luna_ds_list_filter(req, t, ns, !ds->faults.ignore_shard_selector, &f, &st) < 0) {
        luna_ds_reply_status(resp, &st);
        return;
    }
    luna_ds_obj **items;
    size_t n;
    char **keys = NULL;
    size_t nk = 0;
    bool oom = luna_ds_store_snapshot(t->coll, 0, &items, &n) < 0;
    if (!oom) {
        keys = calloc(n + 1, sizeof *keys);
        oom = !keys;
        for (size_t i = 0; !oom && i < n; i++)
            if (luna_ds_filter_match(&f, items[i]) && !(keys[nk++] = strdup(items[i]->key)))
                oom = true;
        free(items);
    }
    luna_ds_filter_clear(&f);
    if (oom) {
        /* nothing deleted yet */
        for (size_t i = 0; i < nk; i++)
            free(keys[i]);
        free(keys);
        luna_ds_reply_oom(resp);
        return;
    }
    struct luna_textbuf b = LUNA_TEXTBUF_INIT;
    luna_textbuf_printf(&b, "{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{},"
                        "\"items\":[", t->list_kind, t->api_version);
    size_t count = 0;
    for (size_t i = 0; i < nk; i++) {
        luna_ds_obj *o = luna_ds_store_get(t->coll, keys[i]);
        free(keys[i]);
        if (!o)
            continue;
        json_t *doc = luna_ds_doc_as(ds, t, o);
        json_t *out = NULL;
        bool removed;
        int rc = luna_ds_gc_delete(ds, t, o, LUNA_DS_PROP_BACKGROUND, &out, &removed, &st);
        luna_ds_status_clear(&st);
        json_decref(out);
        char *s = doc && rc == 0 ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
        if (!s) {
            /* out of memory: what was deleted is gone; the answer says the rest */
            b.failed = true;
            continue;
        }
        if (count++)
            luna_textbuf_putc(&b, ',');
        luna_textbuf_puts(&b, s);
        free(s);
    }
    free(keys);
    luna_textbuf_puts(&b, "]}\n");
    if (b.failed) {
        luna_textbuf_free(&b);
        luna_ds_reply_oom(resp);
        return;
    }
    resp->code = 200;
    resp->body = luna_textbuf_steal(&b, &resp->len);
}

static bool content_type_is(const luna_ds_request *req, const char *want)
{
    const char *ct = req->content_type ? req->content_type : "";
    size_t n = strlen(want);
    return strncmp(ct, want, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

enum patch_kind { MERGE, JSONPATCH, STRATEGIC, APPLY, UNSUPPORTED };

static enum patch_kind patch_kind(const luna_ds_request *req, const luna_ds_type *t)
{
    if (content_type_is(req, "application/merge-patch+json"))
        return MERGE;
    if (content_type_is(req, "application/json-patch+json"))
        return JSONPATCH;
    if (content_type_is(req, "application/strategic-merge-patch+json"))
        return t->custom ? UNSUPPORTED : STRATEGIC;
    if (content_type_is(req, "application/apply-patch+yaml") ||
        content_type_is(req, "application/apply-patch+json"))
        return APPLY;
    return UNSUPPORTED;
}

/* Server-side apply: creates the object (201) or updates it (200). */
static int apply(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                 const char *name, const char *sub, int *code, json_t **out, luna_ds_status *st)
{
    const char *fm = luna_ds_request_arg(req, "fieldManager");
    if (!fm || !*fm)
        return luna_ds_status_set(st, 422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: "
                                  "fieldManager: Required value: is required for apply patch");
    luna_error err = { 0 };
    json_t *docs = luna_ds_yaml_load(req->body, req->body_len, &err);
    json_t *applied = docs && json_array_size(docs) == 1 ? json_incref(json_array_get(docs, 0)) : NULL;
    json_decref(docs);
    int rc = 0;
    if (!json_is_object(applied))
        rc = luna_ds_status_bad_request(st, "error decoding YAML: %s",
                                        err.msg[0] ? err.msg : "expected one object");
    else if (!luna_ds_doc_str(applied, "kind"))
        rc = luna_ds_status_bad_request(st, "Object 'Kind' is missing in the applied object");
    else if (!luna_ds_doc_str(applied, "apiVersion"))
        rc = luna_ds_status_bad_request(st, "Object 'apiVersion' is missing");
    else
        rc = luna_ds_validate_object(t, applied, ns, name, st);
    if (rc < 0) {
        json_decref(applied);
        return rc;
    }
    json_object_set_new(luna_ds_doc_meta(applied), "name", json_string(name));
    char key[600];
    luna_ds_doc_key(key, sizeof key, t, ns, name);
    luna_ds_obj *cur = luna_ds_store_get(t->coll, key);
    char now[32];
    luna_ds_doc_now(now);
    json_t *curdoc = cur ? luna_ds_doc_as(ds, t, cur) : NULL;
    json_t *result = luna_ds_apply(curdoc, applied, t, fm, luna_ds_request_flag(req, "force"),
                                   sub, now, st);
    json_decref(applied);
    json_decref(curdoc);
    if (!result)
        return LUNA_EINVAL;
    if (cur) {
        *code = 200;
        return luna_ds_write_update(ds, t, cur, result, sub, NULL, out, st);
    }
    if (sub) {
        json_decref(result);
        return luna_ds_status_not_found(st, t->group, t->resource, name);
    }
    json_object_set_new(result, "kind", json_string(t->kind));
    json_object_set_new(result, "apiVersion", json_string(t->api_version));
    *code = 201;
    return luna_ds_write_create(ds, t, result, NULL, out, st);
}

/* Merge, JSON and strategic merge patches of an existing object. */
static int patch(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                 const char *name, const char *sub, enum patch_kind kind, json_t **out,
                 json_t **warnings, luna_ds_status *st)
{
    enum luna_ds_field_validation dv;
    if (luna_ds_fields_directive(req, "PatchOptions", &dv, st) < 0)
        return LUNA_EINVAL;
    json_error_t je;
    json_t *ops = json_loadb(req->body, req->body_len, JSON_DECODE_ANY, &je);
    if (!ops)
        return luna_ds_status_bad_request(st, "error decoding patch: %s", je.text);
    luna_ds_obj *cur = lookup(t, ns, name, st);
    if (!cur) {
        json_decref(ops);
        return LUNA_ENOTFOUND;
    }
    json_t *doc = luna_ds_doc_as(ds, t, cur);
    int rc = 0;
    if (!doc)
        rc = luna_ds_status_oom(st);
    else if (kind == MERGE) {
        if (!json_is_object(ops))
            rc = luna_ds_status_bad_request(st, "json: cannot unmarshal %s into Go value of "
                                            "type map[string]interface {}",
                                            json_is_array(ops) ? "array" : "value");
        else if (!(doc = luna_ds_patch_merge(doc, ops)))
            rc = luna_ds_status_oom(st);
    } else if (kind == JSONPATCH) {
        rc = luna_ds_patch_json(&doc, ops, st);
    } else {
        rc = luna_ds_patch_strategic(doc, ops, t, st);
    }
    json_decref(ops);
    if (rc == 0 && !json_is_object(doc))
        rc = luna_ds_status_set(st, 422, "Invalid", "the patched object is not a JSON object");
    if (rc == 0)
        rc = luna_ds_validate_kind(t, doc, st);
    /* the patched object, as kube decodes it (its stored fields are all
     * known: only the patch can bring an unknown one) */
    if (rc == 0)
        rc = luna_ds_schema_decode(t, doc, 1, st);
    if (rc == 0)
        rc = luna_ds_fields_check(t, doc, dv, true, warnings, st);
    const char *pname = rc == 0 ? luna_ds_doc_str(luna_ds_doc_meta(doc), "name") : NULL;
    if (rc == 0 && (!pname || strcmp(pname, name) != 0))
        rc = luna_ds_status_invalid(st, t->group, t->kind, name, "FieldValueInvalid",
                                    "metadata.name", "Invalid value: \"%s\": field is immutable",
                                    pname ? pname : "");
    if (rc < 0) {
        json_decref(doc);
        return rc;
    }
    char mb[128];
    const char *manager = luna_ds_request_manager(req, mb, sizeof mb);
    return luna_ds_write_update(ds, t, cur, doc, sub, manager, out, st);
}

void luna_ds_verbs_patch(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                         const char *name, const char *sub, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    enum patch_kind kind = patch_kind(req, t);
    json_t *out = NULL;
    int code = 200, rc;
    if (kind == UNSUPPORTED)
        rc = luna_ds_status_set(&st, 415, "UnsupportedMediaType", "the body of the request was "
                                "in an unknown format - accepted media types include: "
                                "application/json-patch+json, application/merge-patch+json, "
                                "application/apply-patch+yaml");
    else if (!req->body || req->body_len == 0)
        rc = luna_ds_status_bad_request(&st, "the body of the request was empty");
    else if (kind == APPLY)
        rc = apply(ds, req, t, ns, name, sub, &code, &out, &st);
    else
        rc = patch(ds, req, t, ns, name, sub, kind, &out, &resp->warnings, &st);
    reply_write(resp, rc, code, out, t, name, &st);
}
