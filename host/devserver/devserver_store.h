/*
 * devserver_store.h — the dev server's objects: one collection per
 * group/resource, a global monotonic resourceVersion, a bounded event
 * history per collection, and listeners (watches) told of every write.
 *
 * An object (luna_ds_obj) is immutable once stored: its compact JSON bytes
 * are kept so a LIST is served by concatenating bytes, with the few fields
 * selectors and garbage collection need (key, uid, labels, owner uids)
 * extracted once.  Objects are reference counted: the collection holds one
 * reference per current object, the history ring one per event side.
 *
 * One luna_ds_store holds the resourceVersion counter and the history size
 * of one dev server; its collections (luna_ds_coll) are owned by the type
 * registry (devserver_types), which frees them before the store.  Nothing
 * here is process-wide: two servers in one process share nothing.
 *
 * Out of memory: functions that allocate return NULL or LUNA_ENOMEM and
 * change nothing (a write that fails stores nothing and tells no listener).
 *
 * Invariants:
 *  - every write (ADDED, MODIFIED, DELETED) takes the store's next RV, and an
 *    object's metadata.resourceVersion is the RV of the write that stored it;
 *  - an event with rv > floor(coll) is in the collection's history if and
 *    only if it happened, so the state at any RV >= floor can be rebuilt
 *    (luna_ds_store_snapshot) and a watch from any RV >= floor replayed;
 *  - a key is in the collection if and only if its last event is not DELETED.
 * Runs on the loop thread.
 */
#ifndef LUNA_DEVSERVER_STORE_H
#define LUNA_DEVSERVER_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct luna_ds_obj {
    int refs;
    char *bytes;          /* compact JSON, NUL-terminated */
    size_t len;
    char *key;            /* "namespace/name", or "name" when cluster-scoped */
    char *ns;             /* "" when cluster-scoped */
    char *name;
    char *uid;
    json_t *labels;       /* metadata.labels or NULL (owned reference) */
    char **owner_uids;    /* metadata.ownerReferences[].uid */
    int nowners;
    uint64_t rv;
    bool deleting;        /* metadata.deletionTimestamp is set */
    int nfinalizers;
} luna_ds_obj;

enum luna_ds_event_type { LUNA_DS_ADDED, LUNA_DS_MODIFIED, LUNA_DS_DELETED };

typedef struct luna_ds_event {
    enum luna_ds_event_type type;
    uint64_t rv;
    luna_ds_obj *obj;     /* the new state; for DELETED the last state, at rv */
    luna_ds_obj *prev;    /* the state before (NULL for ADDED) */
} luna_ds_event;

typedef struct luna_ds_store luna_ds_store;
typedef struct luna_ds_coll luna_ds_coll;

/* A listener embedded in its owner (a watch); the store calls fn for each
 * event of the collection it is subscribed to.  fn must not write to the
 * store. */
typedef struct luna_ds_listener {
    void (*fn)(struct luna_ds_listener *l, const luna_ds_event *ev);
    struct luna_ds_listener *prev, *next;
    luna_ds_coll *coll;   /* set while subscribed */
} luna_ds_listener;

#define LUNA_DS_HISTORY_DEFAULT 10000

/* A new store keeping `history` events per collection (0: the default).
 * NULL when out of memory.  Free with luna_ds_store_free() after every
 * collection is freed. */
luna_ds_store *luna_ds_store_new(size_t history);
void luna_ds_store_free(luna_ds_store *s);

/* A new, empty collection of store s (NULL when out of memory). */
luna_ds_coll *luna_ds_store_coll_new(luna_ds_store *s);
/* Frees a collection with its objects and history; listeners must be gone. */
void luna_ds_store_coll_free(luna_ds_coll *c);

/* The RV of the last write (0 before any). */
uint64_t luna_ds_store_rv(const luna_ds_store *s);

/* Builds an object from doc (borrowed): extracts the metadata fields and
 * serializes.  doc's metadata.resourceVersion must already be set to rv.
 * Returns a new reference (refs = 1), or NULL when out of memory. */
luna_ds_obj *luna_ds_obj_new(const json_t *doc, uint64_t rv);
luna_ds_obj *luna_ds_obj_ref(luna_ds_obj *o);
void luna_ds_obj_unref(luna_ds_obj *o);
/* A fresh mutable document parsed from the object's bytes (caller owns);
 * NULL only when out of memory. */
json_t *luna_ds_obj_doc(const luna_ds_obj *o);

/* Takes the next RV for a write about to be made with luna_ds_store_put. */
uint64_t luna_ds_store_next_rv(luna_ds_store *s);

/* The current object for key, borrowed until the next write; NULL if none. */
luna_ds_obj *luna_ds_store_get(luna_ds_coll *c, const char *key);

/* Records a write: for ADDED/MODIFIED obj becomes the current object of its
 * key; for DELETED the key is removed and obj is its last state.  Takes
 * ownership of obj, whose rv must be the latest luna_ds_store_next_rv().
 * Appends the event to history and tells every listener.  Returns 0, or
 * LUNA_ENOMEM with nothing changed (obj is released). */
int luna_ds_store_put(luna_ds_coll *c, enum luna_ds_event_type type, luna_ds_obj *obj);

/* Number of current objects. */
size_t luna_ds_store_count(const luna_ds_coll *c);

/* The largest RV from which the history is complete (see invariants). */
uint64_t luna_ds_store_floor(const luna_ds_coll *c);

/* The objects at `rv` (0 = now), sorted by key: *items is a malloc'd array
 * (free() it) of pointers borrowed until the next write.  Returns 0,
 * LUNA_ENOTFOUND when rv < floor (too old), or LUNA_ENOMEM. */
int luna_ds_store_snapshot(luna_ds_coll *c, uint64_t rv, luna_ds_obj ***items, size_t *n);

/* Calls fn for each event with rv > since, oldest first.  Returns 0, or
 * LUNA_ENOTFOUND when since < floor. */
int luna_ds_store_replay(luna_ds_coll *c, uint64_t since,
                         void (*fn)(void *ctx, const luna_ds_event *ev), void *ctx);

void luna_ds_store_subscribe(luna_ds_coll *c, luna_ds_listener *l);
/* Safe to call when not subscribed. */
void luna_ds_store_unsubscribe(luna_ds_listener *l);

/* Current objects of every key, unsorted: calls fn until it returns false. */
void luna_ds_store_each(luna_ds_coll *c, bool (*fn)(void *ctx, luna_ds_obj *o), void *ctx);

#endif
