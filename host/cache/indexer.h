/*
 * indexer.h — the informer's cache: objects by key, plus named indexes.
 *
 * Uses: object (refcounted cached objects), uthash.  Runs on the loop thread.
 *
 * The store maps key ("ns/name" or "name") to the newest object.  Every
 * index maps a value to the set of objects whose index function returned
 * that value; the built-in index "namespace" maps a namespace to the objects
 * in it (cluster-scoped objects are indexed under "").
 *
 * Invariants:
 *   - an object is in the store if and only if its key is present, and
 *     each key holds exactly one object (the newest put);
 *   - for every index I and value v, an object is in bucket I[v] if and
 *     only if it is in the store and I's function returned v for it;
 *   - an index function that fails leaves the object out of that index
 *     (logged), never out of the store.
 *
 * Ownership: the indexer holds one reference to every stored object.  put
 * takes a new reference itself (the caller keeps its own); the replaced or
 * deleted object's reference moves to the caller through *old (NULL if
 * none), to be dropped with luna_object_unref.  get and the visitors lend
 * objects until the next put/delete/free.  Index functions' userdata is
 * owned by the indexer from add_index on and freed with ud_free.
 */
#ifndef LUNA_INDEXER_H
#define LUNA_INDEXER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "cache/object.h"

struct luna_indexer;

/* Values an index function returns for one object (copied in). */
struct luna_index_values {
    size_t n, cap;
    char **v;
};
/* Bounds on what one object's index function may return: more values, or
 * a longer value, is LUNA_ETOOBIG (the object is left out of the index).
 * Repeated values are dropped once the function returns (sorted: n log n). */
#define LUNA_INDEX_MAX_VALUES 1024
#define LUNA_INDEX_MAX_VALUE_LEN 4096
int luna_index_values_add(struct luna_index_values *vals, const char *value);

/* Computes obj's values into out; returns 0, or a negative code with err
 * set to skip the object in this index. */
typedef int (*luna_index_fn)(const struct luna_object *obj, struct luna_index_values *out,
                             void *ud, luna_error *err);

/* Visitor: return nonzero to stop the iteration (that value is returned). */
typedef int (*luna_object_visit)(struct luna_object *obj, void *ud);

#define LUNA_INDEX_NAMESPACE "namespace"

struct luna_indexer *luna_indexer_new(void);
void luna_indexer_free(struct luna_indexer *idx);

/* How a remembered (not pure) index's values are charged to whoever asked
 * for the index (a controller's Lua memory: controller/index_fn.h): called
 * with delta > 0, the bytes an object's values will hold (their copies and
 * their buckets), before they are kept: 0 grants them, < 0 refuses (the
 * object is left out of that index, with a warning: "index values
 * refused"); with delta < 0 when they are dropped (the object changed or
 * left, or the index is removed).  Called with ud. */
typedef int (*luna_index_charge_fn)(void *ud, long long delta);

/* Adds an index and computes it for the objects already stored.  `pure`
 * promises the function's values depend only on the object, so they are
 * recomputed from the old object on update instead of remembered.  charge
 * (NULL: none; only for indexes that are not pure) is asked for the memory
 * each object's values hold.  Fails if the name is taken. */
int luna_indexer_add_index(struct luna_indexer *idx, const char *name, luna_index_fn fn,
                           void *ud, void (*ud_free)(void *), bool pure,
                           luna_index_charge_fn charge, luna_error *err);
bool luna_indexer_has_index(const struct luna_indexer *idx, const char *name);
/* Drops an index (not the built-in namespace index); LUNA_ENOTFOUND if absent. */
int luna_indexer_remove_index(struct luna_indexer *idx, const char *name);

int luna_indexer_put(struct luna_indexer *idx, struct luna_object *obj,
                     struct luna_object **old);
/* Returns LUNA_ENOTFOUND (and *old = NULL) if the key is absent. */
int luna_indexer_delete(struct luna_indexer *idx, const char *key, struct luna_object **old);

struct luna_object *luna_indexer_get(const struct luna_indexer *idx, const char *key);
size_t luna_indexer_len(const struct luna_indexer *idx);

/* Visits every object, in no particular order. */
int luna_indexer_each(const struct luna_indexer *idx, luna_object_visit visit, void *ud);
/* Visits the objects in index[value]; LUNA_ENOTFOUND for an unknown index. */
int luna_indexer_each_indexed(const struct luna_indexer *idx, const char *index,
                              const char *value, luna_object_visit visit, void *ud);
/* Visits each distinct value of an index (borrowed strings). */
int luna_indexer_each_value(const struct luna_indexer *idx, const char *index,
                            int (*visit)(const char *value, size_t count, void *ud), void *ud);

#endif
