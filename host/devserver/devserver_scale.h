/*
 * devserver_scale.h — the `scale` subresource (autoscaling/v1 Scale) of
 * the kinds kube serves it for (LUNA_DS_SUB_SCALE in the generated table:
 * Deployments, ReplicaSets, StatefulSets, ReplicationControllers):
 *
 *   GET    spec.replicas (1 when unset, kube's default), status.replicas,
 *          status.selector (spec.selector as a label-selector string:
 *          matchLabels and matchExpressions, or a map, keys sorted)
 *   PUT    a Scale: its spec.replicas becomes the object's (an update of
 *          the object, so generation and resourceVersion move and watchers
 *          see MODIFIED); metadata.resourceVersion, when set, must match
 *   PATCH  merge, JSON or strategic merge patch of the Scale, then as PUT;
 *          apply patches are refused (415): see docs/dev-server.md
 *
 * Runs on the loop thread; replies through resp like the other verbs.
 */
#ifndef LUNA_DEVSERVER_SCALE_H
#define LUNA_DEVSERVER_SCALE_H

#include "devserver/devserver_request.h"

typedef struct luna_ds luna_ds;
struct luna_ds_type;

void luna_ds_scale_serve(luna_ds *ds, const luna_ds_request *req, struct luna_ds_type *t,
                         const char *ns, const char *name, luna_ds_response *resp);

#endif
