/*
 * lua_runtime.h — core.runtime: what controller scripts call under
 * `luna run` (lua/luna/init.lua wraps it as luna.cache, luna.get, ...).
 *
 *   core.runtime.current()                      → {controller=, key=, reconcile_id=} | nil
 *   core.runtime.cache_get(kind, key)           → object table | nil
 *   core.runtime.cache_list(kind [, namespace [, label_selector]]) → {object...}
 *   core.runtime.cache_by_index(kind, index, value) → {object...}
 *   core.runtime.resolve(kind)                  → resource table | nil, err    (yields)
 *   core.runtime.request(method, path [, body [, content_type]])
 *                                               → status, body | nil, err     (yields)
 *   core.runtime.log(level, msg [, fields])
 *
 * Cache reads return fresh tables decoded from the cached JSON, so a script
 * can change them freely without touching the cache.  The yielding
 * functions may only run inside a reconcile, on its own coroutine (not in
 * a coroutine the script made); anywhere else they raise.  The cache
 * functions also need a reconcile: they read the informers of the
 * controller running it, and raise for a kind the controller does not
 * watch, own or declare.
 */
#ifndef LUNA_LUA_RUNTIME_H
#define LUNA_LUA_RUNTIME_H

#include <lua.h>

#include "client/discovery.h"
#include "client/kube_client.h"

/* Adds core.runtime to the luna.core table of L.  kc and disc are borrowed
 * for the state's life. */
void luna_lua_runtime_install(lua_State *L, struct luna_kube_client *kc,
                              struct luna_discovery *disc);

#endif
