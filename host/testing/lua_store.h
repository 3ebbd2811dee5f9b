/*
 * lua_store.h — core.store: the cache's C data structures, for specs.
 *
 *   core.store.object{ namespace=, name=, uid=, resource_version=,
 *                      labels={k=v}, json= }          → Object
 *   Object: :key() :name() :namespace() :uid() :resource_version()
 *           :label(k) :labels() :json() :size() :refs()
 *   core.store.indexer()                                → Indexer
 *   Indexer: :put(obj) → old|nil   :delete(key) → old|nil   :get(key)
 *            :len()  :keys() (sorted)  :by_index(name, value) → {Object} (sorted by key)
 *            :add_index(name, fn(obj) → value|{values}|nil)   :index_values(name) → {value=count}
 *   core.store.delta_fifo(indexer|nil)                  → DeltaFIFO
 *   DeltaFIFO: :add(obj) :update(obj) :delete(obj) :replace({obj...}) :resync()
 *              :pop() → key, {{type=, object=, final_state_unknown=}...} | nil
 *              :len() :has_synced() :pending(key)
 *
 * Objects handed to Lua hold their own reference (released by __gc).  An
 * indexer's Lua index functions are anchored in the registry until the
 * indexer is collected; they run only inside put/add_index on the calling
 * state, and an error in one is reported like any index function failure.
 * A DeltaFIFO keeps its indexer alive through a uservalue-style registry
 * reference.  Index functions go through lua_cache's glue
 * (luna_api_cache_add_index), here receiving Objects.
 */
#ifndef LUNA_LUA_STORE_H
#define LUNA_LUA_STORE_H

#include <lua.h>

#include "cache/object.h"

void luna_lua_store_register(lua_State *L);

/* Pushes a Lua Object for obj, taking a new reference. */
void luna_lua_store_push_object(lua_State *L, struct luna_object *obj);

/* luna_api_cache_add_index with the object passed as an Object. */
struct luna_indexer;
int luna_lua_store_add_index(lua_State *L, struct luna_indexer *idx, const char *name,
                             int fn_idx, lua_State **Lp);

#endif
