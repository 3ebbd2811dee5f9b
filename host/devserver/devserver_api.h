/*
 * devserver_api.h — the Kubernetes REST semantics of the dev server: the
 * router that maps a request's path to discovery (/api, /apis, OpenAPI),
 * /version, the health paths, luna's own /luna/v1/dump and /luna/v1/faults,
 * and the resource verbs.
 *
 * The transport (devserver_http) hands over one complete request and gets
 * back one response: a body, or a watch to stream (devserver_request).
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

#include "devserver/devserver_request.h"

typedef struct luna_ds_api_config {
    const char *server_address;   /* "host:port" for /api */
    double bookmark_interval;     /* seconds between watch BOOKMARKs */
    bool admin;                   /* serve /luna/v1/faults */
} luna_ds_api_config;

/* Registers the types, creates the default namespaces.  cfg is copied;
 * its strings must live as long as the server. */
void luna_ds_api_init(const luna_ds_api_config *cfg);

/* The configuration luna_ds_api_init() was given. */
const luna_ds_api_config *luna_ds_api_config_get(void);

/* Answers one request. */
void luna_ds_api_handle(const luna_ds_request *req, luna_ds_response *resp);

/* Frees the types and objects (after every watch is freed). */
void luna_ds_api_shutdown(void);

#endif
