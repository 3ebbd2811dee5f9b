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
 *   schedule                                         api/schedule.h
 *
 * What the bindings need of the runtime (its API client, discovery, shadow
 * mode, the write gate of sharding, the observer `luna test` records calls
 * with, the Event memory) is one struct luna_api_host the runtime owns and
 * hands to every state it installs the API in (api/host.h); a binding
 * finds it through luna_api_host(L), from the state's registry, as Redis
 * keeps its run context.  No file-level state is set from outside.
 *
 * Runs on the loop thread.
 */
#ifndef LUNA_API_H
#define LUNA_API_H

#include <lua.h>


struct luna_api_host;

/* Adds core.runtime to the luna.core table of L, and host to L's registry
 * (borrowed for the state's life). */
void luna_api_install(lua_State *L, struct luna_api_host *host);

#endif
