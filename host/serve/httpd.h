/*
 * httpd.h — luna's own HTTP endpoints: the Prometheus scrape target and
 * the kubelet's probes.
 *
 *   GET /metrics          the registry in text format 0.0.4
 *                         (Content-Type: text/plain; version=0.0.4)
 *   GET /healthz          liveness: the loop's heartbeat (health.h)
 *   GET /readyz           readiness: heartbeat and every readiness check
 *       ?verbose          one line per check even when all pass
 *       ?exclude=NAME     (repeatable) a check that does not count
 *   GET /readyz/NAME      one check: 200 "ok", or 500 "[-]NAME failed: why";
 *   GET /healthz/loop     "loop" is the heartbeat on both endpoints
 *
 * A server serves /metrics if it was given a registry and the health
 * endpoints if it was given a health state (controller-runtime runs two
 * servers, :8443 for metrics and :8081 for probes; one server can do
 * both).  Other paths get 404, other methods than GET and HEAD 405 with
 * "Allow: GET, HEAD".  Request bodies are read and dropped.
 *
 * Secure serving (controller-runtime's SecureServing with its
 * authentication/authorization filter): with a certificate the server
 * speaks only TLS; with an auth (metrics_auth.h), a /metrics request is
 * answered only after the API server authenticated its bearer token and
 * authorized the user to GET the path: 401 "Unauthorized" (with
 * WWW-Authenticate: Bearer), 403 "Authorization denied for user U", 500
 * when the API server could not decide, 503 (Retry-After: 1) when too
 * many scrapes already wait (metrics_auth.h).  The connection is suspended meanwhile, so
 * the loop goes on.  Probes are never authenticated (the kubelet has no
 * token).  The certificate can be replaced while serving.
 *
 * /admin/ (admin.h), when the server was given an admin handler, is
 * authenticated and authorized the same way (the review is for the
 * request's own path and lowercased method, e.g. post on
 * /admin/controllers/web/pause); a refused request is logged ("admin
 * request refused").  The answer is JSON.
 *
 * Addresses are Go's "HOST:PORT": ":8080" (every interface: IPv6 and IPv4
 * when the host has IPv6, else IPv4), "127.0.0.1:0" (port 0: the kernel
 * picks a free one; luna_httpd_address tells which), "[::1]:9090",
 * "localhost:8080" (a name is resolved once, at start).
 *
 * libmicrohttpd runs on the loop through mhd_loop.h, without threads: a
 * scrape renders on the loop thread between other events, so nothing is
 * shared and nothing locks.
 *
 * Hostile clients (Go's http.Server timeouts, kube-rbac-proxy's limits):
 *   - a request's head must be in within read_header_timeout (10 s) and
 *     the whole request within read_timeout (30 s), counted from when
 *     reading it began (the accept, or the end of the previous answer on a
 *     kept-alive connection), however often bytes come: a slowloris that
 *     sends a byte every few seconds is closed.  Idle connections (no byte
 *     at all) are closed after 30 s.
 *   - 64 connections in all, 16 from one client address (the 17th is
 *     closed at once).
 *   - capacity for probes: when a new connection takes the last of the 64
 *     places, the connection that has waited longest for a request it has
 *     not finished sending is closed.  So a place is always free for a
 *     client that sends its request at once (the kubelet's probe does, in
 *     one packet), and a slow client only ever pushes out slow clients,
 *     never a request being answered.  An attacker with any number of
 *     addresses thus delays a probe by one accept, not by the deadlines;
 *     the deadlines bound how long it holds memory and descriptors.
 *     Connections that are answering (an authorization pending, an answer
 *     being written) are not closed for room: a pending authorization is
 *     bounded by metrics_auth.h (503 past its limit), a write by the idle
 *     timeout.
 * The 401 of a scrape with no token is decided without the API server.
 *
 * Uses libmicrohttpd (TLS through its GnuTLS), mhd_loop, metrics, health,
 * metrics_auth, textbuf.  Runs on the loop thread.
 *
 * Ownership: luna_httpd_start returns a server freed with luna_httpd_free
 * (which closes its connections and cancels their pending checks).  The
 * registry, the health state, the auth and the prepare userdata are
 * borrowed until then; the address and the certificate are copied.  Each
 * connection's tracking state (deadlines, room-making) is the server's,
 * freed when libmicrohttpd reports the connection closed.
 */
#ifndef LUNA_HTTPD_H
#define LUNA_HTTPD_H

#include <stddef.h>

#include "base/error.h"
#include "serve/health.h"
#include "serve/metrics.h"

struct luna_metrics_auth;

/* The admin endpoints' requests, as the server hands them to its admin
 * handler (runtime/admin.h acts on them). */
#define LUNA_ADMIN_PREFIX "/admin/"
#define LUNA_ADMIN_MAX_KEYS 1000

struct luna_admin_request {
    const char *method;            /* "GET", "POST", ... */
    const char *path;              /* "/admin/controllers/x/pause" */
    const char *const *args;       /* query: nargs (name, value) pairs; value may be NULL */
    size_t nargs;
    const char *user;              /* who asked: the authenticated user, or "" */
    const char *remote;            /* the client's address, or "" */
};

struct luna_textbuf;

struct luna_httpd;

/* Answers an /admin/ request (admin.h): writes the body, returns the
 * status. */
typedef int (*luna_httpd_admin_fn)(void *ud, const struct luna_admin_request *req,
                                   struct luna_textbuf *body);

/* Answers a POST (see post below): writes the body to out and its
 * content type to *ctype (static), returns the status. */
typedef int (*luna_httpd_post_fn)(void *ud, const char *path, const char *body, size_t len,
                                  struct luna_textbuf *out, const char **ctype);

enum luna_httpd_endpoint { LUNA_HTTPD_METRICS, LUNA_HTTPD_HEALTHZ, LUNA_HTTPD_READYZ };

/* The defaults of the limits above (--http-read-header-timeout,
 * --http-read-timeout; the connection limits are fixed). */
#define LUNA_HTTPD_READ_HEADER_TIMEOUT 10.0
#define LUNA_HTTPD_READ_TIMEOUT 30.0
#define LUNA_HTTPD_MAX_CONNECTIONS 64u
#define LUNA_HTTPD_MAX_CONNECTIONS_PER_ADDRESS 16u

struct luna_httpd_options {
    const char *address;            /* "HOST:PORT", required */
    struct luna_metrics *metrics;   /* NULL: no /metrics */
    struct luna_health *health;     /* NULL: no /healthz, /readyz */
    /* TLS: serve HTTPS with this PEM certificate (chain) and key (copied
     * by libmicrohttpd); both NULL: plain HTTP. */
    const char *tls_cert_pem, *tls_key_pem;
    /* /metrics only for scrapers the API server authenticates and
     * authorizes (metrics_auth.h); NULL: open.  Borrowed until free. */
    struct luna_metrics_auth *auth;
    /* /admin/ (admin.h), answered by this function, behind `auth` like
     * /metrics (the SubjectAccessReview is for the request's path and
     * lowercased method); with no auth it is open.  NULL: no /admin/. */
    luna_httpd_admin_fn admin;
    void *admin_ud;
    /* POST requests to any other path (the admission webhooks,
     * webhook_server.h), answered by this function with the whole body
     * read; the body is bounded by post_max_body (a larger one gets 413,
     * read and dropped or refused from its Content-Length), and the
     * bodies being read at once by 4 x post_max_body: past it the upload
     * read longest is dropped and its connection closed (libmicrohttpd
     * cannot answer mid-body), and a body that still has no room is read,
     * dropped and answered 503.  Other
     * methods on those paths get 405 (Allow: POST).  NULL: none. */
    luna_httpd_post_fn post;
    void *post_ud;
    size_t post_max_body;
    /* Called before each render, e.g. to bring collected values or checks
     * up to date; may be NULL. */
    void (*prepare)(void *ud, enum luna_httpd_endpoint endpoint);
    void *ud;
    /* The libev priority of the server's watchers: EV_MAXPRI has its
     * requests handled before other watchers of the same loop iteration
     * (the admission webhooks: the API server waits).  0: the default. */
    int priority;
    /* Seconds to read a request's head, and the whole request (0: the
     * defaults above). */
    double read_header_timeout, read_timeout;
};

/* Splits "HOST:PORT" into host (may be "", brackets removed from an IPv6
 * literal) and port.  LUNA_EINVAL on a missing port, a port outside
 * 0..65535, or a host too long for host_size. */
int luna_httpd_parse_address(const char *address, char *host, size_t host_size, int *port,
                             luna_error *err);

/* Binds and starts serving.  LUNA_EINVAL on a bad address or no endpoint
 * at all, LUNA_EIO if the address cannot be bound (in use, not local, a
 * name that does not resolve), LUNA_ENOMEM. */
int luna_httpd_start(const struct luna_httpd_options *o, struct luna_httpd **out,
                     luna_error *err);
void luna_httpd_free(struct luna_httpd *s); /* NULL: no-op */

/* The address actually bound, numeric with the real port:
 * "127.0.0.1:43127", "[::]:8080".  Borrowed until free. */
/* Serves a new TLS certificate from now on, on the same listening socket
 * (no connection refused meanwhile); open connections are closed.
 * LUNA_EINVAL if the server serves no TLS or TLS refuses the pair (the old
 * certificate stays). */
int luna_httpd_set_certificate(struct luna_httpd *s, const char *cert_pem, const char *key_pem,
                               luna_error *err);

const char *luna_httpd_address(const struct luna_httpd *s);

#endif
