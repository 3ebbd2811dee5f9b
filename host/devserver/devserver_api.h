/*
 * devserver_api.h — the Kubernetes REST semantics of the dev server:
 * discovery, CRUD, LIST (selectors, paging, resourceVersion semantics),
 * WATCH set-up, PATCH (merge, JSON, strategic, apply), the status
 * subresource, generation, finalizers and deletionTimestamp, owner-reference
 * garbage collection, namespace termination and CRDs.
 *
 * The transport (devserver_http) hands over one complete request and gets
 * back one response: a body, or a watch to stream.  Errors are Status
 * objects (devserver_status).  Uses the store, types, selector, patch,
 * apply and watch modules.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_API_H
#define LUNA_DEVSERVER_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "devserver/devserver_watch.h"
#include "base/error.h"

typedef struct luna_ds_request {
    const char *method;           /* "GET", "POST", ... */
    const char *path;             /* URL path, decoded, without the query */
    /* A query parameter's decoded value, or NULL when absent. */
    const char *(*arg)(void *ctx, const char *name);
    void *arg_ctx;
    const char *content_type;     /* may be NULL */
    const char *user_agent;       /* may be NULL */
    const char *body;             /* borrowed for the call; may be NULL */
    size_t body_len;
} luna_ds_request;

typedef struct luna_ds_response {
    int code;
    char *body;                   /* owned: free() */
    size_t len;
    int retry_after;              /* > 0: send Retry-After */
    luna_ds_watch *watch;         /* non-NULL: stream this watch (owned) */
} luna_ds_response;

typedef struct luna_ds_api_config {
    const char *server_address;   /* "host:port" for /api */
    double bookmark_interval;     /* seconds between watch BOOKMARKs */
    bool admin;                   /* serve /luna/v1/faults */
} luna_ds_api_config;

/* Registers the types, creates the default namespaces.  cfg is copied;
 * its strings must live as long as the server. */
void luna_ds_api_init(const luna_ds_api_config *cfg);

/* Answers one request. */
void luna_ds_api_handle(const luna_ds_request *req, luna_ds_response *resp);

/* Creates (or, if it exists, replaces) one object from a seed document
 * (borrowed); creates its namespace if missing.  A `kind: List` or
 * `*List` document seeds each item. */
int luna_ds_api_seed(const json_t *doc, luna_error *err);

/* Every object, as a `kind: List` (caller owns). */
json_t *luna_ds_api_dump(void);

/* Frees the types and objects (after every watch is freed). */
void luna_ds_api_shutdown(void);

#endif
