/* devserver_verbs.c — see devserver_verbs.h. */
#include "devserver/devserver_verbs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_admission.h"
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

/* A custom resource's kind, checked as apiextensions checks it: a body
 * without one cannot be decoded (400, quoting the body); another kind is
 * a validation error (422 from custom_kind_invalid, after the
 * preconditions), so t's kind is set for the checks before it and *wrong
 * keeps the one given ("" when right). */
static int custom_kind(const luna_ds_request *req, const luna_ds_type *t, json_t *doc,
                       char *wrong, size_t n, luna_ds_status *st)
{
    wrong[0] = '\0';
    json_t *k = json_object_get(doc, "kind");
    if (!t->custom || (k && !json_is_string(k)))
        return 0; /* the kind check answers a kind that is not a string */
    if (!k || !*json_string_value(k)) {
        /* the decoder's error, then kube's summary of the body: its first
         * 30 bytes, as text when it starts with '{', else in hex */
        char sum[100];
        size_t n30 = req->body_len > 30 ? 30 : req->body_len, w = 0;
        if (req->body[0] == '{')
            w = (size_t)snprintf(sum, sizeof sum, "%.*s", (int)n30, req->body);
        else
            for (size_t i = 0; i < n30; i++)
                w += (size_t)snprintf(sum + w, sizeof sum - w, "%02x", (unsigned char)req->body[i]);
        snprintf(sum + w, sizeof sum - w, "%s", req->body_len > 30 ? " ..." : "");
        return luna_ds_status_bad_request(st, "the object provided is unrecognized (must be of "
                                          "type %s): Object 'Kind' is missing in '%.*s' (%s)",
                                          t->kind, (int)(req->body_len > 800 ? 800 : req->body_len),
                                          req->body, sum);
    }
    if (strcmp(json_string_value(k), t->kind) != 0) {
        snprintf(wrong, n, "%s", json_string_value(k));
        json_object_set_new(doc, "kind", json_string(t->kind));
    }
    return 0;
}

static int custom_kind_invalid(const luna_ds_type *t, const char *name, const char *wrong,
                               luna_ds_status *st)
{
    return luna_ds_status_invalid(st, t->group, wrong, name, "FieldValueInvalid", "kind",
                                  "Invalid value: \"%s\": must be %s", wrong, t->kind);
}

/* The admission webhooks of a client's write (devserver_admission.h),
 * right before it changes the store: 0 with *doc the object to write, or
 * a negative code with st set (and, on error, *doc consumed). */
static int admit(luna_ds *ds, luna_ds_type *t, enum luna_ds_admit_op op, const char *ns,
                 const char *name, const char *sub, luna_ds_obj *cur, json_t **doc,
                 luna_ds_status *st)
{
    json_t *old = cur ? luna_ds_doc_as(ds, t, cur) : NULL;
    if (cur && !old) {
        if (doc) {
            json_decref(*doc);
            *doc = NULL;
        }
        return luna_ds_status_oom(st);
    }
    luna_ds_admit_attrs a = { .t = t, .op = op, .ns = ns, .name = name, .sub = sub, .old = old };
    int rc = luna_ds_admit(ds, &a, doc, st);
    json_decref(old);
    if (rc < 0 && doc) {
        json_decref(*doc);
        *doc = NULL;
    }
    return rc;
}

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
    char wrong[256];
    if (!doc || custom_kind(req, t, doc, wrong, sizeof wrong, &st) < 0 ||
        luna_ds_validate_object(t, doc, ns, NULL, &st) < 0 ||
        luna_ds_schema_decode(t, doc, 0, &st) < 0 ||
        luna_ds_fields_check(t, doc, dv, false, &resp->warnings, &st) < 0 ||
        luna_ds_write_create_rv(ds, doc, &st) < 0 ||
        (*wrong && custom_kind_invalid(t, luna_ds_doc_str(luna_ds_doc_meta(doc), "name"),
                                       wrong, &st) < 0)) {
        json_decref(doc);
        luna_ds_reply_status(resp, &st);
        return;
    }
    char mb[128];
    const char *manager = luna_ds_request_manager(req, mb, sizeof mb);
    json_t *out = NULL;
    char cname[300];
    snprintf(cname, sizeof cname, "%s", luna_ds_doc_str(luna_ds_doc_meta(doc), "name") ?
             luna_ds_doc_str(luna_ds_doc_meta(doc), "name") : "");
    if (admit(ds, t, LUNA_DS_ADMIT_CREATE, ns, cname, NULL, NULL, &doc, &st) < 0 ||
        luna_ds_write_create(ds, t, doc, manager, &out, &st) < 0) {
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
    luna_ds_convert_reading(ds, t, o);
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

/* PUT: 200 with the update, or 201 when a kind that allows it
 * (create_on_update) is created at a missing name. */
static int update(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                  const char *name, const char *sub, int *code, json_t **out, json_t **warnings,
                  luna_ds_status *st)
{
    enum luna_ds_field_validation dv;
    if (luna_ds_fields_directive(req, "UpdateOptions", &dv, st) < 0)
        return LUNA_EINVAL;
    json_t *doc = luna_ds_validate_body(req, st);
    char wrong[256];
    if (!doc || custom_kind(req, t, doc, wrong, sizeof wrong, st) < 0 ||
        luna_ds_validate_object(t, doc, ns, name, st) < 0 ||
        luna_ds_schema_decode(t, doc, 0, st) < 0 ||
        luna_ds_fields_check(t, doc, dv, false, warnings, st) < 0) {
        json_decref(doc);
        return LUNA_EINVAL;
    }
    /* kube's checkName: a body without a name has none to compare */
    const char *bname = luna_ds_doc_str(luna_ds_doc_meta(doc), "name");
    if (!bname || !*bname) {
        json_decref(doc);
        return luna_ds_status_bad_request(st, "the name of the object (%s based on URL) was "
                                          "undeterminable: name must be provided", name);
    }
    char mb[128];
    const char *manager = luna_ds_request_manager(req, mb, sizeof mb);
    char key[600];
    luna_ds_doc_key(key, sizeof key, t, ns, name);
    luna_ds_obj *cur = luna_ds_store_get(t->coll, key);
    if (!cur) {
        int rc = luna_ds_write_create_on_update(t, ns, name, doc, st);
        if (rc < 0) {
            json_decref(doc);
            return rc;
        }
        *code = 201;
        if (admit(ds, t, LUNA_DS_ADMIT_CREATE, ns, name, NULL, NULL, &doc, st) < 0)
            return -st->code;
        return luna_ds_write_create(ds, t, doc, manager, out, st);
    }
    if (luna_ds_write_preconditions(t, cur, doc, true, st) < 0 ||
        (*wrong && custom_kind_invalid(t, name, wrong, st) < 0)) {
        json_decref(doc);
        return -st->code;
    }
    if (admit(ds, t, LUNA_DS_ADMIT_UPDATE, ns, name, sub, cur, &doc, st) < 0)
        return -st->code;
    return luna_ds_write_update(ds, t, cur, doc, sub, manager, out, st);
}

void luna_ds_verbs_update(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          const char *name, const char *sub, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    json_t *out = NULL;
    int code = 200;
    int rc = update(ds, req, t, ns, name, sub, &code, &out, &resp->warnings, &st);
    reply_write(resp, rc, code, out, t, name, &st);
}

static json_t *body_or_null(const luna_ds_request *req)
{
    if (!req->body || req->body_len == 0)
        return NULL;
    return json_loadb(req->body, req->body_len, 0, NULL);
}

/* A DELETE's options: from the body when there is one (the query is then
 * ignored, as kube-apiserver's delete handler does), else the query.
 * *opts: the decoded body (caller frees; puid and prv point into it).
 * 0, or a negative code with st set. */
static int delete_options(const luna_ds_request *req, json_t **opts, enum luna_ds_propagation *prop,
                          const char **puid, const char **prv, luna_ds_status *st)
{
    *opts = body_or_null(req);
    *puid = *prv = NULL;
    *prop = LUNA_DS_PROP_BACKGROUND;
    if (req->body_len && !*opts)
        return luna_ds_status_bad_request(st, "json: invalid DeleteOptions body");
    const char *policy, *qorphan = NULL;
    json_t *orphan = NULL;
    if (*opts) {
        policy = luna_ds_doc_str(*opts, "propagationPolicy");
        orphan = json_object_get(*opts, "orphanDependents");
    } else {
        policy = luna_ds_request_arg(req, "propagationPolicy");
        qorphan = luna_ds_request_arg(req, "orphanDependents");
    }
    if (json_is_true(orphan) || (qorphan && strcmp(qorphan, "true") == 0))
        *prop = LUNA_DS_PROP_ORPHAN;
    if (policy && *policy) {
        if (strcmp(policy, "Foreground") == 0)
            *prop = LUNA_DS_PROP_FOREGROUND;
        else if (strcmp(policy, "Orphan") == 0)
            *prop = LUNA_DS_PROP_ORPHAN;
        else if (strcmp(policy, "Background") == 0)
            *prop = LUNA_DS_PROP_BACKGROUND;
        else
            return luna_ds_status_set(st, 422, "Invalid", "DeleteOptions.meta.k8s.io \"\" is "
                                      "invalid: propagationPolicy: Unsupported value: \"%s\": "
                                      "supported values: \"Foreground\", \"Background\", "
                                      "\"Orphan\", \"nil\"", policy);
    }
    json_t *pre = json_object_get(*opts, "preconditions");
    *puid = luna_ds_doc_str(pre, "uid");
    *prv = luna_ds_doc_str(pre, "resourceVersion");
    return 0;
}

/* A DELETE's preconditions on cur, in the words of kube-apiserver's
 * rest.BeforeDelete (which names the kind where the resource belongs). */
static int delete_preconditions(const luna_ds_type *t, const luna_ds_obj *cur, const char *puid,
                                const char *prv, luna_ds_status *st)
{
    char cur_rv[32];
    snprintf(cur_rv, sizeof cur_rv, "%llu", (unsigned long long)cur->rv);
    char why[400];
    if (puid && strcmp(puid, cur->uid) != 0)
        snprintf(why, sizeof why, "the UID in the precondition (%.64s) does not match the UID "
                 "in record (%s). The object might have been deleted and then recreated",
                 puid, cur->uid);
    else if (prv && strcmp(prv, cur_rv) != 0)
        snprintf(why, sizeof why, "the ResourceVersion in the precondition (%.64s) does not "
                 "match the ResourceVersion in record (%s). The object might have been "
                 "modified", prv, cur_rv);
    else
        return 0;
    return luna_ds_status_conflict(st, t->group, t->kind, cur->name, why);
}

void luna_ds_verbs_delete(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          const char *name, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    json_t *opts;
    enum luna_ds_propagation prop;
    const char *puid, *prv;
    luna_ds_obj *cur = NULL;
    if (delete_options(req, &opts, &prop, &puid, &prv, &st) < 0 ||
        !(cur = lookup(t, ns, name, &st)) || delete_preconditions(t, cur, puid, prv, &st) < 0) {
        json_decref(opts);
        luna_ds_reply_status(resp, &st);
        return;
    }
    json_decref(opts);
    json_t *out = NULL;
    bool removed;
    if (admit(ds, t, LUNA_DS_ADMIT_DELETE, ns, name, NULL, cur, NULL, &st) < 0 ||
        luna_ds_gc_delete(ds, t, cur, prop, &out, &removed, &st) < 0) {
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
    json_t *opts;
    enum luna_ds_propagation prop;
    const char *puid, *prv;
    if (delete_options(req, &opts, &prop, &puid, &prv, &st) < 0 ||
        luna_ds_list_filter(req, t, ns, !ds->faults.ignore_shard_selector, &f, &st) < 0) {
        json_decref(opts);
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
        json_decref(opts);
        luna_ds_reply_oom(resp);
        return;
    }
    /* every item's admission before the first delete, so a denial or a
     * call to make leaves the collection as it was */
    bool stop = false;
    for (size_t i = 0; i < nk; i++) {
        luna_ds_obj *o = luna_ds_store_get(t->coll, keys[i]);
        luna_ds_status ast = { 0 };
        if (o && admit(ds, t, LUNA_DS_ADMIT_DELETE, o->ns, o->name, NULL, o, NULL, &ast) < 0) {
            if (!stop)
                st = ast;
            else
                luna_ds_status_clear(&ast);
            stop = true;
        }
    }
    if (stop) {
        for (size_t i = 0; i < nk; i++)
            free(keys[i]);
        free(keys);
        json_decref(opts);
        luna_ds_reply_status(resp, &st);
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
        /* kube deletes one by one with the options given: the first
         * unmet precondition ends it, with what was deleted gone */
        if (delete_preconditions(t, o, puid, prv, &st) < 0) {
            for (size_t j = i + 1; j < nk; j++)
                free(keys[j]);
            free(keys);
            json_decref(opts);
            luna_textbuf_free(&b);
            luna_ds_reply_status(resp, &st);
            return;
        }
        json_t *doc = luna_ds_doc_as(ds, t, o);
        json_t *out = NULL;
        bool removed;
        int rc = luna_ds_gc_delete(ds, t, o, prop, &out, &removed, &st);
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
    json_decref(opts);
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
        if (luna_ds_write_preconditions(t, cur, result, false, st) < 0) {
            json_decref(result);
            return -st->code;
        }
        if (admit(ds, t, LUNA_DS_ADMIT_UPDATE, ns, name, sub, cur, &result, st) < 0)
            return -st->code;
        return luna_ds_write_update(ds, t, cur, result, sub, NULL, out, st);
    }
    if (sub) {
        json_decref(result);
        return luna_ds_status_not_found(st, t->group, t->resource, name);
    }
    json_object_set_new(result, "kind", json_string(t->kind));
    json_object_set_new(result, "apiVersion", json_string(t->api_version));
    *code = 201;
    if (admit(ds, t, LUNA_DS_ADMIT_CREATE, ns, name, NULL, NULL, &result, st) < 0)
        return -st->code;
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
    /* the patched object's namespace and name, as kube's patcher checks
     * them before the update's preconditions */
    if (rc == 0)
        rc = luna_ds_validate_namespace(t, doc, ns, st);
    const char *pname = rc == 0 ? luna_ds_doc_str(luna_ds_doc_meta(doc), "name") : NULL;
    if (rc == 0 && (!pname || !*pname))
        rc = luna_ds_status_bad_request(st, "the name of the object (%s based on URL) was "
                                        "undeterminable: name must be provided", name);
    else if (rc == 0 && strcmp(pname, name) != 0)
        rc = luna_ds_status_bad_request(st, "the name of the object (%s) does not match the "
                                        "name on the URL (%s)", pname, name);
    if (rc == 0)
        rc = luna_ds_write_preconditions(t, cur, doc, false, st);
    if (rc < 0) {
        json_decref(doc);
        return rc;
    }
    if (admit(ds, t, LUNA_DS_ADMIT_UPDATE, ns, name, sub, cur, &doc, st) < 0)
        return -st->code;
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
