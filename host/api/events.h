/*
 * api/events.h — the Event recorders' memory as scripts' luna.event sees
 * it (lua/luna/api.lua): a store per controller that outlives the Lua
 * state (event_memory.h), so Event deduplication survives reloads.
 *
 *   core.runtime.event_store(controller) → store | nil (no memory set)
 *   store:get(key)          → count, last_us, name, namespace | nil
 *   store:put(key, count, last_us, name, namespace)
 *   store:forget(key)       → true if key was remembered
 *   store:size()            → entries remembered
 *   store:last_name_ns()    → hex | nil;  store:set_last_name_ns(hex)
 * the store interface of luna.events (lua/luna/events.md).
 *
 * A store names its controller and looks its memory up on every call, so
 * a store of a state that outlived its controller (a reload retiring)
 * never holds a freed memory.  Misuse (wrong argument types, a name too
 * long) raises.
 *
 * Runs on the loop thread.  Ownership: the memory set is the host's
 * (api/api.h, host->events: NULL when the runtime has freed it, and then
 * event_store returns nil); stores are Lua userdata.
 */
#ifndef LUNA_API_EVENTS_H
#define LUNA_API_EVENTS_H

#include <lua.h>

#include "api/event_memory.h"

/* Adds event_store to the table on top of L's stack. */
void luna_api_events_register(lua_State *L);

#endif
