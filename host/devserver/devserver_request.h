/*
 * devserver_request.h — one dev-server API call as the transport hands it
 * over (luna_ds_request) and the answer it gets back (luna_ds_response),
 * with the helpers the router and the verbs use to read query parameters
 * and to answer with a document or a Status.
 *
 * The request is borrowed for the call.  The response owns its body
 * (free()) or its watch (luna_ds_watch_free()), and its warnings
 * (json_decref()); the reply helpers fill it in.  jansson returns NULL when out of memory, so a helper given NULL
 * answers 500 out of memory.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_REQUEST_H
#define LUNA_DEVSERVER_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "devserver/devserver_status.h"
#include "devserver/devserver_watch.h"

typedef struct luna_ds_request {
    const char *method;           /* "GET", "POST", ... */
    const char *path;             /* URL path, decoded, without the query */
    /* A query parameter's decoded value, or NULL when absent. */
    const char *(*arg)(void *ctx, const char *name);
    void *arg_ctx;
    const char *content_type;     /* may be NULL */
    const char *user_agent;       /* may be NULL */
    const char *accept;           /* the Accept header; may be NULL */
    const char *authorization;    /* the Authorization header; may be NULL */
    /* The requester as an authentication.k8s.io/v1 UserInfo, resolved
     * when the request was authenticated (on its headers), borrowed: a
     * token that expires or whose ServiceAccount goes while the body is
     * read changes nothing, as in kube-apiserver, whose authentication
     * filter runs once, first.  NULL (callers without a transport): it is
     * resolved from authorization when needed. */
    json_t *user;
    /* The conversions answered for this request in earlier passes, key ->
     * object (borrowed; devserver_convert.h), or NULL. */
    json_t *conversions;
    const char *body;             /* borrowed for the call; may be NULL */
    size_t body_len;
} luna_ds_request;

typedef struct luna_ds_response {
    int code;
    char *body;                   /* owned: free() */
    size_t len;
    int retry_after;              /* > 0: send Retry-After */
    const char *content_type;     /* static; NULL: application/json ("" sends none) */
    luna_ds_watch *watch;         /* non-NULL: stream this watch (owned) */
    json_t *warnings;             /* owned: strings sent as Warning: 299 headers, or NULL */
} luna_ds_response;

/* A query parameter's value, or NULL when absent. */
const char *luna_ds_request_arg(const luna_ds_request *req, const char *name);
/* A boolean query parameter as kube-apiserver's parameter codec reads one
 * (apimachinery's Convert_Slice_string_To_bool): absent, "0" or "false"
 * in any case is false, anything else ("" included) true. */
bool luna_ds_request_flag(const luna_ds_request *req, const char *name);
/* The field manager of a write: ?fieldManager=, else the User-Agent's
 * product (before the first '/'), written into buf when it comes from
 * there. */
const char *luna_ds_request_manager(const luna_ds_request *req, char *buf, size_t n);

/* Answers body (a NUL-terminated string; takes ownership). */
void luna_ds_reply_bytes(luna_ds_response *resp, int code, char *body);
/* Answers 500 InternalError "out of memory" (an empty body if even that
 * cannot be allocated). */
void luna_ds_reply_oom(luna_ds_response *resp);
/* Answers doc as one compact JSON line (takes ownership of doc; NULL, or a
 * document that cannot be serialised, answers luna_ds_reply_oom). */
void luna_ds_reply_json(luna_ds_response *resp, int code, json_t *doc);
/* Answers the Status in st and clears st. */
void luna_ds_reply_status(luna_ds_response *resp, luna_ds_status *st);
/* 404 NotFound and 405 MethodNotAllowed Statuses for a resource path of a
 * served group the server does not serve. */
void luna_ds_reply_not_found(luna_ds_response *resp);
void luna_ds_reply_not_allowed(luna_ds_response *resp);
/* What kube-apiserver answers for a path outside every served group and
 * outside /api and /apis: a plain-text 404 "404 page not found", no Status. */
void luna_ds_reply_page_not_found(luna_ds_response *resp);

#endif
