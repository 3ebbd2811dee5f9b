/*
 * runtime/pod_event.h — a Warning Event on luna's own pod, for what an
 * operator must see in `kubectl describe pod` (controller files that did
 * not load, a refused reload).
 *
 * Uses: kube_client, jansson.  Runs on the loop thread.
 *
 * The pod is named by the downward API (deploy/deployment.yaml):
 * $POD_NAME and $POD_NAMESPACE, and $POD_UID when set (kubectl describe
 * matches Events on the uid too).  Without POD_NAME and POD_NAMESPACE there
 * is no pod to report on: no Event.  The Event is core/v1 (what kubectl
 * describe lists; deploy/rbac.yaml's luna-events allows it), named as
 * client-go names them (<pod>.<hex nanoseconds>), its message cut at 1024
 * bytes as client-go's recorder does.  A failed post is logged ("pod Event
 * not recorded"), never retried: the log line and the metrics say the same.
 *
 * Ownership: the request belongs to kc (its body is copied; a request still
 * in flight is canceled silently by luna_kube_client_free).  Nothing to
 * free.
 */
#ifndef LUNA_POD_EVENT_H
#define LUNA_POD_EVENT_H

#include "base/error.h"
#include "client/kube_client.h"

/* True when $POD_NAME and $POD_NAMESPACE are both set (non-empty). */
bool luna_pod_event_known(void);

/* Posts a Warning Event with reason (CamelCase) and message on the pod.
 * 0 when the request is under way; LUNA_ENOTFOUND when the pod is not
 * known; another code (err set) when the request could not start. */
int luna_pod_event_post(struct luna_kube_client *kc, const char *reason, const char *message,
                        luna_error *err);

#endif
