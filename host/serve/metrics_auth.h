/*
 * metrics_auth.h — who may scrape /metrics, decided by the API server, as
 * controller-runtime's secure metrics serving decides it
 * (filters.WithAuthenticationAndAuthorization):
 *
 *   1. authentication: the request's "Authorization: Bearer TOKEN" goes to
 *      a TokenReview (authentication.k8s.io/v1, no audiences); no bearer
 *      token, or a token the server does not authenticate, is 401;
 *   2. authorization: the reviewed user (username, uid, groups, extra)
 *      goes to a SubjectAccessReview (authorization.k8s.io/v1) for the
 *      non-resource URL: {path: the request path, verb: the lowercased
 *      method}; not allowed is 403.  RBAC grants it with a ClusterRole rule
 *      `nonResourceURLs: ["/metrics"], verbs: ["get"]`;
 *   3. a review the API server cannot answer (no answer, 5xx, 429, other
 *      unexpected status) is retried with backoff (0.5 s × 1.5, jitter
 *      0.2, 5 attempts, each bounded by `timeout`), then is 500.
 *
 * Answers are cached as the delegating authenticator and authorizer cache
 * them: a token's review (authenticated or not) for token_ttl (1 min), an
 * allowed decision for allow_ttl (5 min), a denied one for deny_ttl (30 s).
 * Tokens are kept only as their SHA-256.  Each cache holds at most
 * max_cached entries (expired ones go first, then the oldest); at most
 * max_in_flight checks wait for the API server at once (32, half of the
 * metrics server's 64 connections), a check beyond that is answered BUSY
 * (503) at once, so a flood of made-up tokens costs the API server a
 * bounded number of reviews and cannot hold every connection: scrapers
 * whose answers are cached are still served.
 *
 * The API server's side: luna's service account needs `create` on
 * tokenreviews and subjectaccessreviews (deploy/rbac.yaml grants both).
 *
 * Uses kube_client, json, backoff, clock, log, OpenSSL (SHA-256).  Runs on
 * the loop thread.
 *
 * Invariants:
 *   - a pending check's callback runs exactly once, unless it is canceled
 *     or the auth is freed first (then never);
 *   - a pending check has at most one request in flight, or one retry
 *     timer armed, never both;
 *   - in_flight counts the pending checks, and is at most max_in_flight.
 *
 * Ownership: luna_metrics_auth_new borrows the kube client, the clock and
 * the loop until luna_metrics_auth_free.  A check handle is owned by the
 * auth: valid until its callback returns or it is canceled.  Strings given
 * to a check are copied; the user name passed to the callback is borrowed
 * for the call.
 */
#ifndef LUNA_METRICS_AUTH_H
#define LUNA_METRICS_AUTH_H

#include <ev.h>
#include <stddef.h>

#include "base/clock.h"
#include "base/error.h"
#include "client/kube_client.h"

struct luna_metrics_auth;
struct luna_metrics_auth_check;

enum luna_metrics_auth_decision {
    LUNA_METRICS_AUTH_ALLOW,
    LUNA_METRICS_AUTH_UNAUTHENTICATED, /* 401: no bearer token, or not authenticated */
    LUNA_METRICS_AUTH_FORBIDDEN,       /* 403: authenticated, not authorized */
    LUNA_METRICS_AUTH_ERROR,           /* 500: the API server could not decide */
    LUNA_METRICS_AUTH_BUSY,            /* 503: too many checks waiting */
    LUNA_METRICS_AUTH_PENDING,         /* decided later, through the callback */
};

struct luna_metrics_auth_options {
    struct luna_kube_client *kc;    /* required */
    struct ev_loop *loop;           /* required: retry timers */
    const struct luna_clock *clock; /* cache expiry; NULL: monotonic */
    double token_ttl;               /* 0: 60 */
    double allow_ttl;               /* 0: 300 */
    double deny_ttl;                /* 0: 30 */
    double timeout;                 /* per review request; 0: 10 */
    double retry_base;              /* first retry delay; 0: 0.5 (specs: small) */
    size_t max_cached;              /* per cache; 0: 1024 */
    size_t max_in_flight;           /* 0: 32 (half the server's connections) */
};

/* HTTP status of a decision (200, 401, 403, 500, 503). */
int luna_metrics_auth_status(enum luna_metrics_auth_decision d);
const char *luna_metrics_auth_decision_name(enum luna_metrics_auth_decision d);

int luna_metrics_auth_new(const struct luna_metrics_auth_options *o,
                          struct luna_metrics_auth **out, luna_error *err);
/* Cancels every pending check (no callback runs).  NULL: no-op. */
void luna_metrics_auth_free(struct luna_metrics_auth *a);

/* Decides whether the request with this Authorization header value (NULL
 * if absent) may `verb` `path`.  Returns the decision when it is known at
 * once (no bearer token, cached answers, BUSY); otherwise returns PENDING
 * with *check set, and done(ud, decision, user) runs later.  `user` is the
 * authenticated user's name ("" when there is none). */
typedef void (*luna_metrics_auth_fn)(void *ud, enum luna_metrics_auth_decision d,
                                     const char *user);
enum luna_metrics_auth_decision
luna_metrics_auth_check(struct luna_metrics_auth *a, const char *authorization,
                        const char *verb, const char *path, luna_metrics_auth_fn done,
                        void *ud, struct luna_metrics_auth_check **check);

/* The user name the token cache holds for this Authorization value
 * (written to buf, "" if none): who asked, when check decided at once. */
void luna_metrics_auth_cached_user(struct luna_metrics_auth *a, const char *authorization,
                                   char *buf, size_t size);

/* Forgets a pending check: its callback will not run. */
void luna_metrics_auth_cancel(struct luna_metrics_auth_check *c);

struct luna_metrics_auth_stats {
    unsigned long token_reviews;     /* TokenReview requests sent (retries included) */
    unsigned long access_reviews;    /* SubjectAccessReview requests sent */
    unsigned long cache_hits;        /* answers taken from either cache */
    size_t in_flight;
};
struct luna_metrics_auth_stats luna_metrics_auth_stats(const struct luna_metrics_auth *a);

#endif
