/*
 * http.h — the HTTP client: libcurl's multi interface driven by libev.
 *
 * Uses libcurl (7.88 or later) and the libev loop given to the client
 * (luna_loop() in luna).  Everything runs on the loop thread; no call here
 * blocks (name resolution runs in curl's resolver thread).  One client owns
 * one multi handle, so connections are kept and reused across requests, and
 * HTTP/2 is negotiated over TLS (ALPN) where the server offers it, with many
 * requests (watches) multiplexed on one connection.
 *
 * Shape: the client (loop, one ev_timer, the multi handle) maps curl's
 * CURLMOPT_SOCKETFUNCTION / TIMERFUNCTION onto ev_io / ev_timer watchers,
 * calls curl_multi_socket_action and drains curl_multi_info_read after every
 * call.  A request is found from its easy handle through CURLOPT_PRIVATE, a
 * socket's ev_io through curl_multi_assign.
 *
 * Callbacks never run inside a libcurl callback: curl's write and header
 * callbacks only buffer, and the buffered headers, data and completion are
 * delivered once curl_multi_socket_action has returned.  So a callback may
 * start requests and cancel any request, its own included; it must not
 * free the client.  If a callback runs the loop itself, data arriving
 * meanwhile for the same request is delivered after that callback returns,
 * in order.
 *
 * HTTP/2: requests to https URLs set CURLOPT_PIPEWAIT, so concurrent ones
 * wait for ALPN and then share one connection.  Plain http is HTTP/1.1,
 * one connection per concurrent request (PIPEWAIT there would stall
 * concurrent streams: curl 7.88 wakes waiting transfers only when another
 * one ends).  Options used and the libcurl release that added them:
 * CAINFO_BLOB 7.77, SSLCERT_BLOB / SSLKEY_BLOB 7.71, PROTOCOLS_STR 7.85,
 * PIPEWAIT 7.43, HTTP_VERSION_2TLS 7.47, the rest older; Debian bookworm
 * ships 7.88.1.
 *
 * A request delivers, in this order and each at most once except data:
 *   on_headers  once, when the final (non-1xx) response head has arrived;
 *   on_chunk    per piece of body as it arrives       (chunk mode), or
 *   on_line     per complete non-empty line (NDJSON)  (line mode), or
 *               nothing: the body is collected        (whole mode);
 *   on_done     exactly once, unless the request is canceled first.
 * Data callbacks return 0, or a negative LUNA_E* code (filling err) to stop
 * the request; on_done then reports it (reason CALLBACK_FAILED, or
 * TOO_BIG / CANCELED when the code is LUNA_ETOOBIG / LUNA_ECANCELED).
 *
 * Invariants:
 *   - a request is live (counted by luna_http_client_active) if and only if
 *     it was started and neither on_done has returned nor cancel been called;
 *   - on_done is called if and only if the request was not canceled before;
 *   - after luna_http_request_cancel returns, no callback of that request
 *     runs again, and (unless cancel was called from one of that request's
 *     own callbacks, in which case as soon as that callback returns) all its
 *     resources — easy handle, buffers, idle timer — are released.
 *
 * Errors (on_done's fail, never NULL on failure) carry a LUNA_E* code, a
 * reason, and a message "METHOD URL: what happened" where URL and what
 * happened pass luna_url_redact (base/url.h: no user:password, no query
 * secret), followed by " (through proxy PROXY)", also redacted, when a
 * proxy is set.  The bearer token and request headers are never logged
 * nor put in messages.
 *
 *   reason               code            when
 *   CONNECTION_FAILED    LUNA_EIO        refused, unreachable, reset, closed
 *   HOST_NOT_FOUND       LUNA_ENOTFOUND  name resolution failed
 *   TIMEOUT              LUNA_ETIMEOUT   total or connect timeout
 *   IDLE_TIMEOUT         LUNA_ETIMEOUT   no byte received for idle_timeout
 *   TOO_BIG              LUNA_ETOOBIG    response body / line over its cap
 *   TLS                  LUNA_EIO        handshake, verification, bad cert/key
 *   PROTOCOL             LUNA_EPROTO     malformed HTTP, HTTP/2 error
 *   TRUNCATED            LUNA_EPROTO     body shorter than announced, or the
 *                                        stream ended inside a line
 *   CALLBACK_FAILED      callback's code a data callback stopped the request
 *   INVALID              LUNA_EINVAL     bad options (luna_http_request_start)
 *
 * Ownership: luna_http_client_new returns a client freed with
 * luna_http_client_free.  luna_http_request_start copies everything it needs
 * from the options (URL, method, headers, body unless body_borrowed, token,
 * TLS material), so the caller may free them as soon as it returns.  The returned request
 * pointer is owned by the client and valid until on_done returns or
 * luna_http_request_cancel is called; never free it.  Everything passed to
 * a callback (resp and its headers and body, data, line, fail) is borrowed
 * until that callback returns.
 */
#ifndef LUNA_HTTP_H
#define LUNA_HTTP_H

#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "base/error.h"

/* Caps used when an option is 0. */
#define LUNA_HTTP_DEFAULT_MAX_RESPONSE  (64u << 20) /* whole-mode body */
#define LUNA_HTTP_DEFAULT_MAX_LINE      (16u << 20) /* one NDJSON line */
#define LUNA_HTTP_DEFAULT_MAX_REQUEST   (8u << 20)  /* request body */
#define LUNA_HTTP_DEFAULT_CONNECT_TIMEOUT 30.0      /* seconds */

typedef struct luna_http_client luna_http_client;
typedef struct luna_http_request luna_http_request;

typedef struct luna_http_header {
    const char *name;
    const char *value;
} luna_http_header;

enum luna_http_reason {
    LUNA_HTTP_OK = 0,
    LUNA_HTTP_CONNECTION_FAILED,
    LUNA_HTTP_HOST_NOT_FOUND,
    LUNA_HTTP_TIMEOUT,
    LUNA_HTTP_IDLE_TIMEOUT,
    LUNA_HTTP_CANCELED,
    LUNA_HTTP_TOO_BIG,
    LUNA_HTTP_TLS,
    LUNA_HTTP_PROTOCOL,
    LUNA_HTTP_TRUNCATED,
    LUNA_HTTP_CALLBACK_FAILED,
    LUNA_HTTP_INVALID,
    LUNA_HTTP_NO_MEMORY,
};

/* "ConnectionFailed", "HostNotFound", "Timeout", "IdleTimeout", "Canceled",
 * "TooBig", "TLSError", "ProtocolError", "Truncated", "CallbackFailed",
 * "InvalidRequest", "OutOfMemory" (static strings; "OK" for LUNA_HTTP_OK). */
const char *luna_http_reason_name(enum luna_http_reason reason);

typedef struct luna_http_failure {
    enum luna_http_reason reason;
    luna_error err;             /* err.code: LUNA_E*; err.msg: "METHOD URL: ..." */
} luna_http_failure;

typedef struct luna_http_response {
    long status;                /* 0 if no response head arrived */
    int http_version;           /* 10, 11, 20, 30; 0 if unknown */
    const luna_http_header *headers; /* names lowercased, values trimmed, */
    size_t nheaders;                 /* in arrival order, repeats kept */
    const char *body;           /* whole mode, on success: the body, with a
                                   NUL after it; NULL otherwise */
    size_t body_len;
} luna_http_response;

/* TLS material: each of CA, certificate and key is either a file path or
 * PEM bytes (the bytes win if both are set).  All optional. */
typedef struct luna_http_tls {
    const char *ca_file;
    const char *ca_pem;   size_t ca_pem_len;
    const char *cert_file;
    const char *cert_pem; size_t cert_pem_len;
    const char *key_file;
    const char *key_pem;  size_t key_pem_len;
    bool insecure_skip_verify;  /* no peer or host name verification */
    /* https only: the name the TLS session asks for (SNI) and the server
     * certificate is verified against, instead of the URL's host; the
     * connection still goes to the URL's host and port, and the Host
     * header still names them (client-go's tls-server-name).  A DNS name
     * or an IP address; NULL or "": the URL's host. */
    const char *server_name;
} luna_http_tls;

typedef int (*luna_http_headers_fn)(luna_http_request *req,
                                    const luna_http_response *resp, void *ud,
                                    luna_error *err);
typedef int (*luna_http_data_fn)(luna_http_request *req, const char *data,
                                 size_t len, void *ud, luna_error *err);
/* fail is NULL on success.  resp is never NULL; on failure it holds what
 * arrived (status 0 if nothing). */
typedef void (*luna_http_done_fn)(luna_http_request *req,
                                  const luna_http_response *resp,
                                  const luna_http_failure *fail, void *ud);

typedef struct luna_http_options {
    const char *method;         /* default "GET"; an HTTP token */
    const char *url;            /* required; http:// or https:// */
    const luna_http_header *headers;
    size_t nheaders;            /* no CR/LF in names or values */
    const char *body;           /* NULL: no body (POST/PUT/PATCH send an */
    size_t body_len;            /*   empty one); may contain NULs */
    bool body_borrowed;         /* the body stays valid and unchanged until
                                   on_done returns or the request is
                                   canceled, so it is not copied (by
                                   default it is: see Ownership) */
    const char *bearer_token;   /* adds "Authorization: Bearer ..." and
                                   replaces any Authorization header */
    luna_http_tls tls;
    /* Every connection goes through this proxy: http://, https:// (HTTP
     * CONNECT for https URLs) or socks5:// (the proxy resolves names), with
     * optional user:password@ for the proxy.  NO_PROXY does not apply.
     * NULL or "": libcurl's environment ($https_proxy, $HTTPS_PROXY,
     * $http_proxy, $NO_PROXY), as client-go's ProxyFromEnvironment. */
    const char *proxy;

    double timeout;             /* seconds for the whole request; 0: none */
    double connect_timeout;     /* seconds (DNS + TCP + TLS); 0: default */
    double idle_timeout;        /* fail if no byte arrives for this many
                                   seconds, counted from the start; 0: none */
    size_t max_request_bytes;   /* 0: LUNA_HTTP_DEFAULT_MAX_REQUEST */
    size_t max_response_bytes;  /* 0: the default in whole mode, no cap in
                                   the streamed modes */
    size_t max_line_bytes;      /* line mode; 0: LUNA_HTTP_DEFAULT_MAX_LINE */

    luna_http_headers_fn on_headers; /* optional */
    luna_http_data_fn on_chunk;      /* set at most one of on_chunk and */
    luna_http_data_fn on_line;       /*   on_line; neither: whole mode */
    luna_http_done_fn on_done;       /* optional */
    void *ud;                        /* passed to every callback */
} luna_http_options;

/* Creates a client on loop (initialising libcurl once per process).
 * NULL with err set on failure. */
luna_http_client *luna_http_client_new(struct ev_loop *loop, luna_error *err);

/* Cancels every live request (no callbacks), closes all connections and
 * frees the client.  Not from inside one of its callbacks.  NULL is a no-op. */
void luna_http_client_free(luna_http_client *c);

/* Bounds how long data sent on a connection may stay unacknowledged by the
 * peer: past secs the kernel drops the connection and what it still held
 * (TCP_USER_TIMEOUT), so bytes written to a socket reach the server within
 * secs or never (a network that holds them, a partition that heals, cannot
 * deliver a request late).  Applies to every connection opened after the
 * call (connections open when the loop runs: call it before).  0: the
 * kernel's default (minutes).  A sharded replica sets it (shard_set.h). */
void luna_http_client_set_unacked_timeout(luna_http_client *c, double secs);

/* Number of live requests. */
size_t luna_http_client_active(const luna_http_client *c);
/* Response body bytes received so far, every request counted (a sharded
 * replica's share of the API server's answers). */
uint64_t luna_http_client_received(const luna_http_client *c);

/* Starts a request; never calls a callback before returning.  Returns the
 * request, or NULL with err set (LUNA_EINVAL: bad method, URL, header or
 * option; LUNA_ETOOBIG: body over max_request_bytes; LUNA_ENOMEM).  If
 * reason is non-NULL it receives the failure's reason. */
luna_http_request *luna_http_request_start(luna_http_client *c,
                                           const luna_http_options *o,
                                           enum luna_http_reason *reason,
                                           luna_error *err);

/* Stops a live request: no callback of it runs after this returns, and its
 * resources are released (see the invariants above).  A no-op when called
 * from the request's own on_done.  Not allowed after on_done has returned
 * or a previous cancel (the pointer is dangling then): callers clear their
 * copy of the pointer in on_done and when they cancel. */
void luna_http_request_cancel(luna_http_request *req);

/* "METHOD URL" of a live request, credentials removed; borrowed until the
 * request ends. */
const char *luna_http_request_describe(const luna_http_request *req);

#endif
