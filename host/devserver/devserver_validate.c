/* devserver_validate.c — see devserver_validate.h. */
#include "devserver/devserver_validate.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devserver/devserver_doc.h"
#include "devserver/devserver_schema.h"
#include "devserver/devserver_state.h"
#include "devserver/devserver_store.h"

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

static void add_invalid(json_t *causes, const char *field, const char *value, const char *msg);
static void go_quote(char *buf, size_t size, const char *s);

static bool resource_in(const char *resource, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(resource, *list) == 0)
            return true;
    return false;
}

/* Kinds kube-apiserver names by an RFC 1123 label (their names become DNS
 * labels: a Service's DNS name, a StatefulSet's Pod hostnames) and kinds
 * it names by a mere path segment (RBAC, PodDisruptionBudget,
 * CertificateSigningRequest, APIService): read off v1.37.2
 * (spec/08-apiserver/24). */
enum { LUNA_DS_SEGMENT_NAME_MAX = 253 * 2 };
static const char *const LABEL_NAMED[] = { "namespaces", "services", "statefulsets", NULL };
static const char *const SEGMENT_NAMED[] = { "apiservices", "roles", "clusterroles", "rolebindings",
                                             "clusterrolebindings", "poddisruptionbudgets",
                                             "certificatesigningrequests", NULL };

/* Kinds whose name kube composes from two spec fields, checked after the
 * name's format: apiextensions ValidateCustomResourceDefinition (its name
 * func) and apiregistration ValidateAPIService (its name func). */
static const struct name_rule {
    const char *group, *resource;
    const char *first, *second;   /* spec fields: name = first "." second */
    const char *fmt;              /* message; %s: the wanted name, quoted */
} NAME_RULES[] = {
    { "apiextensions.k8s.io", "customresourcedefinitions", "names.plural", "group",
      "must be spec.names.plural+\".\"+spec.group" },
    { "apiregistration.k8s.io", "apiservices", "version", "group",
      "must be `spec.version+\".\"+spec.group`: %s" },
};

/* spec.<path> (one level of ".") as a string, or "" */
static const char *spec_path(const json_t *doc, const char *path)
{
    json_t *v = json_object_get(doc, "spec");
    const char *dot = strchr(path, '.');
    if (dot) {
        char head[64];
        snprintf(head, sizeof head, "%.*s", (int)(dot - path), path);
        v = json_object_get(v, head);
        path = dot + 1;
    }
    v = json_object_get(v, path);
    return json_is_string(v) ? json_string_value(v) : "";
}

static void composed_name(const luna_ds_type *t, const json_t *doc, const char *name,
                          json_t *causes)
{
    for (size_t i = 0; doc && i < sizeof NAME_RULES / sizeof *NAME_RULES; i++) {
        const struct name_rule *r = &NAME_RULES[i];
        if (strcmp(t->group, r->group) != 0 || strcmp(t->resource, r->resource) != 0)
            continue;
        char want[600], q[620], msg[800];
        snprintf(want, sizeof want, "%s.%s", spec_path(doc, r->first), spec_path(doc, r->second));
        if (strcmp(name, want) == 0)
            return;
        go_quote(q, sizeof q, want);
        snprintf(msg, sizeof msg, r->fmt, q);
        add_invalid(causes, "metadata.name", name, msg);
    }
}

int luna_ds_validate_name(const luna_ds_type *t, const char *name, const json_t *doc,
                          luna_ds_status *st)
{
    json_t *causes = json_array();
    if (!causes)
        return luna_ds_status_oom(st);
    if (resource_in(t->resource, LABEL_NAMED)) {
        if (!dns_label(name, strlen(name), false))
            add_invalid(causes, "metadata.name", name, "a lowercase RFC 1123 label must consist "
                "of lower case alphanumeric characters or '-', and must start and end with an "
                "alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')");
    } else if (resource_in(t->resource, SEGMENT_NAMED)) {
        /* kube's path-segment check: "." and ".." alone, else one cause
         * per forbidden character present */
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            char msg[64];
            snprintf(msg, sizeof msg, "may not be '%s'", name);
            add_invalid(causes, "metadata.name", name, msg);
        }
        static const char *const bad[] = { "/", "%", NULL };
        for (size_t i = 0; bad[i]; i++) {
            if (strstr(name, bad[i])) {
                char msg[64];
                snprintf(msg, sizeof msg, "may not contain '%s'", bad[i]);
                add_invalid(causes, "metadata.name", name, msg);
            }
        }
        /* kube sets no length on these names; the dev server's keys
         * ("namespace/name", luna_ds_doc_key) hold names of up to
         * LUNA_DS_SEGMENT_NAME_MAX bytes, so a longer one is refused here
         * rather than cut short in a key (two names would then be one
         * object) */
        if (strlen(name) > LUNA_DS_SEGMENT_NAME_MAX) {
            char msg[128];
            snprintf(msg, sizeof msg, "must be no more than %d characters (a dev server limit: "
                     "kube-apiserver has none for this kind)", LUNA_DS_SEGMENT_NAME_MAX);
            add_invalid(causes, "metadata.name", name, msg);
        }
    } else if (!dns_subdomain(name)) {
        add_invalid(causes, "metadata.name", name, "a lowercase RFC 1123 subdomain must consist "
            "of lower case alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character (e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
    }
    /* kube's name funcs stop at a path-segment failure */
    if (!(resource_in(t->resource, SEGMENT_NAMED) && json_array_size(causes)))
        composed_name(t, doc, name, causes);
    if (json_array_size(causes) == 0) {
        json_decref(causes);
        return 0;
    }
    return luna_ds_status_invalid_causes(st, t->group, t->kind, name, causes);
}

/* Parses a request body that must be a JSON object. */
json_t *luna_ds_validate_body(const luna_ds_request *req, luna_ds_status *st)
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

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER:
    case JSON_REAL: return "number";
    default: return "bool";
    }
}

static int meta_mistyped(const luna_ds_type *t, const char *field, const json_t *v,
                         const char *go_type, luna_ds_status *st)
{
    return luna_ds_status_bad_request(st, "%s in version \"%s\" cannot be handled as a %s: json: "
                                      "cannot unmarshal %s into Go struct field ObjectMeta.metadata"
                                      ".%s of type %s", t->kind, t->version, t->kind,
                                      json_type_name(v), field, go_type);
}

/* metadata is an ObjectMeta for every kind: its fields have Go types, and
 * kube-apiserver refuses a body whose JSON does not fit them (null is the
 * zero value and always fits). */
static int validate_meta_types(const luna_ds_type *t, const json_t *md, luna_ds_status *st)
{
    static const char *const strings[] = { "name", "generateName", "namespace", "selfLink",
                                           "uid", "resourceVersion", NULL };
    static const char *const ints[] = { "generation", "deletionGracePeriodSeconds", NULL };
    for (const char *const *k = strings; *k; k++) {
        json_t *v = json_object_get(md, *k);
        if (v && !json_is_null(v) && !json_is_string(v))
            return meta_mistyped(t, *k, v, "string", st);
    }
    for (const char *const *k = ints; *k; k++) {
        json_t *v = json_object_get(md, *k);
        if (v && !json_is_null(v) && !json_is_integer(v))
            return meta_mistyped(t, *k, v, "int64", st);
    }
    static const char *const maps[] = { "labels", "annotations", NULL };
    for (const char *const *k = maps; *k; k++) {
        json_t *v = json_object_get(md, *k);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_object(v))
            return meta_mistyped(t, *k, v, "map[string]string", st);
        const char *key;
        json_t *e;
        json_object_foreach(v, key, e)
            if (!json_is_null(e) && !json_is_string(e))
                return meta_mistyped(t, *k, e, "string", st);
    }
    static const struct { const char *key, *go_type; } lists[] = {
        { "finalizers", "[]string" }, { "ownerReferences", "[]v1.OwnerReference" },
        { "managedFields", "[]v1.ManagedFieldsEntry" }, { NULL, NULL } };
    for (size_t i = 0; lists[i].key; i++) {
        json_t *v = json_object_get(md, lists[i].key);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_array(v))
            return meta_mistyped(t, lists[i].key, v, lists[i].go_type, st);
        size_t j;
        json_t *e;
        json_array_foreach(v, j, e) {
            bool strings_only = i == 0;
            if (json_is_null(e) || (strings_only ? json_is_string(e) : json_is_object(e)))
                continue;
            return meta_mistyped(t, lists[i].key, e, strings_only ? "string"
                                 : lists[i].go_type + 2, st);
        }
    }
    return 0;
}

/* Checks kind/apiVersion of a body against the path's type, filling them in
 * when absent. */
int luna_ds_validate_kind(luna_ds_type *t, json_t *doc, luna_ds_status *st)
{
    const char *kind = luna_ds_doc_str(doc, "kind");
    const char *av = luna_ds_doc_str(doc, "apiVersion");
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
    if (md && !json_is_object(md) && !json_is_null(md))
        return luna_ds_status_bad_request(st, "%s in version \"%s\" cannot be handled as a %s: "
                                          "json: cannot unmarshal %s into Go struct field %s"
                                          ".metadata of type v1.ObjectMeta", t->kind, t->version,
                                          t->kind, json_type_name(md), t->kind);
    if (json_is_object(md) && validate_meta_types(t, md, st) < 0)
        return -st->code;
    if (json_is_null(md))
        json_object_del(doc, "metadata");
    luna_ds_doc_meta(doc);
    return 0;
}

int luna_ds_validate_namespace(luna_ds_type *t, json_t *doc, const char *ns, luna_ds_status *st)
{
    json_t *md = luna_ds_doc_meta(doc);
    if (!t->namespaced) {
        json_object_del(md, "namespace");
        return 0;
    }
    const char *bns = luna_ds_doc_str(md, "namespace");
    if (bns && *bns && strcmp(bns, ns) != 0)
        return luna_ds_status_bad_request(st, "the namespace of the provided object does not "
                                          "match the namespace sent on the request");
    json_object_set_new(md, "namespace", json_string(ns));
    return 0;
}

/* 404 when the namespace does not exist; 403 on create in a terminating one. */
int luna_ds_validate_namespace_usable(luna_ds *ds, luna_ds_type *t, const char *ns, const char *name, bool creating,
                            luna_ds_status *st)
{
    if (!t->namespaced)
        return 0;
    luna_ds_obj *n = luna_ds_store_get(luna_ds_types_namespaces(ds->types)->coll, ns);
    if (!n)
        return luna_ds_status_not_found(st, "", "namespaces", ns);
    if (creating && n->deleting) {
        luna_ds_status_set(st, 403, "Forbidden", "%s%s%s \"%s\" is forbidden: unable to create new "
                           "content in namespace %s because it is being terminated", t->resource,
                           *t->group ? "." : "", t->group, name, ns);
        st->details = json_pack("{s:s,s:s}", "name", name, "kind", t->resource);
        return LUNA_EINVAL;
    }
    return 0;
}

int luna_ds_validate_object(luna_ds_type *t, json_t *doc, const char *ns, const char *name,
                            luna_ds_status *st)
{
    int rc = luna_ds_validate_kind(t, doc, st);
    if (rc == 0)
        rc = luna_ds_validate_namespace(t, doc, ns, st);
    const char *bname = rc == 0 && name ? luna_ds_doc_str(luna_ds_doc_meta(doc), "name") : NULL;
    if (bname && strcmp(bname, name) != 0)
        rc = luna_ds_status_bad_request(st, "the name of the object (%s) does not match the name "
                                        "on the URL (%s)", bname, name);
    return rc;
}

/* ---- metadata.labels, metadata.annotations and ConfigMap keys, with
 * k8s.io/apimachinery's validation messages word for word ---- */

#define QNAME_MSG "must consist of alphanumeric characters, '-', '_' or '.', and must start " \
                  "and end with an alphanumeric character"
#define QNAME_FMT "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
#define QNAME_EXAMPLES "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for " \
                       "validation is '" QNAME_FMT "')"
#define TOTAL_ANNOTATION_SIZE (256 * 1024) /* apimachinery's TotalAnnotationSizeLimitB */

static bool qname_char(char c) { return isalnum((unsigned char)c); }

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] over s[0..n) */
static bool qname_match(const char *s, size_t n)
{
    if (n == 0 || !qname_char(s[0]) || !qname_char(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!qname_char(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* The RFC 1123 subdomain regex (no length bound per label, as the regex) */
static bool subdomain_match(const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        size_t len = i - start;
        const char *l = s + start;
        if (len == 0 || !(islower((unsigned char)l[0]) || isdigit((unsigned char)l[0])) ||
            !(islower((unsigned char)l[len - 1]) || isdigit((unsigned char)l[len - 1])))
            return false;
        for (size_t j = 0; j < len; j++)
            if (!islower((unsigned char)l[j]) && !isdigit((unsigned char)l[j]) && l[j] != '-')
                return false;
        start = i + 1;
    }
    return true;
}

/* Go's %q of a string (quotes, backslash and control bytes escaped). */
static void go_quote(char *buf, size_t size, const char *s)
{
    size_t w = 0;
    buf[w++] = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p && w + 8 < size; p++) {
        if (*p == '"' || *p == '\\') {
            buf[w++] = '\\';
            buf[w++] = (char)*p;
        } else if (*p == '\n') {
            buf[w++] = '\\';
            buf[w++] = 'n';
        } else if (*p == '\t') {
            buf[w++] = '\\';
            buf[w++] = 't';
        } else if (*p == '\r') {
            buf[w++] = '\\';
            buf[w++] = 'r';
        } else if (*p < 0x20 || *p == 0x7f) {
            w += (size_t)snprintf(buf + w, size - w, "\\x%02x", *p);
        } else {
            buf[w++] = (char)*p;
        }
    }
    buf[w++] = '"';
    buf[w] = '\0';
}

static void add_cause(json_t *causes, const char *reason, const char *field, const char *message)
{
    json_array_append_new(causes, json_pack("{s:s,s:s,s:s}", "reason", reason, "message",
                                            message, "field", field));
}

/* field.Invalid(field, value, msg) */
static void add_invalid(json_t *causes, const char *field, const char *value, const char *msg)
{
    char q[600], m[1400];
    go_quote(q, sizeof q, value);
    snprintf(m, sizeof m, "Invalid value: %s: %s", q, msg);
    add_cause(causes, "FieldValueInvalid", field, m);
}

/* validation.IsQualifiedName(check), each message as field.Invalid(field, shown) */
static void qualified_name(json_t *causes, const char *field, const char *check,
                           const char *shown)
{
    const char *slash = strchr(check, '/');
    const char *name = check;
    if (slash && strchr(slash + 1, '/')) {
        add_invalid(causes, field, shown, "a valid label key must consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character " QNAME_EXAMPLES " with an optional DNS subdomain prefix and '/' "
                    "(e.g. 'example.com/MyName')");
        return;
    }
    if (slash) {
        size_t plen = (size_t)(slash - check);
        name = slash + 1;
        if (plen == 0) {
            add_invalid(causes, field, shown, "prefix part must be non-empty");
        } else {
            if (plen > 253)
                add_invalid(causes, field, shown, "prefix part must be no more than 253 bytes");
            if (!subdomain_match(check, plen))
                add_invalid(causes, field, shown, "prefix part a lowercase RFC 1123 subdomain "
                    "must consist of lower case alphanumeric characters, '-' or '.', and must "
                    "start and end with an alphanumeric character (e.g. 'example.com', regex "
                    "used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
        }
    }
    size_t n = strlen(name);
    if (n == 0)
        add_invalid(causes, field, shown, "name part must be non-empty");
    else if (n > 63)
        add_invalid(causes, field, shown, "name part must be no more than 63 bytes");
    if (!qname_match(name, n))
        add_invalid(causes, field, shown, "name part " QNAME_MSG " " QNAME_EXAMPLES);
}

static void labels(json_t *causes, const json_t *m)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)m, k, v) {
        qualified_name(causes, "metadata.labels", k, k);
        const char *val = json_is_string(v) ? json_string_value(v) : "";
        size_t n = strlen(val);
        if (n > 63)
            add_invalid(causes, "metadata.labels", val, "must be no more than 63 bytes");
        if (n > 0 && !qname_match(val, n))
            add_invalid(causes, "metadata.labels", val, "a valid label must be an empty string "
                        "or consist of alphanumeric characters, '-', '_' or '.', and must start "
                        "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex "
                        "used for validation is '(" QNAME_FMT ")?')");
    }
}

static void annotations(json_t *causes, const json_t *m)
{
    const char *k;
    json_t *v;
    size_t total = 0;
    json_object_foreach((json_t *)m, k, v) {
        /* a QualifiedName except that case does not matter */
        char *lower = strdup(k);
        if (lower) {
            for (char *p = lower; *p; p++)
                *p = (char)tolower((unsigned char)*p);
            qualified_name(causes, "metadata.annotations", lower, k);
            free(lower);
        }
        total += strlen(k) + (json_is_string(v) ? json_string_length(v) : 0);
    }
    if (total > TOTAL_ANNOTATION_SIZE)
        add_cause(causes, "FieldValueTooLong", "metadata.annotations",
                  "Too long: may not be more than 262144 bytes");
}

/* validation.IsConfigMapKey, as field.Invalid(data[key] / binaryData[key]) */
static void configmap_key(json_t *causes, const char *bag, const char *key)
{
    char field[600];
    snprintf(field, sizeof field, "%s[%s]", bag, key);
    size_t n = strlen(key);
    if (n > 253)
        add_invalid(causes, field, key, "must be no more than 253 bytes");
    bool ok = n > 0;
    for (size_t i = 0; i < n && ok; i++)
        ok = isalnum((unsigned char)key[i]) || key[i] == '-' || key[i] == '.' || key[i] == '_';
    if (!ok)
        add_invalid(causes, field, key, "a valid config key must consist of alphanumeric "
                    "characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or "
                    "'key-name', regex used for validation is '[-._a-zA-Z0-9]+')");
    if (strcmp(key, ".") == 0)
        add_invalid(causes, field, key, "must not be '.'");
    else if (strcmp(key, "..") == 0)
        add_invalid(causes, field, key, "must not be '..'");
    else if (strncmp(key, "..", 2) == 0)
        add_invalid(causes, field, key, "must not start with '..'");
}

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Go's base64.StdEncoding.Decode: -1 when s decodes, else the input byte
 * its CorruptInputError names (newlines skipped, padding required). */
static long b64_corrupt_at(const char *s, size_t len)
{
    size_t si = 0;
    while (si < len) {
        for (int j = 0; j < 4; j++) {
            if (si == len) {
                if (j == 0)
                    return -1;
                return (long)(si - (size_t)j);
            }
            unsigned char in = (unsigned char)s[si++];
            if (b64_value(in) >= 0)
                continue;
            if (in == '\n' || in == '\r') {
                j--;
                continue;
            }
            if (in != '=')
                return (long)(si - 1);
            if (j < 2)
                return (long)(si - 1);
            if (j == 2) {
                while (si < len && (s[si] == '\n' || s[si] == '\r'))
                    si++;
                if (si == len)
                    return (long)len;
                if (s[si] != '=')
                    return (long)(si - 1);
                si++;
            }
            while (si < len && (s[si] == '\n' || s[si] == '\r'))
                si++;
            return si < len ? (long)si : -1;
        }
    }
    return -1;
}

/* What decoding a ConfigMap into its Go struct refuses (400). */
static int configmap_types(const luna_ds_type *t, const json_t *doc, luna_ds_status *st)
{
    static const struct { const char *bag, *map_type, *elem_type; } bags[] = {
        { "data", "map[string]string", "string" },
        { "binaryData", "map[string][]uint8", "[]uint8" },
    };
    for (size_t b = 0; b < 2; b++) {
        json_t *m = json_object_get(doc, bags[b].bag);
        if (!m || json_is_null(m))
            continue;
        if (!json_is_object(m))
            return luna_ds_status_bad_request(st, "%s in version \"%s\" cannot be handled as a "
                "%s: json: cannot unmarshal %s into Go struct field %s.%s of type %s", t->kind,
                t->version, t->kind, json_type_name(m), t->kind, bags[b].bag, bags[b].map_type);
        const char *k;
        json_t *v;
        json_object_foreach(m, k, v) {
            if (json_is_null(v))
                continue;
            if (!json_is_string(v))
                return luna_ds_status_bad_request(st, "%s in version \"%s\" cannot be handled "
                    "as a %s: json: cannot unmarshal %s into Go struct field %s.%s of type %s",
                    t->kind, t->version, t->kind, json_type_name(v), t->kind, bags[b].bag,
                    bags[b].elem_type);
            long at = b == 1 ? b64_corrupt_at(json_string_value(v), json_string_length(v)) : -1;
            if (at >= 0)
                return luna_ds_status_bad_request(st, "%s in version \"%s\" cannot be handled "
                    "as a %s: illegal base64 data at input byte %ld", t->kind, t->version,
                    t->kind, at);
        }
    }
    return 0;
}

/* The bytes base64 text decodes to (it decoded: configmap_types and the
 * schema checked it); newlines are skipped as Go's decoder skips them. */
static size_t b64_decoded_len(const char *s, size_t len)
{
    size_t chars = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=')
            pad++;
        else if (s[i] != '\n' && s[i] != '\r')
            chars++;
    }
    size_t quads = (chars + pad) / 4;
    return quads * 3 - (pad > 2 ? 2 : pad);
}

/* core.MaxSecretSize: what a ConfigMap's data and binaryData, or a
 * Secret's data, may hold in all. */
#define MAX_DATA_SIZE ((size_t)1024 * 1024)

static void configmap_keys(json_t *causes, const json_t *doc)
{
    json_t *data = json_object_get(doc, "data"), *bin = json_object_get(doc, "binaryData");
    const char *k;
    json_t *v;
    if (json_is_object(data)) {
        json_object_foreach(data, k, v) {
            configmap_key(causes, "data", k);
            if (json_is_object(bin) && json_object_get(bin, k)) {
                char field[600];
                snprintf(field, sizeof field, "data[%s]", k);
                add_invalid(causes, field, k, "duplicate of key present in binaryData");
            }
        }
    }
    if (json_is_object(bin))
        json_object_foreach(bin, k, v)
            configmap_key(causes, "binaryData", k);
}

/* core ValidateConfigMap: data's strings and binaryData's bytes at most
 * 1 MiB together, reported on the whole object (field "[]") */
static void rule_configmap_size(const json_t *doc, json_t *causes)
{
    size_t total = 0;
    const char *k;
    json_t *v;
    json_t *data = json_object_get(doc, "data"), *bin = json_object_get(doc, "binaryData");
    if (json_is_object(data))
        json_object_foreach(data, k, v)
            total += json_is_string(v) ? json_string_length(v) : 0;
    if (json_is_object(bin))
        json_object_foreach(bin, k, v)
            total += json_is_string(v) ? b64_decoded_len(json_string_value(v),
                                                         json_string_length(v)) : 0;
    if (total > MAX_DATA_SIZE)
        add_cause(causes, "FieldValueTooLong", "[]", "Too long: may not be more than 1048576 bytes");
}

/* core ValidateSecret: data's keys are config keys and its bytes at most
 * 1 MiB.  Validation sees data after stringData folded into it (the
 * v1-to-internal conversion; a stringData key replaces data's), which the
 * dev server does after validating, so both bags are read here. */
static void rule_secret_data(const json_t *doc, json_t *causes)
{
    json_t *data = json_object_get(doc, "data"), *sd = json_object_get(doc, "stringData");
    size_t total = 0;
    const char *k;
    json_t *v;
    if (json_is_object(data))
        json_object_foreach(data, k, v) {
            if (!json_is_object(sd) || !json_object_get(sd, k))
                configmap_key(causes, "data", k);
            if (json_is_string(v) && !(json_is_object(sd) && json_object_get(sd, k)))
                total += b64_decoded_len(json_string_value(v), json_string_length(v));
        }
    if (json_is_object(sd))
        json_object_foreach(sd, k, v) {
            configmap_key(causes, "data", k);
            total += json_is_string(v) ? json_string_length(v) : 0;
        }
    if (total > MAX_DATA_SIZE)
        add_cause(causes, "FieldValueTooLong", "data", "Too long: may not be more than 1048576 bytes");
}

/* ---- hand rules: kube validation the generated schema tables cannot say
 * (cross-field conditions, messages of kube's own validation functions).
 * One row per rule, each naming the k8s.io/kubernetes function it mirrors;
 * `first` rules run before the schema's causes (kube reports theirs
 * first), the others after.  Read off v1.37.2 (spec/08-apiserver/24). ---- */

static const char *spec_str(const json_t *doc, const char *k)
{
    json_t *v = json_object_get(json_object_get(doc, "spec"), k);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool absent_or_empty(const json_t *v)
{
    return !v || json_is_null(v) || (json_is_string(v) && json_string_length(v) == 0) ||
           (json_is_array(v) && json_array_size(v) == 0);
}

/* core ValidateService: a Service needs ports unless it is headless
 * (clusterIP None) or of type ExternalName */
static void rule_service_ports(const json_t *doc, json_t *causes)
{
    const char *type = spec_str(doc, "type"), *ip = spec_str(doc, "clusterIP");
    if ((type && strcmp(type, "ExternalName") == 0) || (ip && strcmp(ip, "None") == 0))
        return;
    if (absent_or_empty(json_object_get(json_object_get(doc, "spec"), "ports")))
        add_cause(causes, "FieldValueRequired", "spec.ports", "Required value");
}

/* networking ValidateIngressClassSpec: spec.controller is required */
static void rule_ingressclass_controller(const json_t *doc, json_t *causes)
{
    if (absent_or_empty(json_object_get(json_object_get(doc, "spec"), "controller")))
        add_cause(causes, "FieldValueRequired", "spec.controller", "Required value");
}

/* autoscaling ValidateCrossVersionObjectReference: the target's apiVersion
 * must name a group.  Only an absent or empty apiVersion is refused here:
 * kube's answer for a core "v1" target was not read off the real server. */
static void rule_hpa_target_group(const json_t *doc, json_t *causes)
{
    json_t *ref = json_object_get(json_object_get(doc, "spec"), "scaleTargetRef");
    json_t *av = json_object_get(ref, "apiVersion");
    if (absent_or_empty(av))
        add_invalid(causes, "spec.scaleTargetRef.apiVersion", "",
                    "apiVersion must specify API group");
}

/* flowcontrol ValidatePriorityLevelConfigurationSpec: spec.limited only
 * with type Limited */
static void rule_plc_limited(const json_t *doc, json_t *causes)
{
    const char *type = spec_str(doc, "type");
    json_t *lim = json_object_get(json_object_get(doc, "spec"), "limited");
    if (lim && !json_is_null(lim) && (!type || strcmp(type, "Limited") != 0))
        add_cause(causes, "FieldValueForbidden", "spec.limited",
                  "Forbidden: must be nil if the type is not Limited");
}

/* apiregistration ValidateAPIService: groupPriorityMinimum in [1, 20000],
 * then versionPriority in [1, 1000] (kube's bounds; its messages say "less
 * than" of both). */
static void priority_in(const json_t *spec, const char *field, json_int_t max, json_t *causes)
{
    json_t *v = json_object_get(spec, field);
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
    if (n > 0 && n <= max)
        return;
    char m[128], path[64];
    snprintf(m, sizeof m, "Invalid value: %" JSON_INTEGER_FORMAT
             ": must be positive and less than %" JSON_INTEGER_FORMAT, n, max);
    snprintf(path, sizeof path, "spec.%s", field);
    add_cause(causes, "FieldValueInvalid", path, m);
}

static void rule_apiservice_priority(const json_t *doc, json_t *causes)
{
    const json_t *spec = json_object_get(doc, "spec");
    priority_in(spec, "groupPriorityMinimum", 20000, causes);
    priority_in(spec, "versionPriority", 1000, causes);
}

static const struct hand_rule {
    const char *group, *resource;
    bool first;
    void (*check)(const json_t *doc, json_t *causes);
} HAND_RULES[] = {
    { "", "services", false, rule_service_ports },
    { "", "configmaps", false, rule_configmap_size },
    { "", "secrets", false, rule_secret_data },
    { "networking.k8s.io", "ingressclasses", false, rule_ingressclass_controller },
    { "autoscaling", "horizontalpodautoscalers", false, rule_hpa_target_group },
    { "flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations", true, rule_plc_limited },
    { "apiregistration.k8s.io", "apiservices", false, rule_apiservice_priority },
};

static void hand_rules(const luna_ds_type *t, const json_t *doc, json_t *causes, bool first)
{
    for (size_t i = 0; i < sizeof HAND_RULES / sizeof *HAND_RULES; i++)
        if (HAND_RULES[i].first == first && strcmp(t->group, HAND_RULES[i].group) == 0 &&
            strcmp(t->resource, HAND_RULES[i].resource) == 0)
            HAND_RULES[i].check(doc, causes);
}

int luna_ds_validate_fields(const luna_ds_type *t, json_t *doc, const json_t *old,
                            const char *name, luna_ds_status *st)
{
    bool configmap = !*t->group && strcmp(t->resource, "configmaps") == 0;
    if (configmap && configmap_types(t, doc, st) < 0)
        return -st->code;
    json_t *causes = json_array();
    if (!causes)
        return luna_ds_status_oom(st);
    json_t *md = json_object_get(doc, "metadata");
    json_t *l = json_object_get(md, "labels"), *a = json_object_get(md, "annotations");
    if (json_is_object(l))
        labels(causes, l);
    if (json_is_object(a))
        annotations(causes, a);
    if (configmap)
        configmap_keys(causes, doc);
    hand_rules(t, doc, causes, true);
    if (luna_ds_schema_validate(t, doc, old, causes) < 0) {
        json_decref(causes);
        return luna_ds_status_oom(st);
    }
    hand_rules(t, doc, causes, false);
    if (json_array_size(causes) == 0) {
        json_decref(causes);
        return 0;
    }
    luna_ds_status_invalid_causes(st, t->group, t->kind, name, causes);
    return -422;
}
