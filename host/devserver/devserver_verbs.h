/*
 * devserver_verbs.h — the verbs on one object and DELETE on a collection:
 * create (POST), get, update (PUT, also /status), patch (merge, JSON,
 * strategic and apply, also /status) and delete with propagation policy
 * and preconditions.  Each reads and checks the request (devserver_validate),
 * goes through the write pipeline (devserver_write) or deletion
 * (devserver_gc), and answers the stored document or a Status.
 *
 * ns is "" for a cluster-scoped type.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_VERBS_H
#define LUNA_DEVSERVER_VERBS_H

#include "devserver/devserver_request.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds luna_ds;

void luna_ds_verbs_create(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          luna_ds_response *resp);
/* GET of one object, in the form the request's Accept negotiates
 * (devserver_negotiate.h). */
void luna_ds_verbs_get(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                       const char *name, luna_ds_response *resp);
void luna_ds_verbs_update(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          const char *name, const char *sub, luna_ds_response *resp);
void luna_ds_verbs_patch(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                         const char *name, const char *sub, luna_ds_response *resp);
void luna_ds_verbs_delete(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t, const char *ns,
                          const char *name, luna_ds_response *resp);
/* DELETE on a collection: every selected object, background propagation;
 * answers the list of what was deleted. */
void luna_ds_verbs_delete_collection(luna_ds *ds, const luna_ds_request *req, luna_ds_type *t,
                                     const char *ns, luna_ds_response *resp);

#endif
