/*
 * api/cache.h — the cache as scripts see it (luna.cache in lua/luna/api.lua):
 * listers over the controller's informers, and the glue that runs a Lua
 * function as an index function.
 *
 *   core.runtime.cache_get(kind, key)                     → object table | nil
 *   core.runtime.cache_list(kind [, namespace [, label_selector]]) → {object...}
 *   core.runtime.cache_by_index(kind, index, value)       → {object...}
 *
 * Uses: controller (which informers a controller has), indexer, lua_json.
 * Runs on the loop thread.
 *
 * Reads return fresh tables decoded from the cached JSON, so a script can
 * change them freely without touching the cache.  They need a controller
 * context: a reconcile (its coroutine) or a watches map function of the
 * controller; they raise elsewhere, and for a kind the controller does not
 * watch, own or declare.
 *
 * A label selector given to cache_list is at most LUNA_CACHE_MAX_SELECTOR
 * bytes (the parsed form is C memory a few times the text's size, freed
 * with the call's userdata): a longer one raises.
 */
#ifndef LUNA_LUA_CACHE_H
#define LUNA_LUA_CACHE_H

#include <lua.h>

#include "base/error.h"
#include "cache/indexer.h"
#include "cache/object.h"

#define LUNA_CACHE_MAX_SELECTOR (16 << 10)

/* Adds cache_get, cache_list and cache_by_index to the table on top of
 * L's stack. */
void luna_lua_cache_register(lua_State *L);

/* How an index function receives the object: pushes it on L (one value)
 * and returns 0, or returns a negative code and sets err. */
typedef int (*luna_lua_cache_push_fn)(lua_State *L, const struct luna_object *obj,
                                      luna_error *err);

/* Pushes obj decoded into a fresh table (a luna_lua_cache_push_fn). */
int luna_lua_cache_push_table(lua_State *L, const struct luna_object *obj, luna_error *err);

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
int luna_lua_cache_add_index(lua_State *L, struct luna_indexer *idx, const char *name,
                             int fn_idx, lua_State **Lp, luna_lua_cache_push_fn push,
                             const struct luna_watchdog_limits *limits);

#endif
