/*
 * devserver_apply.h — field ownership (metadata.managedFields) and
 * server-side apply, for the common case.
 *
 * Field sets use kube's FieldsV1 encoding ("f:data":{"f:key":{}}, list
 * items "k:{\"name\":\"x\"}", set members "v:\"x\"", "." for the node
 * itself).  Lists follow luna_ds_patch_list_key(): keyed lists merge by
 * key, sets by value, other lists are atomic (one leaf).
 *
 * Update operations (create, PUT, PATCH) give their manager the fields they
 * changed and take those fields from other managers.  Apply merges the
 * applied configuration, removes fields the manager applied before but no
 * longer does (unless another manager owns them), and refuses with 409
 * Conflict to change a field another manager owns unless force is set.
 * Documents are borrowed; results are new references.  Runs on the loop
 * thread.
 */
#ifndef LUNA_DEVSERVER_APPLY_H
#define LUNA_DEVSERVER_APPLY_H

#include <jansson.h>
#include <stdbool.h>

#include "devserver/devserver_status.h"
#include "devserver/devserver_types.h"

/* Sets newdoc's metadata.managedFields for an Update by `manager` that
 * turned olddoc (NULL on create) into newdoc.  subresource is NULL or
 * "status"; now is an RFC 3339 time.  Returns 0, or LUNA_ENOMEM with
 * managedFields left as they were. */
int luna_ds_apply_track_update(json_t *newdoc, const json_t *olddoc, const luna_ds_type *t,
                               const char *manager, const char *subresource, const char *now);

/* Applies `applied` (the request body) by `manager` to cur (NULL when the
 * object does not exist yet).  Returns the new document with managedFields
 * updated, or NULL with st set (409 Conflict listing the conflicts; 500
 * when out of memory). */
json_t *luna_ds_apply(const json_t *cur, const json_t *applied, const luna_ds_type *t,
                      const char *manager, bool force, const char *subresource,
                      const char *now, luna_ds_status *st);

#endif
