/* devserver_fields.c — see devserver_fields.h. */
#include "devserver/devserver_fields.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "devserver/devserver_protobuf.h"

int luna_ds_fields_directive(const luna_ds_request *req, const char *options,
                             enum luna_ds_field_validation *out, luna_ds_status *st)
{
    const char *v = luna_ds_request_arg(req, "fieldValidation");
    if (!v || !*v || strcmp(v, "Warn") == 0)
        *out = LUNA_DS_FIELDS_WARN;
    else if (strcmp(v, "Ignore") == 0)
        *out = LUNA_DS_FIELDS_IGNORE;
    else if (strcmp(v, "Strict") == 0)
        *out = LUNA_DS_FIELDS_STRICT;
    else
        return luna_ds_status_invalid(st, "meta.k8s.io", options, "", "FieldValueNotSupported",
                                      "fieldValidation",
                                      "Unsupported value: \"%.100s\": supported values: "
                                      "\"\", \"Ignore\", \"Strict\", \"Warn\"", v);
    return 0;
}

/* One walk: the path so far (fields joined as kube names them) and what
 * was found. */
struct walk {
    enum luna_ds_field_validation dv;
    char path[1024];
    json_t *found;      /* the paths of unknown fields, in document order */
    bool oom;
};

/* The field of message msg (its inline messages included) named key. */
static const luna_ds_pb_field *field_of(int msg, const char *key)
{
    const luna_ds_pb_message *m = &luna_ds_pb_messages[msg];
    for (size_t i = 0; i < m->n_fields; i++) {
        const luna_ds_pb_field *f = &m->fields[i];
        if (f->flags & LUNA_PB_F_INLINE) {
            const luna_ds_pb_field *g = f->msg >= 0 ? field_of(f->msg, key) : NULL;
            if (g)
                return g;
        } else if (f->json && !(f->flags & LUNA_PB_F_NOJSON) && strcmp(f->json, key) == 0) {
            return f;
        }
    }
    return NULL;
}

/* Appends to w->path (at len) what fmt makes; false when it does not fit
 * (deeper levels are then not checked: no kind has such paths). */
static bool path_push(struct walk *w, size_t len, const char *fmt, const char *a)
{
    int n = snprintf(w->path + len, sizeof w->path - len, fmt, a);
    return n >= 0 && (size_t)n < sizeof w->path - len;
}

static void walk_object(struct walk *w, int msg, json_t *obj, bool top);
static void unknown(struct walk *w, json_t *obj, const char *key);

/* A value of field f at w->path: a nested message (alone, in a list or in
 * a map) is walked; other values are leaves. */
static void walk_value(struct walk *w, const luna_ds_pb_field *f, json_t *v)
{
    if (f->type != LUNA_PB_MESSAGE || f->msg < 0)
        return;
    size_t len = strlen(w->path);
    if (f->flags & LUNA_PB_F_MAP) {
        const char *k;
        json_t *e;
        json_object_foreach(v, k, e) {
            if (json_is_object(e) && path_push(w, len, "[%s]", k))
                walk_object(w, f->msg, e, false);
            w->path[len] = '\0';
        }
    } else if (f->flags & LUNA_PB_F_REPEATED) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            if (json_is_object(e) && path_push(w, len, "[%s]", idx))
                walk_object(w, f->msg, e, false);
            w->path[len] = '\0';
        }
    } else if (json_is_object(v)) {
        walk_object(w, f->msg, v, false);
    }
}

static void walk_object(struct walk *w, int msg, json_t *obj, bool top)
{
    size_t len = strlen(w->path);
    const char *key;
    json_t *v, *tmp;
    json_object_foreach_safe(obj, tmp, key, v) {
        if (top && (strcmp(key, "apiVersion") == 0 || strcmp(key, "kind") == 0))
            continue;
        const luna_ds_pb_field *f = field_of(msg, key);
        if (!path_push(w, len, len ? ".%s" : "%s", key)) {
            w->path[len] = '\0';
            continue;
        }
        if (!f) {
            unknown(w, obj, key);
        } else {
            walk_value(w, f, v);
        }
        w->path[len] = '\0';
    }
}

/* The index of the message named name (its Go package path and type). */
static int message_named(const char *name)
{
    for (size_t i = 0; i < luna_ds_pb_n_messages; i++)
        if (strcmp(luna_ds_pb_messages[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* An unknown field at w->path (the key just pushed) of obj. */
static void unknown(struct walk *w, json_t *obj, const char *key)
{
    if (json_array_append_new(w->found, json_string(w->path)) < 0)
        w->oom = true;
    if (w->dv != LUNA_DS_FIELDS_STRICT)
        json_object_del(obj, key);
}

/* A custom resource's value v at w->path against its structural schema
 * sch, as apiextensions prunes: an object's fields are its properties',
 * or any under additionalProperties (a schema or true) or
 * x-kubernetes-preserve-unknown-fields; an embedded resource (and the
 * root) also has apiVersion, kind and an ObjectMeta metadata; a list's
 * elements are its items'.  depth bounds the walk (the schema is a
 * client's). */
static void walk_schema(struct walk *w, const json_t *sch, json_t *v, bool root, int depth)
{
    if (!json_is_object(sch) || depth > 64)
        return;
    size_t len = strlen(w->path);
    if (json_is_array(v)) {
        const json_t *items = json_object_get(sch, "items");
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            if (path_push(w, len, "[%s]", idx))
                walk_schema(w, items, e, false, depth + 1);
            w->path[len] = '\0';
        }
        return;
    }
    if (!json_is_object(v))
        return;
    const json_t *props = json_object_get(sch, "properties");
    const json_t *more = json_object_get(sch, "additionalProperties");
    bool preserve = json_is_true(json_object_get(sch, "x-kubernetes-preserve-unknown-fields"));
    bool embedded = root || json_is_true(json_object_get(sch, "x-kubernetes-embedded-resource"));
    const char *key;
    json_t *e, *tmp;
    json_object_foreach_safe(v, tmp, key, e) {
        if (!path_push(w, len, len ? ".%s" : "%s", key)) {
            w->path[len] = '\0';
            continue;
        }
        const json_t *p = json_object_get(props, key);
        if (embedded && (strcmp(key, "apiVersion") == 0 || strcmp(key, "kind") == 0)) {
            /* always known */
        } else if (embedded && strcmp(key, "metadata") == 0) {
            int meta = message_named("k8s.io/apimachinery/pkg/apis/meta/v1.ObjectMeta");
            if (meta >= 0 && json_is_object(e))
                walk_object(w, meta, e, false);
        } else if (p) {
            walk_schema(w, p, e, false, depth + 1);
        } else if (json_is_object(more)) {
            walk_schema(w, more, e, false, depth + 1);
        } else if (!json_is_true(more) && !preserve) {
            unknown(w, v, key);
        }
        w->path[len] = '\0';
    }
}

int luna_ds_fields_check(const luna_ds_type *t, json_t *doc, enum luna_ds_field_validation dv,
                         bool patch, json_t **warnings, luna_ds_status *st)
{
    int msg = -1;
    for (size_t i = 0; i < luna_ds_pb_n_kinds; i++)
        if (strcmp(luna_ds_pb_kinds[i].api_version, t->api_version) == 0 &&
            strcmp(luna_ds_pb_kinds[i].kind, t->kind) == 0)
            msg = luna_ds_pb_kinds[i].msg;
    if ((msg < 0 && !(t->custom && t->schema)) || !json_is_object(doc))
        return 0;
    struct walk w = { .dv = dv, .found = json_array() };
    if (!w.found)
        return luna_ds_status_oom(st);
    if (msg >= 0)
        walk_object(&w, msg, doc, true);
    else
        walk_schema(&w, t->schema, doc, true, 0);
    size_t n = json_array_size(w.found);
    int rc = 0;
    if (w.oom) {
        rc = luna_ds_status_oom(st);
    } else if (n && dv == LUNA_DS_FIELDS_STRICT) {
        char text[2048];
        size_t o = 0;
        for (size_t i = 0; i < n && o < sizeof text; i++) {
            int k = snprintf(text + o, sizeof text - o, "%sunknown field \"%s\"", i ? ", " : "",
                             json_string_value(json_array_get(w.found, i)));
            o += k > 0 ? (size_t)k : 0;
        }
        if (!patch) {
            rc = luna_ds_status_bad_request(st, "strict decoding error: %s", text);
        } else {
            /* kube's patcher: the patched object as the invalid value */
            char *js = json_dumps(doc, JSON_COMPACT);
            rc = luna_ds_status_invalid(st, "", "", "", "FieldValueInvalid", "patch",
                                        "Invalid value: \"%.300s\": strict decoding error: %s",
                                        js ? js : "", text);
            free(js);
        }
    } else if (n && dv == LUNA_DS_FIELDS_WARN) {
        if (!*warnings && !(*warnings = json_array()))
            rc = luna_ds_status_oom(st);
        for (size_t i = 0; i < n && rc == 0; i++) {
            char text[1100];
            snprintf(text, sizeof text, "unknown field \"%s\"",
                     json_string_value(json_array_get(w.found, i)));
            if (json_array_append_new(*warnings, json_string(text)) < 0)
                rc = luna_ds_status_oom(st);
        }
    }
    json_decref(w.found);
    return rc;
}

/* Valid UTF-8 without a control character (C0, DEL, C1), as
 * apimachinery's NewWarningHeader requires of a warning's text. */
static bool warning_text_ok(const unsigned char *p)
{
    while (*p) {
        unsigned c = *p;
        size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (n == 0 || c < 0x20 || c == 0x7F)
            return false;
        unsigned cp = n == 1 ? c : c & (0x7F >> n);
        for (size_t i = 1; i < n; i++) {
            if ((p[i] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (p[i] & 0x3F);
        }
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x80 && cp <= 0x9F))
            return false;
        p += n;
    }
    return true;
}

bool luna_ds_fields_warning_header(const char *text, char *buf, size_t size)
{
    if (!warning_text_ok((const unsigned char *)text) || size < 9)
        return false;
    size_t o = (size_t)snprintf(buf, size, "299 - \"");
    for (const char *p = text; *p; p++) {
        if (o + 4 > size)
            return false;
        if (*p == '"' || *p == '\\')
            buf[o++] = '\\';
        buf[o++] = *p;
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return true;
}
