/*
 * devserver_patch.h — the three PATCH formats kube-apiserver accepts:
 * JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge
 * patch (SMP) with the merge keys of the built-in types' common lists.
 *
 * Also the list-schema knowledge shared with server-side apply:
 * luna_ds_patch_list_key() tells, for a list at a field path, whether it is
 * a map keyed by a field (containers by name, ports by containerPort, ...),
 * a set of scalars (metadata.finalizers), or atomic (everything else, and
 * every list of a custom resource).
 *
 * Documents are jansson values; functions take a mutable document and
 * modify it in place unless they say otherwise.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_PATCH_H
#define LUNA_DEVSERVER_PATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "devserver/devserver_status.h"
#include "devserver/devserver_types.h"

enum luna_ds_list_kind { LUNA_DS_LIST_ATOMIC, LUNA_DS_LIST_MAP, LUNA_DS_LIST_SET };

/* path: the field names from the object root to the list (list indices
 * left out), e.g. {"spec","template","spec","containers"}.  For MAP lists
 * *key is the merge key. */
enum luna_ds_list_kind luna_ds_patch_list_key(const luna_ds_type *t, const char *const *path,
                                              int depth, const char **key);

/* True if the array arr holds a value equal to v (a set-list member). */
bool luna_ds_patch_set_has(const json_t *arr, const json_t *v);
/* Appends to the set-list target each value of items it does not hold yet
 * (new references). */
void luna_ds_patch_set_union(json_t *target, const json_t *items);

/* RFC 7386: returns the patched document (a new reference; target is
 * consumed). */
json_t *luna_ds_patch_merge(json_t *target, const json_t *patch);

/* RFC 6902: applies ops to *doc (replacing *doc when the root is replaced).
 * Returns 0, or a negative LUNA_E* code with st set: 400 BadRequest when
 * ops is malformed, 422 Invalid when an operation does not apply (missing
 * path, failed test), 500 when out of memory.  *doc may be partly patched
 * then: the caller drops it. */
int luna_ds_patch_json(json_t **doc, const json_t *ops, luna_ds_status *st);

/* kube-apiserver's bounds on a JSON patch, which luna_ds_patch_json keeps:
 * the bytes all "copy" operations of one patch add, counted as the compact
 * JSON of each copied value, may not pass 3 MiB (k8s.io/apiserver's
 * JSONPatchMaxCopyBytes, handed to evanphx/json-patch as its
 * AccumulatedCopySizeLimit): so a 2 KB patch of copies each doubling a
 * value cannot grow an object without bound.  Past it: 422 Invalid with
 * kube's generic message ("the server rejected our request due to an
 * error in our request"; json-patch's reason is logged at debug).  A
 * patch of over 10,000 operations is refused 413 RequestEntityTooLarge.
 * The copy is measured before it is made. */
#define LUNA_DS_PATCH_MAX_COPY_BYTES ((size_t)3 * 1024 * 1024)

/* luna_ds_patch_json with another copy bound (the fuzz target uses a
 * small one: 3 MiB of dense JSON is a million values, seconds under
 * ASan). */
int luna_ds_patch_json_bounded(json_t **doc, const json_t *ops, size_t max_copy_bytes,
                               luna_ds_status *st);

/* Strategic merge patch onto doc (an object) for type t; handles the
 * $patch (replace/delete/merge), $retainKeys, $deleteFromPrimitiveList/ and
 * $setElementOrder/ directives.  Returns 0, or a negative LUNA_E* code with
 * st set (400, 422 or 500 as luna_ds_patch_json). */
int luna_ds_patch_strategic(json_t *doc, const json_t *patch, const luna_ds_type *t,
                            luna_ds_status *st);

#endif
