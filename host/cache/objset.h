/*
 * objset.h — a set of cached objects keyed by their cache key ("ns/name"):
 * the indexer's store and each of its index buckets.
 *
 * Uses: object.  Runs on the loop thread.
 *
 * Open addressing with linear probing over one array of object pointers
 * (8 bytes a slot, at most 3/4 full, deletions shift back so no tombstones
 * stay behind).  The key is read from the object itself, so an entry costs
 * one slot and nothing else: a uthash entry with its 56-byte handle and its
 * own allocation cost ten times that, more than everything but the JSON of
 * a typical cached object.
 *
 * Invariants:
 *   - an object is in the set if and only if a slot points to it, and each
 *     key is in at most one slot;
 *   - count <= 3/4 cap, cap is 0 or a power of two.
 *
 * Ownership: the set holds pointers only, no references; its owner keeps
 * every member alive while it is in the set.  Iterating by slot index is
 * valid until the next put or remove.
 */
#ifndef LUNA_OBJSET_H
#define LUNA_OBJSET_H

#include <stddef.h>
#include <stdint.h>

#include "cache/object.h"

struct luna_objset {
    struct luna_object **slots;  /* cap slots, NULL when empty */
    size_t cap, count;
};

#define LUNA_OBJSET_INIT { NULL, 0, 0 }

/* Frees the slots (not the objects); the set is empty and usable again. */
void luna_objset_clear(struct luna_objset *s);

/* The member with this key, or NULL. */
struct luna_object *luna_objset_get(const struct luna_objset *s, const char *key, size_t len);

/* Adds obj, or replaces the member with the same key (returned through
 * *replaced, else NULL).  Returns 0 or LUNA_ENOMEM (the set unchanged). */
int luna_objset_put(struct luna_objset *s, struct luna_object *obj,
                    struct luna_object **replaced);

/* Removes and returns the member with this key (NULL if absent). */
struct luna_object *luna_objset_remove(struct luna_objset *s, const char *key, size_t len);

/* The members as a new array (free() it) of n pointers, each with a new
 * reference the caller drops: a visit that survives any change to the set.
 * Returns 0 or LUNA_ENOMEM. */
int luna_objset_snapshot(const struct luna_objset *s, struct luna_object ***out, size_t *n);

#endif
