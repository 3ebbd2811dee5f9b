/*
 * kube_client.h — requests to the Kubernetes API server: the HTTP client
 * plus the kubeconfig's server, TLS material and credentials.
 *
 * Uses: http (libcurl on libev), kubeconfig.  Runs on the loop thread.
 *
 * A request names a path ("/api/v1/namespaces/x/configmaps?limit=500");
 * the client prefixes the server URL, adds Accept (the request's, else
 * application/json), Content-Type and User-Agent,
 * the TLS settings (CA, client certificate, insecure-skip-tls-verify,
 * tls-server-name), the proxy (proxy-url) and the current credentials
 * (bearer token, basic auth or
 * client certificate, fetched per request so rotated tokens and refreshed
 * exec credentials apply).  A 401 from a token-file or exec-plugin user is
 * retried once after invalidating the credentials, invisibly to the caller
 * (client-go refreshes the same way).
 *
 * Callbacks are those of http.h minus the http request pointer: on_headers
 * (final response head), on_chunk or on_line (streamed body) or neither
 * (whole body in on_done), on_done exactly once unless canceled.
 *
 * Invariants:
 *   - a request is live if and only if on_done has not run and it was not
 *     canceled; live requests are canceled (silently) by
 *     luna_kube_client_free;
 *   - credentials never appear in logs or error messages.
 *
 * Ownership: the client borrows cfg and http for its whole life.  Request
 * options are copied at start.  The request handle is valid until on_done
 * returns or cancel is called.  Callback arguments are borrowed for the call.
 */
#ifndef LUNA_KUBE_CLIENT_H
#define LUNA_KUBE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "client/http.h"
#include "client/kubeconfig.h"

struct luna_kube_client;
struct luna_kube_request;

typedef int (*luna_kube_headers_fn)(void *ud, const luna_http_response *resp, luna_error *err);
typedef int (*luna_kube_data_fn)(void *ud, const char *data, size_t len, luna_error *err);
typedef void (*luna_kube_done_fn)(void *ud, const luna_http_response *resp,
                                  const luna_http_failure *fail);

struct luna_kube_request_options {
    const char *method;        /* default GET */
    const char *path;          /* required: absolute path with query */
    const char *body;
    size_t body_len;
    const char *content_type;  /* default application/json when a body is sent */
    const char *accept;        /* default application/json (the Accept header) */
    double timeout;            /* seconds; 0: none */
    double idle_timeout;       /* seconds; 0: none */
    size_t max_response_bytes;
    size_t max_line_bytes;
    luna_kube_headers_fn on_headers;
    luna_kube_data_fn on_chunk;
    luna_kube_data_fn on_line;
    luna_kube_done_fn on_done;
    void *ud;
};

int luna_kube_client_new(struct luna_kubeconfig *cfg, luna_http_client *http,
                         struct luna_kube_client **out, luna_error *err);
void luna_kube_client_free(struct luna_kube_client *kc);

struct luna_kube_request *luna_kube_request_start(struct luna_kube_client *kc,
                                                  const struct luna_kube_request_options *o,
                                                  luna_error *err);
/* No callback of the request runs after this returns. */
void luna_kube_request_cancel(struct luna_kube_request *r);

/* Observes every attempt that ends (a canceled request is not seen): its
 * HTTP status (0 when no response head arrived) and method.  The metrics
 * module counts rest_client_requests_total with it.  One observer per
 * client; fn NULL removes it; ud is borrowed until then. */
typedef void (*luna_kube_observer_fn)(void *ud, int status, const char *method);
void luna_kube_client_set_observer(struct luna_kube_client *kc, luna_kube_observer_fn fn,
                                   void *ud);

#endif
