/*
 * api/api.h — core.runtime: what controller scripts call under
 * `luna run` (lua/luna/init.lua and api.lua wrap it as luna.cache,
 * luna.get, luna.log, ...).  One file per namespace fills it:
 *
 *   core.runtime.current()   → {controller=, key=, reconcile_id=} | {controller=} | nil
 *                              (in a reconcile; in a predicate or watches map;
 *                              elsewhere)
 *   cache_get, cache_list, cache_by_index            api/cache.h
 *   resolve, request (yield)                         api/client.h
 *   log                                              api/log.h
 *   event_store                                      api/events.h
 *
 * Runs on the loop thread.
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
