/*
 * devserver_validate.h — the checks kube-apiserver makes on a write before
 * it touches storage: the request body is one JSON object, its kind and
 * apiVersion match the URL's type (and are filled in when absent), its
 * namespace matches the URL's, the name is a valid DNS label or subdomain
 * for its type, and the namespace exists (and, for a create, is not
 * terminating).  Messages are kube's.
 *
 * Each returns 0, or the negative HTTP status with st filled in
 * (devserver_status).  Documents are borrowed and may be completed in
 * place.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_VALIDATE_H
#define LUNA_DEVSERVER_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>

#include "devserver/devserver_request.h"
#include "devserver/devserver_status.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds luna_ds;

/* The request body as a new JSON object (caller owns), or NULL with st set
 * (400) when it is empty, not JSON, or not an object. */
json_t *luna_ds_validate_body(const luna_ds_request *req, luna_ds_status *st);
/* kind and apiVersion of doc against type t; sets both. */
int luna_ds_validate_kind(luna_ds_type *t, json_t *doc, luna_ds_status *st);
/* metadata.namespace of doc against the URL's ns (set for a namespaced
 * type, removed for a cluster-scoped one). */
int luna_ds_validate_namespace(luna_ds_type *t, json_t *doc, const char *ns, luna_ds_status *st);
/* kind, apiVersion and namespace as above, and when name is given (PUT,
 * apply) a metadata.name in doc must equal it (400 otherwise). */
int luna_ds_validate_object(luna_ds_type *t, json_t *doc, const char *ns, const char *name,
                            luna_ds_status *st);
/* 404 when ns does not exist; 403 when creating in a terminating one. */
int luna_ds_validate_namespace_usable(luna_ds *ds, luna_ds_type *t, const char *ns, const char *name,
                                      bool creating, luna_ds_status *st);
/* What kube-apiserver checks of any object's metadata and of a ConfigMap's
 * data on every create and update: label keys and values, annotation keys
 * (qualified names) and their total size (256 KiB), ConfigMap data and
 * binaryData keys; every violation found is a cause of one 422 Invalid, as
 * kube aggregates them.  A ConfigMap whose data values are not strings or
 * whose binaryData values are not base64 is refused first with the 400 its
 * decoding gives.  Then the schema's defaults and checks
 * (devserver_schema.h: required fields, enums, and, when old is the
 * stored object an update replaces, immutable fields); doc gets the
 * defaults.  name: the object's, for the message. */
int luna_ds_validate_fields(const luna_ds_type *t, json_t *doc, const json_t *old,
                            const char *name, luna_ds_status *st);
/* metadata.name for type t (422 Invalid with kube's messages, one cause
 * per failure; doc, when given, for names composed from spec fields). */
int luna_ds_validate_name(const luna_ds_type *t, const char *name, const json_t *doc,
                          luna_ds_status *st);

#endif
