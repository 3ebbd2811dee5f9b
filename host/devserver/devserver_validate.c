/* devserver_validate.c — see devserver_validate.h. */
#include "devserver/devserver_validate.h"

#include <ctype.h>
#include <string.h>

#include "devserver/devserver_doc.h"
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

int luna_ds_validate_name(const luna_ds_type *t, const char *name, luna_ds_status *st)
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
    if (md && !json_is_object(md))
        return luna_ds_status_bad_request(st, "metadata must be an object");
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
