/*
 * api/cache.h — the cache as scripts see it (luna.cache in lua/luna/api.lua):
 * listers over the controller's informers.
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
#ifndef LUNA_API_CACHE_H
#define LUNA_API_CACHE_H

#include <lua.h>


#define LUNA_CACHE_MAX_SELECTOR (16 << 10)

/* Adds cache_get, cache_list and cache_by_index to the table on top of
 * L's stack. */
void luna_api_cache_register(lua_State *L);

#endif
