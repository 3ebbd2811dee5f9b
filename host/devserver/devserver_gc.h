/*
 * devserver_gc.h — deletion as kube-apiserver and kube-controller-manager
 * do it: DELETE with the Background, Foreground or Orphan propagation
 * policy (the foregroundDeletion and orphan finalizers), deletionTimestamp
 * while finalizers remain, the garbage collector (dependents whose every
 * owner is gone are deleted; others lose the ownerReference; an object
 * written with only missing owners is deleted shortly after the write), and
 * the namespace finalizer (a terminating namespace's contents are deleted,
 * then the namespace).
 *
 * Uses the write pipeline (devserver_write), which calls back in here after
 * each write.  Runs on the loop thread; the delayed orphan check runs on a
 * loop timer, stopped by luna_ds_gc_shutdown().
 *
 * Out of memory: a pass that cannot list every candidate handles those it
 * listed; an orphan check that cannot be queued is skipped (the object
 * stays until its next write or its owner's deletion looks at it again).
 */
#ifndef LUNA_DEVSERVER_GC_H
#define LUNA_DEVSERVER_GC_H

#include <ev.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "devserver/devserver_status.h"
#include "devserver/devserver_store.h"
#include "devserver/devserver_types.h"

typedef struct luna_ds luna_ds;

enum luna_ds_propagation { LUNA_DS_PROP_BACKGROUND, LUNA_DS_PROP_FOREGROUND, LUNA_DS_PROP_ORPHAN };

/* The garbage collector's state in a server (zero-initialise). */
typedef struct luna_ds_gc {
    struct luna_ds_orphan_check *checks; /* written objects to look at again */
    size_t n, cap;
    ev_timer timer;               /* runs the checks; active iff n > 0 */
    bool timer_ready;
    bool finalizing_ns;           /* a namespace finalizer pass is running */
} luna_ds_gc;

/* Deletes cur.  *out: the response document (caller owns): the object, or
 * a Success Status when it went at once and its type answers so; *removed:
 * whether the object is gone. */
int luna_ds_gc_delete(luna_ds *ds, luna_ds_type *t, luna_ds_obj *cur,
                      enum luna_ds_propagation prop, json_t **out, bool *removed,
                      luna_ds_status *st);

/* After the object with uid is gone: dependents whose every owner is gone
 * are deleted (background); others lose the reference. */
void luna_ds_gc_after_removal(luna_ds *ds, const char *uid);

/* Owners (in doc's ownerReferences) waiting in foreground deletion for the
 * removed object doc get another look: they go once their last dependent
 * is gone. */
void luna_ds_gc_recheck_owners(luna_ds *ds, const json_t *doc);

/* A terminating namespace: deletes what is in it; once empty, removes it. */
void luna_ds_gc_namespace_finalize(luna_ds *ds, const char *ns);

/* Looks at doc (just written, type t) shortly after: if every owner it
 * names is gone, it is deleted. */
void luna_ds_gc_check_orphan_later(luna_ds *ds, luna_ds_type *t, const json_t *doc);

/* The collector's hooks on the write path (devserver_write.h): after a
 * removal, luna_ds_gc_after_removal and the namespace's finalizer pass;
 * after a write, luna_ds_gc_check_orphan_later, or, for a deletion,
 * luna_ds_gc_recheck_owners.  Static. */
const struct luna_ds_write_hooks *luna_ds_gc_write_hooks(void);

/* Stops the orphan timer and drops pending checks (server shutdown). */
void luna_ds_gc_shutdown(luna_ds *ds);

#endif
