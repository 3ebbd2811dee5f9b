/*
 * devserver_fields.h — field validation of a write body, as kube-apiserver
 * does it for ?fieldValidation= (KEP 2885): a field the type's schema does
 * not declare is dropped from the object, and
 *   - Warn (the default: absent or "") names each one in a warning,
 *     `unknown field "spec.template.spec.containers[1].imagee"`, that the
 *     transport sends as `Warning: 299 - "..."` (devserver_http.c);
 *   - Strict refuses the write: a create or update with 400 BadRequest
 *     "strict decoding error: unknown field \"a\", unknown field \"b\"",
 *     a patch with 422 Invalid (field "patch", the patched object as the
 *     value, as kube's patcher answers); nothing changed;
 *   - Ignore drops them silently;
 *   - anything else is 422 Invalid (kube's "Unsupported value" of
 *     CreateOptions / UpdateOptions / PatchOptions).
 * Create, update and the merge, JSON and strategic patches check the
 * object they would store (a patch: the patched object, as kube decodes
 * it).  Paths are kube's: fields joined with '.', a list element as
 * [index], a map entry as [key]; apiVersion and kind are always known.
 *
 * Schemas: the built-in kinds of the generated protobuf tables
 * (devserver_pbschema.c, every field of their Go types by JSON name), and
 * custom resources by their version's openAPIV3Schema as apiextensions
 * prunes (properties, additionalProperties, items,
 * x-kubernetes-preserve-unknown-fields, x-kubernetes-embedded-resource;
 * metadata as ObjectMeta); other built-in kinds (Lease, Event, Pod,
 * ReplicaSet, StatefulSet) and a CRD version without a schema are not
 * checked.
 *
 * Uses devserver_protobuf (the tables), devserver_status.  Runs on the
 * loop thread.  Documents are borrowed and changed in place.
 */
#ifndef LUNA_DEVSERVER_FIELDS_H
#define LUNA_DEVSERVER_FIELDS_H

#include <jansson.h>
#include <stdbool.h>

#include "devserver/devserver_request.h"
#include "devserver/devserver_status.h"
#include "devserver/devserver_types.h"

enum luna_ds_field_validation { LUNA_DS_FIELDS_WARN, LUNA_DS_FIELDS_IGNORE, LUNA_DS_FIELDS_STRICT };

/* The directive of req into *out; 0, or the negative code with st set
 * (422) for an unsupported value.  options: "CreateOptions",
 * "UpdateOptions" or "PatchOptions", for the message. */
int luna_ds_fields_directive(const luna_ds_request *req, const char *options,
                             enum luna_ds_field_validation *out, luna_ds_status *st);

/* Checks doc (an object of type t; patch: the patched object of a patch)
 * under directive dv: unknown fields are removed (Warn, Ignore) and, under
 * Warn, their warnings appended to *warnings (a JSON array of strings,
 * created on the first; the caller owns it).  Returns 0, or the negative
 * code with st set (Strict: 400, or 422 for a patch; out of memory: 500). */
int luna_ds_fields_check(const luna_ds_type *t, json_t *doc, enum luna_ds_field_validation dv,
                         bool patch, json_t **warnings, luna_ds_status *st);

/* The Warning header value for text, `299 - "text"` with '"' and '\\'
 * escaped, into buf, as apimachinery's NewWarningHeader writes it; false
 * (no header: kube drops such a warning) when text is not valid UTF-8 or
 * holds a control character, or when it does not fit. */
bool luna_ds_fields_warning_header(const char *text, char *buf, size_t size);

#endif
