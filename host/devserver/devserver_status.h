/*
 * devserver_status.h — metav1.Status values, as kube-apiserver shapes them.
 *
 * Every failed dev-server request answers with one of these, e.g.
 *   {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
 *    "message":"configmaps \"x\" not found","reason":"NotFound",
 *    "details":{"name":"x","kind":"configmaps"},"code":404}
 * A luna_ds_status is a small caller-owned value carried from the module
 * that found the problem (store, patch, selector) to the HTTP layer, which
 * renders it with luna_ds_status_json().  `details` is owned by the value:
 * free it with luna_ds_status_clear().  Runs on the loop thread.
 *
 * Functions that fill one in return, as the rest of luna does, 0 or a
 * negative LUNA_E* code (LUNA_ENOTFOUND for 404 and 410, LUNA_ETOOBIG for
 * 413, LUNA_ETIMEOUT for 504, LUNA_ENOMEM for luna_ds_status_oom, else
 * LUNA_EINVAL); the HTTP status itself travels in the value.
 */
#ifndef LUNA_DEVSERVER_STATUS_H
#define LUNA_DEVSERVER_STATUS_H

#include <jansson.h>
#include <stdbool.h>

#include "base/error.h"

typedef struct luna_ds_status {
    int code;             /* HTTP status; 0 = no error recorded */
    const char *reason;   /* static string: "NotFound", "Conflict", ... ("" for none) */
    char message[1024];
    json_t *details;      /* owned; NULL renders no "details" */
    int retry_after;      /* seconds; > 0 adds a Retry-After header */
} luna_ds_status;

/* Records an error in st (replacing what was there) and returns the
 * LUNA_E* code for it, so a caller can
 * `return luna_ds_status_set(st, 404, "NotFound", ...)`. */
int luna_ds_status_set(luna_ds_status *st, int code, const char *reason,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Shortcuts with kube's wording.  `resource` is the plural (details.kind is
 * the resource name, as kube sends it); group may be "" and is then omitted. */
int luna_ds_status_not_found(luna_ds_status *st, const char *group,
                             const char *resource, const char *name);
int luna_ds_status_already_exists(luna_ds_status *st, const char *group,
                                  const char *resource, const char *name);
int luna_ds_status_conflict(luna_ds_status *st, const char *group,
                            const char *resource, const char *name, const char *why);
int luna_ds_status_bad_request(luna_ds_status *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* 422 Invalid: `kind` is the Kind; one cause (field, message) is recorded;
 * message "Kind \"name\" is invalid: field: what". */
int luna_ds_status_invalid(luna_ds_status *st, const char *group, const char *kind,
                           const char *name, const char *cause_reason,
                           const char *field, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
/* 422 Invalid with every cause in causes (a JSON array of {reason,
 * message, field}, consumed): message "Kind \"name\" is invalid: field:
 * message" for one, "[f1: m1, f2: m2]" for more, as kube aggregates them
 * (cut at the message buffer; the causes stay whole). */
int luna_ds_status_invalid_causes(luna_ds_status *st, const char *group, const char *kind,
                                  const char *name, json_t *causes);

/* 500 InternalError "out of memory" (without allocating); returns
 * LUNA_ENOMEM. */
int luna_ds_status_oom(luna_ds_status *st);

/* Frees details and resets st to "no error". */
void luna_ds_status_clear(luna_ds_status *st);

/* A new Status object for st (a Failure; code 0 renders a Success). */
json_t *luna_ds_status_json(const luna_ds_status *st);

/* The Status kube answers for a delete that removed the object at once:
 * {"status":"Success","details":{"name","group","kind":resource,"uid"}}. */
json_t *luna_ds_status_success_delete(const char *group, const char *resource,
                                      const char *name, const char *uid);

#endif
