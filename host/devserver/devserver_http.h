/*
 * devserver_http.h — the dev server's HTTP/1.1 transport: libmicrohttpd
 * driven by luna's libev loop (MHD's epoll fd watched by one ev_io, its
 * timeout by one ev_timer, MHD_run on either), optional TLS (GnuTLS through
 * MHD) and bearer-token auth, request bodies capped at 3 MiB as
 * kube-apiserver caps them, injected faults (error rate, delay), and watch
 * responses streamed with chunked encoding.  A watch connection with
 * nothing to send is suspended and resumed when its watch queues bytes, so
 * nothing polls.  HTTP/2 is not offered (libmicrohttpd has no HTTP/2).
 *
 * A request is screened on its headers before any body byte is read: two
 * differing Content-Lengths or a length beside Transfer-Encoding (400,
 * closed), the token (401), a declared length over 3 MiB (413), and room
 * in the 64 MiB bound on bodies in flight over all connections (429); a
 * refusal is sent at once and MHD discards the body and closes.  A request
 * owns its body buffer and its reservation until MHD reports it complete.
 *
 * Hostile connections (Go's http.Server as kube-apiserver configures it:
 * ReadHeaderTimeout 32 s, IdleTimeout 90 s): a request's head must be in
 * within read_header_timeout of the accept however often bytes come (a
 * kept-alive connection's next head within idle_timeout plus that, from
 * the end of the previous answer); a connection with no byte either way
 * for idle_timeout is closed (libmicrohttpd's timeout: it also ends an
 * answer or a watch nobody reads; a watch waiting for events is suspended
 * and not idle).  At most max_connections are served; one more is
 * accepted all the same and its request answered 503 ServiceUnavailable
 * with Retry-After: 1 and closed (a client that sends nothing is closed
 * after 2 s), so a full server answers instead of leaving clients in the
 * listen backlog.  Each connection's tracking (phase, deadline) is the
 * server's, freed when MHD reports the connection closed.
 *
 * Requests are handed to devserver_api.  Out of memory, a request is
 * answered 500 or, when not even that can be built, its connection is
 * closed.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_HTTP_H
#define LUNA_DEVSERVER_HTTP_H

#include <stdbool.h>

#include "base/error.h"

typedef struct luna_ds luna_ds;

typedef struct luna_ds_http_opts {
    luna_ds *ds;            /* the server to hand requests to (borrowed while running) */
    const char *host;       /* numeric address to bind, e.g. 127.0.0.1 or ::1 */
    int port;               /* 0 = any free port */
    const char *token;      /* NULL = no auth; else "Authorization: Bearer TOKEN" required */
    const char *tls_cert;   /* PEM text, or NULL for plain HTTP (borrowed while running) */
    const char *tls_key;
    unsigned max_connections;   /* 0: LUNA_DS_HTTP_MAX_CONNECTIONS */
    double idle_timeout;        /* seconds; 0: LUNA_DS_HTTP_IDLE_TIMEOUT */
    double read_header_timeout; /* seconds; 0: LUNA_DS_HTTP_READ_HEADER_TIMEOUT */
} luna_ds_http_opts;

#define LUNA_DS_HTTP_MAX_CONNECTIONS 1000u
#define LUNA_DS_HTTP_IDLE_TIMEOUT 90.0
#define LUNA_DS_HTTP_READ_HEADER_TIMEOUT 32.0

typedef struct luna_ds_http luna_ds_http;

/* Starts listening; opts' strings must outlive the server. */
luna_ds_http *luna_ds_http_start(const luna_ds_http_opts *opts, luna_error *err);

/* The bound port (useful after port 0). */
int luna_ds_http_port(const luna_ds_http *srv);

/* Stops the daemon (closing connections and freeing their watches). */
void luna_ds_http_stop(luna_ds_http *srv);

#endif
