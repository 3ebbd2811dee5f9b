/*
 * controller/index_fn.h — a Lua function as an index function of an
 * indexer: the `indexes` a controller declares, and the stores specs make.
 *
 * Uses: indexer, the watchdog (the function runs in a guard), lua_json.
 * Runs on the loop thread.
 *
 * Invariants: an index's Lua function is anchored in the registry of *Lp
 * if and only if the index exists; what it returns is checked against the
 * indexer's bounds (LUNA_INDEX_MAX_VALUES values of at most
 * LUNA_INDEX_MAX_VALUE_LEN bytes) before the indexer keeps a byte of it.
 */
#ifndef LUNA_INDEX_FN_H
#define LUNA_INDEX_FN_H

#include <lua.h>

#include "base/error.h"
#include "cache/indexer.h"
#include "cache/object.h"

/* How an index function receives the object: pushes it on L (one value)
 * and returns 0, or returns a negative code and sets err. */
typedef int (*luna_index_fn_push)(lua_State *L, const struct luna_object *obj,
                                  luna_error *err);

/* Pushes obj decoded into a fresh table (a luna_index_fn_push). */
int luna_index_fn_push_table(lua_State *L, const struct luna_object *obj, luna_error *err);

/* Adds index `name` to idx, computed by the Lua function at fn_idx of L,
 * which receives the object as push makes it and returns a string, a list
 * of strings or nil: at most LUNA_INDEX_MAX_VALUES values of at most
 * LUNA_INDEX_MAX_VALUE_LEN bytes, else the object is left out of the index
 * ("index function failed").  The function is anchored in the registry
 * until the index is removed, and runs on *Lp in a protected call in a
 * watchdog guard with `limits` (borrowed until the index is removed; NULL:
 * the state's defaults).  The owner keeps *Lp pointing at a state that may
 * call Lua whenever the indexer can be updated.  Raises on a duplicate
 * name. */
struct luna_watchdog_limits;
int luna_index_fn_add(lua_State *L, struct luna_indexer *idx, const char *name, int fn_idx,
                      lua_State **Lp, luna_index_fn_push push,
                      const struct luna_watchdog_limits *limits);

#endif
