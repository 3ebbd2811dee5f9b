/* devserver_scale.c — see devserver_scale.h. */
#include "devserver/devserver_scale.h"
#include "devserver/devserver_admission.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/textbuf.h"
#include "devserver/devserver_doc.h"
#include "devserver/devserver_patch.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"
#include "devserver/devserver_validate.h"
#include "devserver/devserver_write.h"

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Appends "a,b" (the strings of arr, sorted as kube's selector sorts values). */
static void join_values(struct luna_textbuf *b, const json_t *arr)
{
    size_t n = json_array_size(arr);
    const char **v = n ? calloc(n, sizeof *v) : NULL;
    size_t k = 0;
    for (size_t i = 0; v && i < n; i++)
        if (json_is_string(json_array_get(arr, i)))
            v[k++] = json_string_value(json_array_get(arr, i));
    if (v)
        qsort(v, k, sizeof *v, cmp_str);
    for (size_t i = 0; i < k; i++)
        luna_textbuf_printf(b, "%s%s", i ? "," : "", v[i]);
    free(v);
}

/* One requirement per key, in key order, as labels.Selector.String()
 * writes them: "k=v", "k in (a,b)", "k notin (a,b)", "k", "!k". */
static char *selector_string(const json_t *sel)
{
    if (!json_is_object(sel))
        return strdup("");
    /* a ReplicationController's selector is a plain map */
    const json_t *labels = json_object_get(sel, "matchLabels");
    const json_t *exprs = json_object_get(sel, "matchExpressions");
    if (!labels && !exprs)
        labels = sel;
    struct req { const char *key; const json_t *expr; const char *value; } *reqs;
    size_t n = json_object_size(labels) + json_array_size(exprs), k = 0;
    reqs = calloc(n ? n : 1, sizeof *reqs);
    if (!reqs)
        return NULL;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)labels, key, v)
        if (json_is_string(v))
            reqs[k++] = (struct req){ key, NULL, json_string_value(v) };
    size_t i;
    json_array_foreach(exprs, i, v) {
        const char *ek = luna_ds_doc_str(v, "key");
        if (ek)
            reqs[k++] = (struct req){ ek, v, NULL };
    }
    /* stable insertion sort by key (few requirements) */
    for (size_t a = 1; a < k; a++)
        for (size_t b = a; b > 0 && strcmp(reqs[b - 1].key, reqs[b].key) > 0; b--) {
            struct req t = reqs[b];
            reqs[b] = reqs[b - 1];
            reqs[b - 1] = t;
        }
    struct luna_textbuf b = LUNA_TEXTBUF_INIT;
    for (size_t r = 0; r < k; r++) {
        if (r)
            luna_textbuf_printf(&b, ",");
        if (!reqs[r].expr) {
            luna_textbuf_printf(&b, "%s=%s", reqs[r].key, reqs[r].value);
            continue;
        }
        const char *op = luna_ds_doc_str(reqs[r].expr, "operator");
        json_t *vals = json_object_get(reqs[r].expr, "values");
        if (op && strcmp(op, "In") == 0) {
            luna_textbuf_printf(&b, "%s in (", reqs[r].key);
            join_values(&b, vals);
            luna_textbuf_printf(&b, ")");
        } else if (op && strcmp(op, "NotIn") == 0) {
            luna_textbuf_printf(&b, "%s notin (", reqs[r].key);
            join_values(&b, vals);
            luna_textbuf_printf(&b, ")");
        } else if (op && strcmp(op, "DoesNotExist") == 0) {
            luna_textbuf_printf(&b, "!%s", reqs[r].key);
        } else {
            luna_textbuf_printf(&b, "%s", reqs[r].key);
        }
    }
    free(reqs);
    char *s = b.failed ? NULL : strdup(b.data ? b.data : "");
    luna_textbuf_free(&b);
    return s;
}

/* The Scale of an object (a new document), or NULL when out of memory. */
static json_t *scale_of(const json_t *doc)
{
    json_t *md = json_object_get(doc, "metadata");
    json_t *spec = json_object_get(doc, "spec");
    json_t *status = json_object_get(doc, "status");
    json_t *r = json_object_get(spec, "replicas");
    json_int_t replicas = json_is_integer(r) ? json_integer_value(r) : 1;
    json_int_t have = json_integer_value(json_object_get(status, "replicas"));
    json_t *smd = json_object();
    static const char *const keep[] = { "name", "namespace", "uid", "resourceVersion",
                                        "creationTimestamp" };
    for (size_t i = 0; i < sizeof keep / sizeof *keep; i++) {
        json_t *v = json_object_get(md, keep[i]);
        if (v)
            json_object_set(smd, keep[i], v);
    }
    json_t *sspec = json_object();
    if (replicas)
        json_object_set_new(sspec, "replicas", json_integer(replicas));
    json_t *sstatus = json_pack("{s:I}", "replicas", have);
    char *sel = selector_string(json_object_get(spec, "selector"));
    if (sel && *sel)
        json_object_set_new(sstatus, "selector", json_string(sel));
    free(sel);
    return json_pack("{s:s,s:s,s:o,s:o,s:o}", "kind", "Scale", "apiVersion", "autoscaling/v1",
                     "metadata", smd, "spec", sspec, "status", sstatus);
}

static bool content_type_is(const luna_ds_request *req, const char *want)
{
    const char *ct = req->content_type ? req->content_type : "";
    size_t n = strlen(want);
    return strncmp(ct, want, n) == 0 && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* The Scale the request asks for (PUT: its body; PATCH: cur's Scale
 * patched), a new document; NULL with st set. */
static json_t *wanted_scale(const luna_ds_request *req, const json_t *cur, luna_ds_status *st)
{
    if (strcmp(req->method, "PUT") == 0)
        return luna_ds_validate_body(req, st);
    json_error_t je;
    if (!req->body || req->body_len == 0) {
        luna_ds_status_bad_request(st, "the body of the request was empty");
        return NULL;
    }
    bool merge = content_type_is(req, "application/merge-patch+json") ||
                 content_type_is(req, "application/strategic-merge-patch+json");
    bool jsonpatch = content_type_is(req, "application/json-patch+json");
    if (!merge && !jsonpatch) {
        luna_ds_status_set(st, 415, "UnsupportedMediaType", "the body of the request was in "
                           "an unknown format - accepted media types include: "
                           "application/json-patch+json, application/merge-patch+json, "
                           "application/strategic-merge-patch+json");
        return NULL;
    }
    json_t *ops = json_loadb(req->body, req->body_len, JSON_DECODE_ANY, &je);
    if (!ops) {
        luna_ds_status_bad_request(st, "error decoding patch: %s", je.text);
        return NULL;
    }
    json_t *scale = scale_of(cur);
    if (!scale) {
        json_decref(ops);
        luna_ds_status_oom(st);
        return NULL;
    }
    if (merge) {
        if (!json_is_object(ops)) {
            luna_ds_status_bad_request(st, "json: cannot unmarshal %s into Go value of type "
                                       "map[string]interface {}",
                                       json_is_array(ops) ? "array" : "value");
            json_decref(scale);
            scale = NULL;
        } else if (!(scale = luna_ds_patch_merge(scale, ops))) {
            luna_ds_status_oom(st);
        }
    } else if (luna_ds_patch_json(&scale, ops, st) < 0) {
        json_decref(scale);
        scale = NULL;
    }
    json_decref(ops);
    return scale;
}

void luna_ds_scale_serve(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t,
                         const char *ns, const char *name, luna_ds_response *resp)
{
    luna_ds_status st = { 0 };
    const char *m = req->method;
    bool get = strcmp(m, "GET") == 0;
    if (!get && strcmp(m, "PUT") != 0 && strcmp(m, "PATCH") != 0)
        return luna_ds_reply_not_allowed(resp);
    char key[600];
    luna_ds_doc_key(key, sizeof key, t, ns, name);
    luna_ds_obj *cur = luna_ds_store_get(t->coll, key);
    if (!cur) {
        luna_ds_status_not_found(&st, t->group, t->resource, name);
        return luna_ds_reply_status(resp, &st);
    }
    json_t *doc = luna_ds_doc_as(ds, t, cur);
    if (!doc)
        return luna_ds_reply_oom(resp);
    if (get) {
        json_t *scale = scale_of(doc);
        json_decref(doc);
        return scale ? luna_ds_reply_json(resp, 200, scale) : luna_ds_reply_oom(resp);
    }
    json_t *scale = wanted_scale(req, doc, &st);
    int rc = scale ? 0 : -1;
    json_t *r = json_object_get(json_object_get(scale, "spec"), "replicas");
    if (rc == 0 && r && (!json_is_integer(r) || json_integer_value(r) < 0 ||
                         json_integer_value(r) > 2147483647))
        rc = luna_ds_status_invalid(&st, "autoscaling", "Scale", name, "FieldValueInvalid",
                                    "spec.replicas", "Invalid value: %s: must be greater than "
                                    "or equal to 0", json_is_integer(r) ? "out of range" : "not an integer");
    const char *srv = rc == 0 ? luna_ds_doc_str(json_object_get(scale, "metadata"),
                                                "resourceVersion") : NULL;
    if (rc == 0 && srv && *srv && strcmp(srv, luna_ds_doc_str(luna_ds_doc_meta(doc),
                                                               "resourceVersion")) != 0)
        rc = luna_ds_status_conflict(&st, t->group, t->resource, name,
                                     "the object has been modified; please apply your changes "
                                     "to the latest version and try again");
    if (rc == 0) {
        /* the webhooks get (and may change) the Scale, as kube sends it */
        json_t *old_scale = scale_of(doc);
        luna_ds_admit_attrs a = { .t = t, .op = LUNA_DS_ADMIT_UPDATE, .ns = ns, .name = name,
                                  .sub = "scale", .kind_api_version = "autoscaling/v1",
                                  .kind = "Scale", .old = old_scale };
        rc = old_scale ? luna_ds_admit(ds, &a, &scale, &st) : luna_ds_status_oom(&st);
        json_decref(old_scale);
        r = json_object_get(json_object_get(scale, "spec"), "replicas");
    }
    if (rc < 0) {
        json_decref(scale);
        json_decref(doc);
        return luna_ds_reply_status(resp, &st);
    }
    json_t *spec = json_object_get(doc, "spec");
    if (!json_is_object(spec)) {
        spec = json_object();
        json_object_set_new(doc, "spec", spec);
    }
    json_object_set_new(spec, "replicas", json_integer(r ? json_integer_value(r) : 0));
    json_decref(scale);
    char mb[128];
    const char *manager = luna_ds_request_manager(req, mb, sizeof mb);
    json_t *out = NULL;
    rc = luna_ds_write_update(ds, t, cur, doc, NULL, manager, &out, &st);
    if (rc < 0)
        return luna_ds_reply_status(resp, &st);
    json_t *reply = out ? scale_of(out) : NULL;
    json_decref(out);
    reply ? luna_ds_reply_json(resp, 200, reply) : luna_ds_reply_oom(resp);
}
