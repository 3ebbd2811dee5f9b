/*
 * devserver_hook_client.h — the dev server's outgoing HTTP calls to
 * admission webhooks: one POST of a JSON body per call, over libcurl's
 * multi interface driven by luna's libev loop (the three-struct shape of
 * curl's evhiperfifo example: the client with its loop timer and multi
 * handle, a call per easy handle through CURLOPT_PRIVATE, an ev_io per
 * socket through curl_multi_assign).  No call blocks the loop, so other
 * clients of the dev server are served while a webhook thinks.
 *
 * The dev server depends on base/ only (spec/01-host/04-tree_spec.lua),
 * hence this small client of its own rather than client/http.
 *
 * Delivery: a call's done callback runs exactly once, unless the call is
 * canceled first, and never inside a libcurl callback (curl only buffers;
 * completions are delivered after curl_multi_socket_action returns), so
 * it may start and cancel calls.  It must not free the client.
 *
 * Ownership: the client is freed with luna_ds_hook_client_free (which
 * cancels every live call without callbacks).  A call belongs to the
 * client until its done callback returns or it is canceled; its body,
 * CA and URL are copied at start.  What done gets is borrowed for the
 * callback.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_HOOK_CLIENT_H
#define LUNA_DEVSERVER_HOOK_CLIENT_H

#include <stddef.h>

typedef struct luna_ds_hook_client luna_ds_hook_client;
typedef struct luna_ds_hook_call luna_ds_hook_call;

/* status: the HTTP status (0 when no answer came); body: the answer's
 * bytes, NUL-terminated (NULL on failure); error: NULL, or what went wrong
 * as Go's net/http words it for kube's messages ("context deadline
 * exceeded", "connect: connection refused", "tls: ..."). */
typedef void (*luna_ds_hook_done_fn)(void *ud, long status, const char *body, size_t len,
                                     const char *error);

typedef struct luna_ds_hook_opts {
    const char *url;         /* https:// or http:// */
    const char *connect_to;  /* NULL, or curl's "HOST:PORT:CONNECT-HOST:CONNECT-PORT" */
    const char *ca_pem;      /* NULL: the system's roots; else PEM bytes */
    size_t ca_len;
    const char *body;
    size_t body_len;
    double timeout;          /* seconds for the whole call */
    luna_ds_hook_done_fn done;
    void *ud;
} luna_ds_hook_opts;

/* NULL when out of memory. */
luna_ds_hook_client *luna_ds_hook_client_new(void);
void luna_ds_hook_client_free(luna_ds_hook_client *c);

/* Starts a call; never calls done before returning.  NULL when out of
 * memory or libcurl refuses the options (err says which). */
luna_ds_hook_call *luna_ds_hook_call_start(luna_ds_hook_client *c, const luna_ds_hook_opts *o,
                                           char *err, size_t errn);
/* Stops a live call: its done callback never runs. */
void luna_ds_hook_call_cancel(luna_ds_hook_call *call);

#endif
