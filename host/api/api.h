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
 * What the bindings need of the runtime (its API client, discovery, shadow
 * mode, the write gate of sharding, the observer `luna test` records calls
 * with, the Event memory) is one struct luna_api_host the runtime owns and
 * hands to every state it installs the API in; a binding finds it through
 * luna_api_host(L), from the state's registry, as Redis keeps its run
 * context.  No file-level state is set from outside.
 *
 * Runs on the loop thread.
 */
#ifndef LUNA_LUA_RUNTIME_H
#define LUNA_LUA_RUNTIME_H

#include <lua.h>

#include <stdbool.h>

#include "api/client.h"
#include "client/discovery.h"
#include "client/kube_client.h"

struct luna_event_memories;

/* What the runtime hands the script API.  Owned by the runtime, borrowed
 * by every state it is installed in (it outlives them); the runtime may
 * change a field between two calls on the loop (connect, sharding). */
struct luna_api_host {
    struct luna_kube_client *kc;     /* NULL until the runtime has connected */
    struct luna_discovery *disc;     /* NULL until the runtime has connected */
    bool shadow;                     /* --shadow: every write is a dry run */
    /* Sharding: a write (any method but GET and HEAD) is sent only if
     * write_allow(write_ud, &why) says so, and then with write_timeout
     * seconds at most; NULL: no gate (api/client.h). */
    bool (*write_allow)(void *ud, const char **why);
    double write_timeout;
    void *write_ud;
    struct luna_lua_client_observer observer; /* start NULL: none (api/client.h) */
    struct luna_event_memories *events;       /* NULL: none (api/events.h) */
};

/* Adds core.runtime to the luna.core table of L, and host to L's registry
 * (borrowed for the state's life). */
void luna_lua_runtime_install(lua_State *L, struct luna_api_host *host);

/* The host installed in L's state, or NULL (a state without the API). */
struct luna_api_host *luna_api_host(lua_State *L);

#endif
