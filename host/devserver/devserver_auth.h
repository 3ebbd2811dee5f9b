/*
 * devserver_auth.h — identities and RBAC in the dev server, for clients
 * that delegate authentication and authorization to the API server (luna's
 * secure /metrics, webhooks, kube-rbac-proxy), answering as kube-apiserver
 * answers:
 *
 *   POST /api/v1/namespaces/NS/serviceaccounts/NAME/token   TokenRequest
 *       a token for an existing ServiceAccount: 256 random bits (opaque,
 *       not a JWT), valid spec.expirationSeconds (default 3600, at least
 *       600) for spec.audiences (default the API server's,
 *       "https://kubernetes.default.svc.cluster.local"), and only while the
 *       ServiceAccount with that uid exists.  Its user is
 *       system:serviceaccount:NS:NAME (uid: the ServiceAccount's), groups
 *       system:serviceaccounts, system:serviceaccounts:NS,
 *       system:authenticated.
 *   POST /apis/authentication.k8s.io/v1/tokenreviews         TokenReview
 *       status.authenticated and status.user for a live token (an issued
 *       one, or the server's --token: user "admin" in system:masters),
 *       with status.audiences; otherwise authenticated false with
 *       status.error.  A review naming audiences the token was not issued
 *       for does not authenticate.
 *   POST /apis/authorization.k8s.io/v1/subjectaccessreviews  SubjectAccessReview
 *       RBAC over the stored ClusterRoles, ClusterRoleBindings, Roles and
 *       RoleBindings: resourceAttributes (verb, group, resource,
 *       subresource, name, namespace) or nonResourceAttributes (path,
 *       verb: exact, "*", or a "prefix*" URL); a ClusterRole with an
 *       aggregationRule has the rules of the ClusterRoles its selectors
 *       match (what the cluster's aggregation controller writes); the
 *       group system:masters may do everything.  status.allowed and
 *       status.reason (the binding that allowed it).
 *   POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews  SelfSubjectAccessReview
 *       the same, for the requester: an issued token's ServiceAccount, else
 *       the admin (system:masters); metadata must be empty.
 *
 * These paths are served without being listed in discovery.  The server's
 * own requests stay unauthorized beyond the bearer token: with --token,
 * a request must carry that token or an issued one (luna_ds_auth_request).
 *
 * Issued tokens are kept as their SHA-256, at most MAX_TOKENS (expired
 * ones are dropped first, then the oldest).  Runs on the loop thread.
 * Ownership: the auth state lives in luna_ds (devserver_state.h) and is
 * freed with it (luna_ds_auth_free).
 */
#ifndef LUNA_DEVSERVER_AUTH_H
#define LUNA_DEVSERVER_AUTH_H

#include <jansson.h>
#include <stdbool.h>

#include "devserver/devserver_request.h"

typedef struct luna_ds luna_ds;
struct luna_ds_token;

typedef struct luna_ds_auth {
    struct luna_ds_token *tokens;  /* issued tokens (uthash by SHA-256), owned */
    char *admin_token;             /* --token, owned; NULL: none */
} luna_ds_auth;

void luna_ds_auth_free(luna_ds_auth *a);
/* The server's --token (copied): authenticates as "admin" in
 * system:masters.  0 or LUNA_ENOMEM. */
int luna_ds_auth_set_admin_token(luna_ds *ds, const char *token);
/* Whether an Authorization header value carries the --token or a live
 * issued token. */
bool luna_ds_auth_request(luna_ds *ds, const char *authorization);

/* The requester of a request with this Authorization header (may be
 * NULL), as an authentication.k8s.io/v1 UserInfo: an issued token's
 * ServiceAccount, else the admin in system:masters (luna_ds_auth_request
 * let it in, or the server takes anyone).  The transport calls it on the
 * headers, with the authentication, and the request carries the answer
 * (luna_ds_request.user).  A new object (caller owns), NULL when out of
 * memory. */
json_t *luna_ds_auth_user_info(luna_ds *ds, const char *authorization);

/* The endpoints (the router checks method and path). */
void luna_ds_auth_token_request(luna_ds *ds, const luna_ds_request *req, const char *ns,
                                const char *name, luna_ds_response *resp);
void luna_ds_auth_token_review(luna_ds *ds, const luna_ds_request *req, luna_ds_response *resp);
void luna_ds_auth_access_review(luna_ds *ds, const luna_ds_request *req, luna_ds_response *resp);
void luna_ds_auth_self_access_review(luna_ds *ds, const luna_ds_request *req,
                                     luna_ds_response *resp);

#endif
