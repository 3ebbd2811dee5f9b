/*
 * devserver_api.h — the Kubernetes REST semantics of the dev server: the
 * router that maps a request's path to discovery (/api, /apis, OpenAPI),
 * /version, the health paths, luna's own /luna/v1/dump and /luna/v1/faults,
 * and the resource verbs.
 *
 * The transport (devserver_http) hands over one complete request and gets
 * back one response: a body, or a watch to stream (devserver_request).
 * Everything one server owns hangs off its luna_ds (devserver_state).
 * The parts: devserver_validate (checks before a write), devserver_write
 * (the write pipeline and its hooks), devserver_gc (deletion, garbage
 * collection, the namespace finalizer), devserver_list (LIST and WATCH
 * set-up, with devserver_continue's tokens), devserver_verbs (the verbs on
 * one object), devserver_seed (seeds and the dump).  Errors are Status
 * objects (devserver_status).  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_API_H
#define LUNA_DEVSERVER_API_H

#include <stdbool.h>
#include <stddef.h>

#include "devserver/devserver_request.h"
#include "base/error.h"

typedef struct luna_ds luna_ds;

typedef struct luna_ds_api_config {
    const char *server_address;   /* "host:port" for /api (copied) */
    double bookmark_interval;     /* seconds between watch BOOKMARKs */
    bool admin;                   /* serve /luna/v1/faults */
    size_t history;               /* watch events kept per resource; 0: 10000 */
} luna_ds_api_config;

/* A new server with the built-in types and the default namespaces
 * (default, kube-node-lease, kube-public, kube-system), and no faults.
 * Returns 0 and *out (free with luna_ds_api_free), or a negative LUNA_E*
 * code with err set. */
int luna_ds_api_new(const luna_ds_api_config *cfg, luna_ds **out, luna_error *err);

/* Answers one request. */
void luna_ds_api_handle(luna_ds *ds, const luna_ds_request *req, luna_ds_response *resp);

/* Frees the server's objects and types (after every watch is freed). */
void luna_ds_api_free(luna_ds *ds);

#endif
