/*
 * devserver_write.h — the write pipeline every change goes through: PUT,
 * PATCH, apply, create, seeds, and the server's own writes (garbage
 * collector, namespace finalizer, CRD status).
 *
 * A write converts the document to its type's storage version, stamps the
 * next resourceVersion, normalises key order, stores it (which tells the
 * watches) and runs the hooks a real control plane runs after it: a CRD
 * serves or stops serving its types and gets its status, a deleted object's
 * dependents and waiting owners are looked at (devserver_gc), and an object
 * whose owners are all gone is deleted shortly after.
 *
 * A client's update is checked first as kube-apiserver's generic
 * registry checks it (luna_ds_write_preconditions: uid, resourceVersion,
 * the kind's AllowUnconditionalUpdate and AllowCreateOnUpdate).
 * Updates keep what the client may not change (uid, creationTimestamp,
 * deletionTimestamp, generation, status unless writing /status), bump
 * metadata.generation when the spec changed, track field managers
 * (devserver_apply), refuse new
 * finalizers while deleting, store nothing for a no-op, and remove the
 * object once a deleting object's last finalizer is gone.
 *
 * With ds->dry_run (a request's dryRun=All) the whole pipeline runs, with
 * its checks and defaults, but nothing is stored: the state that would be
 * stored is handed out (resourceVersion: the store's current one), no watch
 * sees it and no hook runs.
 *
 * Documents passed in are consumed; documents handed out are new ones the
 * caller owns.  Functions returning int return 0 or the negative HTTP status
 * with st set.  Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_WRITE_H
#define LUNA_DEVSERVER_WRITE_H

#include <jansson.h>
#include <stdbool.h>

#include "devserver/devserver_status.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds luna_ds;

/* What the garbage collector does after writes, called through ds's
 * write_hooks (devserver_gc.c provides them, the server sets them) so the
 * write path does not depend on the collector.  Not called for dry runs.
 *   removed: the object with uid (in namespace ns, "" if cluster-scoped)
 *            is gone from storage;
 *   written: doc was stored in storage type t as `type`. */
struct luna_ds_write_hooks {
    void (*removed)(luna_ds *ds, const char *uid, const char *ns);
    void (*written)(luna_ds *ds, luna_ds_type *t, enum luna_ds_event_type type,
                    const json_t *doc);
};

/* Stores doc (type t's version, consumed) as the new state of its key,
 * runs the write hooks, and returns a new reference to the key's current
 * object (after the hooks' own writes), or for DELETED to the deleted
 * state. */
/* The object's etcd key as kube-apiserver's storage layer names it in its
 * errors ("/registry/GROUP/RESOURCE/NS/NAME", kube's resource prefixes). */
void luna_ds_storage_key(char *out, size_t n, const luna_ds_type *t, const char *ns,
                         const char *name);
luna_ds_obj *luna_ds_write_store(luna_ds *ds, luna_ds_type *t, enum luna_ds_event_type type, json_t *doc);

/* Removes cur for good (a DELETED event at a new RV), then runs the
 * garbage collector for its dependents and its namespace's finalizer.
 * Returns a new reference to the deleted state. */
luna_ds_obj *luna_ds_write_remove(luna_ds *ds, luna_ds_type *t, luna_ds_obj *cur);

/* kube-apiserver's preconditions of a client's update (PUT, PATCH, apply;
 * sub NULL or "status") of cur by newdoc (borrowed), in its order:
 *   put: a metadata.uid in the body is a precondition (409 Conflict
 *        naming the storage key, as kube's storage layer words it); for a
 *        patch a changed uid is 422 "field is immutable";
 *   a resourceVersion that is not a number: 500, as kube's versioner;
 *   none: the update overwrites when t->unconditional_update, else 422
 *        "must be specified for an update";
 *   another one than cur's: 409 Conflict "the object has been modified".
 * Returns 0, or a negative code with st set. */
int luna_ds_write_preconditions(const luna_ds_type *t, const luna_ds_obj *cur, const json_t *newdoc,
                                bool put, luna_ds_status *st);

/* A POST's metadata.resourceVersion (doc borrowed): 500 as kube's storage
 * answers when it reads as a non-zero number (not on a dry run); any
 * other is dropped by luna_ds_write_create.  0 or a negative code. */
int luna_ds_write_create_rv(const luna_ds *ds, const json_t *doc, luna_ds_status *st);

/* The preconditions of a PUT that finds no object at its name: 404
 * unless t->create_on_update; a uid in the body is then a 409 (no stored
 * object has it).  0 when the PUT creates, a PUT of /status too (kube's
 * status strategies inherit AllowCreateOnUpdate: a PUT of a missing
 * Service's /status creates the Service). */
int luna_ds_write_create_on_update(const luna_ds_type *t, const char *ns, const char *name,
                                   const json_t *newdoc, luna_ds_status *st);

/* Replaces cur with newdoc (t's version, consumed), whatever its
 * resourceVersion and uid say: a client's write checks them first with
 * luna_ds_write_preconditions.  sub is NULL or
 * "status".  manager NULL: managedFields already computed (apply) or not
 * tracked (server writes).  *out gets the stored state (or cur for a
 * no-op) as a new document in t's version, or NULL if the write removed
 * the object. */
int luna_ds_write_update(luna_ds *ds, luna_ds_type *t, luna_ds_obj *cur, json_t *newdoc, const char *sub,
                         const char *manager, json_t **out, luna_ds_status *st);

/* Creates doc (t's version, consumed; kind and namespace already checked;
 * its resourceVersion is dropped):
 * generateName, name and namespace checks, 409 AlreadyExists, uid,
 * creationTimestamp, generation, the built-in types' defaults.  manager
 * NULL: managedFields already set (apply).  *out: the stored document in
 * t's version. */
int luna_ds_write_create(luna_ds *ds, luna_ds_type *t, json_t *doc, const char *manager, json_t **out,
                         luna_ds_status *st);

#endif
